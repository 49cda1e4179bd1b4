"""`.ci/demo`: a demo household, installed by the real playbook and switched live.

It builds a household the way the Molecule scenarios do (molecule/images): a Debian container with
systemd, its own Docker engine, a user `alice` with Claude Code in ~/.local and a loopback stand-in
for Anthropic's Messages API. Claude Code is typed into alice's tmux pane and holds a conversation
there (a few dozen turns, long command outputs, thinking, a picture, English and Chinese); then the
appliance is installed with kael.appliance.install (the collection built from this checkout and
installed from its tarball) over Ansible's docker connection, Claude Code is restarted with
--continue as the play says, the human asks for a rebuild, the model calls the request tool with
REBUILD, the Stop hook schedules it and the daemon switches the pane to the rebuilt session. A
message typed into the new session shows what its model was shown. The report gives the figures and
where the evidence lies.

Run as root after .ci/setup: it runs .ci/docker-up --no-build first (Docker and debootstrap
installed, the engine started when none answers). Logs: .tools/demo/<container>/. The
household is removed at the end unless --keep. Names (to run beside the Molecule scenarios on
one engine): KAEL_MOLECULE_NAME (container <name>-demo), KAEL_MOLECULE_TAG,
KAEL_APPLIANCE_IMAGE.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

from tests.support import collection

from .household import REPO, Household, Names
from .report import Report
from .steps import StepFailed, Steps, run_logged, shown

STEPS = 7


def engine(logs: Path) -> None:
    """Docker and debootstrap installed, the engine answering (the base image needs both)."""
    run_logged([str(REPO / ".ci/docker-up"), "--no-build"], logs / "docker-up.log",
               ".ci/docker-up --no-build")


def demo(place: Household, steps: Steps, report_json: Path | None) -> Report:
    logs = place.logs
    steps.run("a Docker engine (.ci/docker-up --no-build)", lambda: engine(logs),
              "run .ci/docker-up as root and read .tools/dockerd.log")
    steps.run(f"the household image {place.names.image} and the saved appliance "
              f"{place.names.appliance} (molecule/images/build.sh)", place.build_images,
              f"read {shown(logs / 'build.log')} and .tools/molecule/build-*.log")
    steps.run(f"start the household container {place.name} (systemd as PID 1)", place.start,
              "check `docker info`; the image needs cgroup v2 and SYS_ADMIN")
    steps.run("the household talks: alice types `claude …` into her tmux pane and holds a "
              "conversation with the stand-in (molecule/shared/prepare.yml)",
              lambda: place.playbook("molecule/shared/prepare.yml", "prepare.log"),
              f"read {shown(logs / 'prepare.log')} (the pane at the failure is in it); run again "
              "with --keep to look inside")
    steps.run("install the appliance: ansible-playbook kael.appliance.install (the collection "
              "built from this checkout) over the docker connection",
              lambda: place.playbook(collection.playbook("install"), "install.log"),
              f"read {shown(logs / 'install.log')}; docs/installer.md says what each role needs")
    def switch() -> None:
        try:
            place.playbook("molecule/shared/drill.yml", "switch.log")
        except StepFailed as failure:
            raise StepFailed(f"{failure}\n  {place.drill_failure()}", failure.advice) from None

    steps.run("live switch: /exit, claude --continue, the human asks for a rebuild, the model "
              "calls the request tool, the Stop hook, the switch (molecule/shared/drill.yml)",
              switch,
              f"read {shown(logs / 'switch.log')} (the drill's error and the pane); run again "
              f"with --keep, then `{place.status_line()}` (docs/operating.md)")

    def read() -> Report:
        result = place.result()
        if report_json is not None:
            report_json.write_text(json.dumps(result, ensure_ascii=False) + "\n")
        return Report.of(result)

    return steps.run("read the operation record and the stand-in's log", read)


def main() -> int:
    parser = argparse.ArgumentParser(prog=".ci/demo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keep", action="store_true",
                        help="keep the household running and print how to attach to its pane")
    parser.add_argument("--result-json", type=Path, help=argparse.SUPPRESS)  # the test reads it
    args = parser.parse_args()
    names = Names.from_environment()
    logs = REPO / ".tools" / "demo" / names.container
    shutil.rmtree(logs, ignore_errors=True)
    logs.mkdir(parents=True)
    place = Household(names, logs)
    steps = Steps(STEPS)
    print(f"demo: household {names.container} from {names.image}; logs in {shown(logs)}")
    try:
        report = demo(place, steps, args.result_json)
        print(f"\n== report ({steps.elapsed():.0f} s in all)")
        print("\n".join(report.lines()))
    finally:
        if place.started and args.keep:
            print(f"\nkept: attach to alice's pane (detach: Ctrl-b d) and talk to Claude Code:\n"
                  f"  {place.attach_line()}\n"
                  "(the stand-in API answers a new message with how many messages it was shown)\n"
                  f"the engine's view of it:\n  {place.status_line()}\n"
                  f"remove it: docker rm -f -v {place.name}")
        elif place.started:
            place.remove()
            print(f"removed the household {place.name} (--keep keeps it)")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except StepFailed as failure:  # raised outside a step
        print(f"demo: {failure}", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)
