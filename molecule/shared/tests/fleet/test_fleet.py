"""Day two across the households (docs/installer.md, "Day two"): an upgrade during a switch
waits for it, a drain that times out changes nothing, a broken newer image stops at the canary
and goes back, and the fleet report over every household, checked field by field.

The newer images are built here from the scenario's appliance (molecule/images/fleet): the same
image with another version label, and one whose daemon exits at once. They are given in an
inventory of their own (group_vars), as an operator gives a new image."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from conftest import REPO, SERVER, Run, daemon_of, run_json

APPLIANCE = os.environ.get("KAEL_APPLIANCE_IMAGE", "kael-thread-rebuild:latest")
REPOSITORY = APPLIANCE.rsplit(":", 1)[0]
STATE = "/var/lib/kael-thread-rebuild"


def build(tmp: Path, tag: str, version: str, broken: bool) -> Path:
    image = f"{REPOSITORY}:{tag}"
    subprocess.run(["docker", "build", "-q", "-f", "molecule/images/fleet/Containerfile",
                    "--build-arg", f"APPLIANCE={APPLIANCE}", "--build-arg", f"VERSION={version}",
                    "--build-arg", f"BROKEN={'1' if broken else ''}", "-t", image,
                    "molecule/images/fleet"], cwd=REPO, check=True, capture_output=True,
                   env={**os.environ, "DOCKER_BUILDKIT": "0"})
    out = tmp / tag
    subprocess.run(["image/save.sh", str(out)], cwd=REPO, check=True, capture_output=True,
                   env={**os.environ, "KAEL_APPLIANCE_IMAGE": image, "KAEL_ADVISOR_OUT": "-"})
    (archive,) = out.glob("*.tar.gz")
    inventory = tmp / f"inventory-{tag}"
    (inventory / "group_vars").mkdir(parents=True)
    (inventory / "hosts.yml").write_text("households:\n  hosts: {}\n")
    (inventory / "group_vars" / "households.yml").write_text(
        f"kael_image: {image}\nkael_image_archive: {archive}\n")
    return inventory


@pytest.fixture(scope="module")
def versions(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("fleet")
    return {"next": build(tmp, "fleet-next", "0.0.0-fleet.next", False),
            "broken": build(tmp, "fleet-broken", "0.0.0-fleet.broken", True)}


def start(name: str, *options: str, serial: str | None = "100%") -> subprocess.Popen[str]:
    """A playbook of the collection, by its FQCN, over the scenario's households (KAEL_SERIAL
    None: the default)."""
    env = {**os.environ, "ANSIBLE_FORCE_COLOR": "0", "ANSIBLE_NOCOLOR": "1"}
    env.pop("KAEL_SERIAL", None)
    if serial is not None:
        env["KAEL_SERIAL"] = serial
    return subprocess.Popen(
        ["ansible-playbook", "-i", os.environ["MOLECULE_INVENTORY_FILE"], *options,
         f"kael.appliance.{name.removesuffix('.yml')}"], stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, cwd=REPO, env=env)


def finish(process: subprocess.Popen[str]) -> Run:
    out, _ = process.communicate(timeout=1200)
    return Run(subprocess.CompletedProcess(process.args, process.returncode, out, ""))


def host_named(all_hosts: list[Any], suffix: str) -> Any:
    (found,) = [h for h in all_hosts if h.backend.get_hostname().endswith(suffix)]
    return found


def engine(host: Any, instance: str, *argv: str) -> Any:
    return host.run(" ".join(["docker", "exec", f"{SERVER}-{instance}", "kael-thread-rebuild",
                              *argv]))


def status_of(host: Any, instance: str) -> dict[str, Any]:
    return dict(run_json(host, "docker", "exec", f"{SERVER}-{instance}", "kael-thread-rebuild",
                         "status", "--json")["operation"])


def request(host: Any, instance: str) -> str:
    data = run_json(host, "docker", "exec", f"{SERVER}-{instance}", "kael-thread-rebuild",
                    "request", "--reason", "fleet-drill", "--confirm", "REBUILD", "--json")
    return str(data["operation"]["operation_id"])


def wait_for(check: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(1)


def at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")[:26] + "+00:00"
                                  if "." in text else text.replace("Z", "+00:00"))


def test_an_upgrade_waits_for_the_switch_in_flight(all_hosts: list[Any],
                                                  versions: dict[str, Path]) -> None:
    a = host_named(all_hosts, "-a")
    note = f"{STATE}/companion/draining"
    name = request(a, "companion")
    upgrade = start("install.yml", "-i", str(versions["next"]),
                    "--limit", a.backend.get_hostname())
    wait_for(lambda: a.file(note).exists, 600, "the drain note")
    assert "the installer replaces the daemon (new image" in a.file(note).content_string
    # The Stop: the human talks once more; the switch runs while the installer waits.
    target = "companion-DO-NOT-CREATE:0.0"
    a.run(f"runuser -u alice -- tmux send-keys -t {target} -l 'Say ok, nothing else.'")
    time.sleep(1)
    a.run(f"runuser -u alice -- tmux send-keys -t {target} Enter")
    done = finish(upgrade)
    assert done.returncode == 0, done.tail()
    assert "; waited " in done.out and f" s for operation {name} (last seen " in done.out, \
        done.tail()
    op = status_of(a, "companion")
    assert (op["operation_id"], op["status"]) == (name, "activated")
    activated = next(t["at"] for t in op["history"] if t["to_status"] == "activated")
    daemon = daemon_of(a, "companion")
    assert daemon["Config"]["Labels"]["org.opencontainers.image.version"] == "0.0.0-fleet.next"
    assert at(daemon["State"]["StartedAt"]) > at(activated)
    assert not a.file(note).exists
    assert a.run(f"docker image inspect {REPOSITORY}:previous").rc == 0


def test_a_drain_that_times_out_changes_nothing(all_hosts: list[Any],
                                                versions: dict[str, Path]) -> None:
    b = host_named(all_hosts, "-b")
    before = {i: daemon_of(b, i)["Id"] for i in ("alice-companion", "bob-workbench")}
    configs = {i: b.file(f"/etc/kael-thread-rebuild/{i}.toml").content_string
               for i in before}
    name = request(b, "bob-workbench")  # nobody talks to bob: no Stop comes
    upgrade = start("install.yml", "-i", str(versions["next"]), "-e", "kael_drain_timeout=40",
                    "--limit", b.backend.get_hostname())
    wait_for(lambda: b.file(f"{STATE}/alice-companion/draining").exists, 600, "the drain note")
    refused = engine(b, "alice-companion", "request", "--reason", "r", "--confirm", "REBUILD")
    assert refused.rc == 1
    assert refused.stderr.startswith("kael-thread-rebuild: the installer is replacing this "
                                     "instance's daemon (since ")
    assert refused.stderr.endswith("nothing was recorded: ask again in a few minutes\n")
    done = finish(upgrade)
    assert done.returncode != 0
    assert (f"bob-workbench: operation {name} is still pending after 40 s (kael_drain_timeout); "
            "nothing on this host was changed") in done.out, done.tail()
    assert {i: daemon_of(b, i)["Id"] for i in before} == before
    assert {i: b.file(f"/etc/kael-thread-rebuild/{i}.toml").content_string
            for i in before} == configs
    for instance in before:
        assert not b.file(f"{STATE}/{instance}/draining").exists
    assert engine(b, "bob-workbench", "cancel", "--operation", name, "--confirm", "CANCEL").rc == 0


def test_a_broken_image_stops_at_the_canary_which_goes_back(all_hosts: list[Any],
                                                            versions: dict[str, Path]) -> None:
    a, b, c = (host_named(all_hosts, s) for s in ("-a", "-b", "-c"))
    others = {h: {i: daemon_of(h, i)["Id"] for i in
                  (["alice-companion", "bob-workbench"] if h is b else ["unit-companion"])}
              for h in (b, c)}
    done = finish(start("install.yml", "-i", str(versions["broken"]), serial=None))
    assert done.returncode != 0
    hostname = a.backend.get_hostname()
    assert set(done.recap) == {hostname}, done.recap  # the canary alone
    assert done.recap[hostname][2] == 1
    assert "companion: doctor is not green." in done.out
    assert "daemon" in done.out
    assert f"companion: went back to {REPOSITORY}:previous and its previous config; doctor " \
           "green again." in done.out, done.tail()
    daemon = daemon_of(a, "companion")
    assert daemon["Config"]["Labels"]["org.opencontainers.image.version"] == "0.0.0-fleet.next"
    assert daemon["State"]["Running"]
    for host, ids in others.items():
        assert {i: daemon_of(host, i)["Id"] for i in ids} == ids


def edit_json(host: Any, user: str, path: str, change: str) -> Any:
    """Change the JSON file PATH as USER (CHANGE is a statement on its data, `d`)."""
    code = (f"import json, sys; p = sys.argv[1]; d = json.load(open(p)); {change}; "
            "open(p, 'w').write(json.dumps(d))")
    return host.run(f"runuser -u {user} -- python3 -c {shlex.quote(code)} {path}")


@pytest.fixture
def drift(all_hosts: list[Any], tmp_path: Path) -> Iterator[Path]:
    """Household a's Claude Code 'updated itself' (its registry entry names a version nobody
    verified), bob's settings lost our hook, household c's daemon stopped; put back after."""
    a, b, c = (host_named(all_hosts, s) for s in ("-a", "-b", "-c"))
    registry = a.run("ls -t /home/alice/.claude/sessions/*.json | head -n 1").stdout.strip()
    entry = a.file(registry).content_string
    settings = "/home/bob/.claude/settings.json"
    kept = b.file(settings).content_string
    assert edit_json(a, "alice", registry, "d['version'] = '2.1.999'").rc == 0
    assert edit_json(b, "bob", settings, "d.get('hooks', {}).pop('Stop', None)").rc == 0
    assert c.run(f"docker stop {SERVER}-unit-companion").rc == 0
    unreachable = tmp_path / "gone"
    (unreachable / "host_vars").mkdir(parents=True)
    (unreachable / "hosts.yml").write_text(
        "households:\n  hosts:\n    household-gone:\n"
        "      ansible_connection: community.docker.docker\n"
        "      ansible_host: kael-molecule-DO-NOT-CREATE-gone\n")
    yield unreachable
    c.run(f"docker start {SERVER}-unit-companion")
    b.run(f"cat > {settings} <<'EOF'\n{kept}\nEOF")
    b.run(f"chown bob: {settings}")
    a.run(f"cat > {registry} <<'EOF'\n{entry}\nEOF")


def advised(all_hosts: list[Any], suffix: str, user: str) -> bool:
    """Whether the scenario's inventory gives USER of that household the advisor."""
    entries = host_named(all_hosts, suffix).ansible.get_variables().get("kael_advisor") or []
    return any(e.get("user") == user and e.get("state", "present") != "absent" for e in entries)


def test_the_fleet_report(all_hosts: list[Any], drift: Path, tmp_path: Path) -> None:
    report = tmp_path / "fleet.json"
    done = finish(start("status.yml", "-i", str(drift), "--check", "-e",
                        f"kael_status_report={report}"))
    print(done.out[-6000:])
    rows = json.loads(report.read_text())["rows"]
    by = {(r["household"].rsplit("-", 1)[-1], r.get("instance")): r for r in rows}
    assert set(by) == {("a", "companion"), ("b", "alice-companion"), ("b", "bob-workbench"),
                       ("c", "unit-companion"), ("gone", None)}
    gone = by["gone", None]
    assert (gone["reachable"], gone["problem"]) == (False, "unreachable")

    a = by["a", "companion"]
    assert (a["base"], a["appliance"]["version"], a["appliance"]["running"]) == (
        "tmux", "0.0.0-fleet.next", True)
    assert a["claude_code"] == {"version": "2.1.999", "verified": False}
    assert [d["what"] for d in a["drift"]] == ["Claude Code 2.1.999 not verified"]
    assert a["drift"][0]["fix"]
    assert a["last_operation"]["status"] == "activated" and a["last_operation"]["age_seconds"] >= 0
    assert "claude_version" in a["doctor"]["warnings"]
    # The scenario's inventory still names the first image: a's doctor says its daemon does not
    # run the installed one.
    assert a["doctor"]["ok"] is False
    assert [f.split(":")[0] for f in a["doctor"]["failed"]] == ["versions"]
    assert a["advisor"] is advised(all_hosts, "-a", "alice")
    assert a["dirty"]["budget_bytes"] == 524288 and a["dirty"]["share"] >= 0

    bob = by["b", "bob-workbench"]
    assert bob["advisor"] is advised(all_hosts, "-b", "bob")
    assert bob["dirty"]["budget_bytes"] == 1048576
    assert bob["last_operation"]["status"] == "cancelled"
    assert [d["what"] for d in bob["drift"]] == ["settings lost the Stop hook"]
    assert bob["doctor"]["ok"] is False
    assert any(line.startswith("stop_hook: ") and " Fix: " in line
               for line in bob["doctor"]["failed"])
    alice = by["b", "alice-companion"]
    assert (alice["drift"], alice["doctor"]["ok"], alice["appliance"]["running"]) == (
        [], True, True)
    assert alice["appliance"]["version"] not in ("0.0.0-fleet.next", "0.0.0-fleet.broken")

    c = by["c", "unit-companion"]
    assert (c["base"], c["appliance"]["running"]) == ("systemd", False)
    (stopped,) = [d for d in c["drift"] if d["what"] == "daemon not running"]
    assert f"docker start {SERVER}-unit-companion" in stopped["fix"]
    assert "daemon" in c["doctor"]["warnings"] or not c["doctor"]["ok"]
    assert c["claude_code"]["verified"] is True

    table = done.out
    assert "NOT VERIFIED" in table and "SETTINGS LOST THE STOP HOOK" in table
    assert "DAEMON NOT RUNNING" in table and "UNREACHABLE" in table
