#!/usr/bin/env python3
"""Benchmark the appliance: image size, MCP cold start, hook latency, switch downtime.

- image size: `docker image inspect` of the appliance image (uncompressed, as `docker images`);
- MCP cold start: from starting the `docker run -i --rm ...` command that Claude Code runs (as
  printed by image/mcp-command.sh) to the `initialize` answer on its stdout; median of N; next
  to it, measured in the same run, the same `docker run -i --rm ...` running `python3 -c pass`
  in the same image (the floor Docker and Python set), as a pair and a ratio;
- hook latency: the Stop hook as installed (`image/kael-hook`, i.e. `docker exec -i <daemon>
  kael-thread-rebuild hook-stop`) with a Stop JSON on stdin and nothing waiting, wall time around
  the whole command; median of N; next to it a bare `docker exec <daemon> true`, the floor
  Docker itself sets, measured in turn with the hook (so both see the same load);
- switch downtime (unless --no-drill): the container drill of tests/appliance (the real Claude
  Code in a tmux pane, MCP over `docker run -i`, hook via `docker exec`, the daemon container
  switching the pane), from the Stop being recorded to `activated`;
- least privilege (unless --no-household): in a household container whose Claude user has no
  Docker access (tests/appliance/sudo_household.py), timed inside it, so no `docker exec` into
  the household is counted. Before: what a Claude user in the docker group runs (`docker run
  -i --rm …`, `kael-hook --container`). After, the chosen way: the same through the root-owned
  wrapper (`sudo -n kael-run mcp|hook INSTANCE`). The other ways measured (docs/security.md):
  an MCP server started in the running daemon container (`docker exec -i <daemon>
  kael-thread-rebuild-mcp`, what a socket relay into the daemon would cost at least) and a Stop
  dropped into an inbox file (`cat > tmp && mv`, before the daemon's poll picks it up).

Targets: cold start <= 1.0 s, hook <= 0.3 s (medians), downtime < 5 s, image < 150 MB; the
same cold start and hook targets through the wrapper.
Prints each figure with PASS/FAIL; exit 0 when all pass, 1 otherwise, 2 when a step fails.

Usage: .venv/bin/python benchmarks/bench_appliance.py [--cold N] [--hooks N] [--no-drill]
       [--no-household] [--json OUT]
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.appliance import engine
from tests.appliance.household import Household, make_household
from tests.appliance.sudo_household import INSTALLED, UID, SudoHousehold, sudo_household

MAX_COLD_START = 1.0
MAX_HOOK = 0.3
MAX_DOWNTIME = 5.0
MAX_IMAGE_MB = 150.0
INITIALIZE = orjson.dumps({
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "bench", "version": "0"}}}) + b"\n"


def cold_start(command: list[str]) -> float:
    """Seconds from starting COMMAND to the initialize answer; then stdin is closed."""
    started = time.perf_counter()
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(INITIALIZE)
    proc.stdin.flush()
    answer = proc.stdout.readline()
    took = time.perf_counter() - started
    proc.stdin.close()
    proc.wait(timeout=30)
    if b'"serverInfo"' not in answer:
        raise RuntimeError(f"no initialize answer: {answer[:300]!r}")
    return took


def python_floor(mcp: list[str], image: str) -> list[str]:
    """MCP's `docker run -i --rm ...` with the same options, running `python3 -c pass` and
    answering like a server would (one line on stdout once stdin has a line)."""
    at = mcp.index(image)
    answer = "import sys; sys.stdin.readline(); print('{\"serverInfo\": 0}', flush=True)"
    return [*mcp[:at], "--entrypoint", "/opt/kael/bin/python3", image, "-c", answer]


def timed(command: list[str], stdin: bytes = b"") -> float:
    started = time.perf_counter()
    done = subprocess.run(command, input=stdin, capture_output=True, timeout=60, check=False)
    took = time.perf_counter() - started
    if done.returncode != 0 or done.stdout:
        raise RuntimeError(f"{command[0]} exited {done.returncode}: {done.stdout[:200]!r} "
                           f"{done.stderr[:300]!r}")
    return took


def measure_household(appliance: engine.Instance, home: Household, cold_runs: int,
                      hook_runs: int) -> dict[str, Any]:
    mcp = appliance.mcp_command(home.config_path, home.user)
    floor = python_floor(mcp, appliance.image)
    cold_start(mcp)  # the first run after a build pays for the page cache; not counted
    cold_start(floor)
    colds, floors = [], []
    for _ in range(cold_runs):  # in turn, so that both see the same load
        colds.append(cold_start(mcp))
        floors.append(cold_start(floor))
    appliance.run_daemon(home.config_path, home.user)
    engine.wait_for_log(home.config.state_dir / "worker.log", "daemon ready")
    stop = engine.stop_json(home.transcript.stem, home.transcript, home.root)
    hook = appliance.hook_command(home.config_path, home.config.state_dir)
    timed(hook, stop)
    hooks, bare = [], []
    for _ in range(hook_runs):
        hooks.append(timed(hook, stop))
        bare.append(timed(["docker", "exec", appliance.daemon_name, "true"]))
    if (home.config.state_dir / "hook.log").exists():
        raise RuntimeError("the hook logged something: "
                           + (home.config.state_dir / "hook.log").read_text()[-500:])
    return {"cold_start_seconds": colds, "python_pass_seconds": floors, "hook_seconds": hooks,
            "docker_exec_seconds": bare}


#: Runs in the household (its python3, as root): times each command of argv[1] (a JSON list of
#: argv lists), STDIN (argv[2]) written first, to the first line of its stdout (argv[3] `line`,
#: an MCP server) or to its exit (`exit`, a hook, which must print nothing); prints the seconds.
TIMER = r"""
import json, subprocess, sys, time
commands, stdin, until = json.loads(sys.argv[1]), sys.argv[2].encode(), sys.argv[3]
seconds = []
for command in commands:
    started = time.perf_counter()
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    proc.stdin.write(stdin)
    proc.stdin.flush()
    out = proc.stdout.readline() if until == "line" else proc.communicate()[0]
    seconds.append(time.perf_counter() - started)
    if until == "line":
        proc.stdin.close()
        proc.wait(timeout=30)
        if b'"serverInfo"' not in out:
            raise SystemExit(f"no initialize answer from {command}: {out[:300]!r}")
    elif proc.returncode or out:
        raise SystemExit(f"{command} exited {proc.returncode}: {out[:300]!r}")
print(json.dumps(seconds))
"""
#: A command of the Claude user's, from the timer running as root (no docker group: setpriv
#: takes the groups /etc/group gives the user).
AS_CLAUDE = ["setpriv", f"--reuid={UID}", f"--regid={UID}", "--init-groups"]


def timed_inside(home: SudoHousehold, commands: list[list[str]], runs: int, stdin: bytes,
                 until: str) -> list[list[float]]:
    """Each of COMMANDS run RUNS times in the household, taking turns (so that the load of the
    moment falls on all of them alike), timed there: the seconds of each command."""
    done = home.run("python3", "-c", TIMER, orjson.dumps(commands * runs).decode(),
                    stdin.decode(), until, timeout=900)
    if done.returncode != 0:
        raise RuntimeError(f"timing {commands} failed: {done.stderr.decode()[-500:]}")
    seconds: list[float] = orjson.loads(done.stdout)
    return [seconds[index::len(commands)] for index in range(len(commands))]


def measure_least_privilege(appliance: engine.Instance, root: Path, cold_runs: int,
                            hook_runs: int) -> dict[str, Any]:
    """Before and after in a household whose Claude user has no Docker (see the docstring)."""
    home_files = make_household(root, appliance.name, UID, UID)
    (root / "pointer").chmod(0o755)
    with sudo_household(root, appliance) as home:
        mcp, hook = home.allow(home_files.config_path)
        appliance.run_daemon(home_files.config_path, f"{UID}:{UID}")
        engine.wait_for_log(home_files.config.state_dir / "worker.log", "daemon ready")
        stop = engine.stop_json(home_files.transcript.stem, home_files.transcript, root)
        hook_words = shlex.split(hook)
        hook_words[0] = INSTALLED["kael-hook"]
        inbox = home_files.config.state_dir / "inbox-measure"
        colds = {  # before (a docker-group user), after (the wrapper), the daemon-served way
            "lp_cold_direct_seconds": appliance.mcp_command(home_files.config_path,
                                                            f"{UID}:{UID}"),
            "lp_cold_wrapper_seconds": AS_CLAUDE + mcp,
            "lp_cold_in_daemon_seconds": ["docker", "exec", "-i", appliance.daemon_name,
                                          "kael-thread-rebuild-mcp"],
        }
        hooks = {  # before, after, the inbox way
            "lp_hook_direct_seconds": [INSTALLED["kael-hook"], "--container",
                                       appliance.daemon_name,
                                       *hook_words[hook_words.index("--config"):]],
            "lp_hook_wrapper_seconds": AS_CLAUDE + hook_words,
            "lp_hook_inbox_seconds": [*AS_CLAUDE, "sh", "-c",
                                      f'cat > "{inbox}.tmp" && mv "{inbox}.tmp" "{inbox}"'],
        }
        figures: dict[str, Any] = {}
        for named, runs, stdin, until in ((colds, cold_runs, INITIALIZE, "line"),
                                          (hooks, hook_runs, stop, "exit")):
            timed_inside(home, list(named.values()), 1, stdin, until)  # warm the page cache
            figures.update(zip(named, timed_inside(home, list(named.values()), runs, stdin,
                                                   until), strict=True))
        if (home_files.config.state_dir / "hook.log").exists():
            raise RuntimeError("a hook logged something: "
                               + (home_files.config.state_dir / "hook.log").read_text()[-500:])
    return figures


def drill_downtime(appliance: engine.Instance, root: Path) -> float:
    from tests.appliance.test_container_drill import container_stage
    from tests.drill import live, procs

    with container_stage(root, appliance) as drill:
        drill.turn(live.P_TOOLS, live.A_TOOLS_DONE)
        drill.turn(live.P_REBUILD, live.A_REBUILD_DONE)
        op = procs.wait_for_status(drill.config, procs.SETTLED, timeout=120)
        if op.status.value != "activated" or op.hook is None:
            raise RuntimeError(f"the drill's rebuild ended {op.status.value}: {op.error}")
        activated = next(step.at for step in op.history if step.to_status.value == "activated")
        return (activated - op.hook.received_at).total_seconds()


def seconds_line(label: str, value: float, target: float, detail: str) -> tuple[str, bool]:
    """One figure in seconds against its target: (the line, whether it passes)."""
    return f"{label:<21} {value:8.3f} s      target < {target:g} s ({detail})", value < target


def least_privilege_lines(figures: dict[str, Any]) -> list[tuple[str, bool]]:
    def median(key: str) -> float:
        return float(statistics.median(figures[f"lp_{key}_seconds"]))

    return [
        seconds_line("MCP via sudo wrapper", median("cold_wrapper"), MAX_COLD_START,
                     f"household; docker run as a docker-group user {median('cold_direct'):.3f}"
                     f" s, in the running daemon {median('cold_in_daemon'):.3f} s"),
        seconds_line("hook via sudo wrapper", median("hook_wrapper"), MAX_HOOK,
                     f"household; kael-hook --container {median('hook_direct'):.3f} s, an "
                     f"inbox file {median('hook_inbox'):.4f} s"),
    ]


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cold", type=int, default=10, help="MCP cold starts (default 10)")
    parser.add_argument("--hooks", type=int, default=20, help="hook runs (default 20)")
    parser.add_argument("--no-drill", action="store_true", help="skip the switch downtime")
    parser.add_argument("--no-household", action="store_true",
                        help="skip the least-privilege household (before and after)")
    parser.add_argument("--json", type=Path, metavar="OUT", help="also write every figure here")
    args = parser.parse_args(argv)

    problem = engine.engine_problem()
    if problem:
        print(f"bench_appliance: {problem}", file=sys.stderr)
        return 2
    dock = engine.client()
    image = engine.ensure_image(dock)
    size_mb = dock.images.get(image).attrs["Size"] / 1e6
    figures: dict[str, Any] = {"image": image, "image_mb": size_mb}
    uid, gid = (4242, 4242) if os.geteuid() == 0 else (os.getuid(), os.getgid())
    try:
        with tempfile.TemporaryDirectory(prefix="kael-bench-appliance-") as temp, \
                engine.instance(dock, image) as appliance:
            home = make_household(Path(temp), appliance.name, uid, gid)
            figures.update(measure_household(appliance, home, args.cold, args.hooks))
        if not args.no_household:
            with tempfile.TemporaryDirectory(prefix="kael-bench-lp-") as temp, \
                    engine.instance(dock, image) as appliance:
                figures.update(measure_least_privilege(appliance, Path(temp), args.cold,
                                                       args.hooks))
        if not args.no_drill:
            with tempfile.TemporaryDirectory(prefix="kael-bench-drill-") as temp, \
                    engine.instance(dock, image) as appliance:
                figures["downtime_seconds"] = drill_downtime(appliance, Path(temp))
    except (RuntimeError, TimeoutError, subprocess.SubprocessError) as exc:
        print(f"bench_appliance: {exc}", file=sys.stderr)
        return 2

    cold = statistics.median(figures["cold_start_seconds"])
    cold_floor = statistics.median(figures["python_pass_seconds"])
    hook = statistics.median(figures["hook_seconds"])
    bare = statistics.median(figures["docker_exec_seconds"])
    results = [
        (f"image size            {size_mb:8.1f} MB     target < {MAX_IMAGE_MB:g} MB",
         size_mb < MAX_IMAGE_MB),
        (f"MCP cold start        {cold:8.3f} s      target <= {MAX_COLD_START:g} s "
         f"(median of {len(figures['cold_start_seconds'])}, "
         f"max {max(figures['cold_start_seconds']):.3f} s; docker run python3 -c pass "
         f"{cold_floor:.3f} s, ratio {cold / cold_floor:.2f})", cold <= MAX_COLD_START),
        (f"hook via docker exec  {hook:8.3f} s      target <= {MAX_HOOK:g} s "
         f"(median of {len(figures['hook_seconds'])}, max {max(figures['hook_seconds']):.3f} s;"
         f" bare docker exec true {bare:.3f} s, ratio {hook / bare:.2f})", hook <= MAX_HOOK),
    ]
    if "lp_cold_wrapper_seconds" in figures:
        results += least_privilege_lines(figures)
    if "downtime_seconds" in figures:
        down = figures["downtime_seconds"]
        results.append((f"switch downtime       {down:8.3f} s      target < {MAX_DOWNTIME:g} s "
                        "(container drill)", down < MAX_DOWNTIME))
    for line, ok in results:
        print(f"{verdict(ok)}  {line}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_bytes(orjson.dumps(figures, option=orjson.OPT_INDENT_2))
    return 0 if all(ok for _, ok in results) else 1


if __name__ == "__main__":
    sys.exit(main())
