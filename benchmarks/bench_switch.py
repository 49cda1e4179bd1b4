#!/usr/bin/env python3
"""Benchmark the live switch: hook-stop latency and switch downtime over N live drills.

Each run is the live drill of `tests/drill/` up to the switch: the real Claude Code interactive in
a tmux pane on a private socket, our Stop hook and MCP server in its isolated config dir, the
daemon (`kael-thread-rebuild serve`) as its own process, and the loopback stand-in API. Three
turns (a big Bash output, thinking, then the model's `thread_rebuild_request`), then the daemon
switches the pane to the rebuilt session.

Figures, with the config's default timings unless overridden:

- hook-stop latency: the `durationMs` Claude Code itself records for our Stop hook command
  (`stop_hook_summary` records of the old transcript: every turn's Stop, start-up of the command
  included), and apart the Stop that scheduled the rebuild;
- hook-stop alone: the same command run directly after the drill (nothing waiting), wall time
  around the whole process, to tell its own cost from the contention of a live turn;
- switch downtime: from the Stop hook's input being recorded (`hook.received_at` of the
  operation) to the `activated` transition (the new session alive for `health_window_seconds`
  and registered by Claude Code), from the operation record's timestamps; with its phases.

Targets: hook-stop < 0.3 s (max over every Stop), downtime < 5 s (max). Exit status 0 when both
hold, 1 when one does not, 2 when a drill fails.

Usage: .venv/bin/python benchmarks/bench_switch.py [--runs 5] [--json OUT]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.drill import live, procs

from kael_thread_rebuild.operations.model import Operation, OperationStatus

MAX_HOOK_SECONDS = 0.3
MAX_DOWNTIME_SECONDS = 5.0
ALONE_RUNS = 5
PHASES = [("pickup", "scheduled", "running"), ("prepare", "running", "verifying"),
          ("checks", "verifying", "activating"), ("switch+health", "activating", "activated")]


def _hook_durations(transcript: Path) -> list[float]:
    """Seconds Claude Code recorded for our hook-stop command, one per Stop, in order."""
    found = []
    for line in transcript.read_bytes().splitlines():
        record = orjson.loads(line)
        if record.get("subtype") != "stop_hook_summary":
            continue
        found += [info["durationMs"] / 1000 for info in record.get("hookInfos", [])
                  if "hook-stop" in info.get("command", "")]
    return found


def _at(op: Operation, to: str) -> float:
    return next(step.at.timestamp() for step in op.history if step.to_status.value == to)


def one_drill(root: Path) -> dict[str, Any]:
    with live.stage(root) as drill:
        drill.turn(live.P_TOOLS, live.A_TOOLS_DONE)
        drill.turn(live.P_THINK, live.A_THINK)
        old = drill.registry_session()
        drill.turn(live.P_REBUILD, live.A_REBUILD_DONE)
        op = procs.wait_for_status(drill.config, procs.SETTLED, timeout=120)
        if op.status is not OperationStatus.activated or op.hook is None or old is None:
            raise RuntimeError(f"the drill's rebuild ended {op.status.value}: {op.error}")
        hooks = _hook_durations(drill.env.session_path(old))
        stop = orjson.dumps({"session_id": old, "hook_event_name": "Stop",
                             "transcript_path": str(drill.env.session_path(old))})
        alone = []
        for _ in range(ALONE_RUNS):
            started = time.perf_counter()
            drill.cli("hook-stop", stdin=stop)
            alone.append(time.perf_counter() - started)
        phases = {name: _at(op, to) - _at(op, start) for name, start, to in PHASES}
        return {
            "operation_id": op.operation_id,
            "hook_seconds": hooks,
            "scheduling_hook_seconds": hooks[-1],
            "hook_alone_seconds": alone,
            "downtime_seconds": _at(op, "activated") - op.hook.received_at.timestamp(),
            "phases": phases,
        }


def _line(name: str, values: list[float], target: float | None = None) -> str:
    text = (f"{name:<28} median {statistics.median(values):6.3f} s   "
            f"max {max(values):6.3f} s   (n={len(values)})")
    if target is not None:
        text += f"   target < {target:g} s: {'ok' if max(values) < target else 'MISSED'}"
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="live drills to run (default 5)")
    parser.add_argument("--json", type=Path, metavar="OUT", help="also write every figure here")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")

    runs = []
    for number in range(1, args.runs + 1):
        with tempfile.TemporaryDirectory(prefix="kael-bench-switch-") as temp:
            try:
                run = one_drill(Path(temp))
            except (RuntimeError, TimeoutError) as exc:
                print(f"run {number}: the drill failed: {exc}", file=sys.stderr)
                return 2
        runs.append(run)
        print(f"run {number}: downtime {run['downtime_seconds']:.3f} s, scheduling hook-stop "
              f"{run['scheduling_hook_seconds']:.3f} s", flush=True)

    hooks = [seconds for run in runs for seconds in run["hook_seconds"]]
    scheduling = [run["scheduling_hook_seconds"] for run in runs]
    downtime = [run["downtime_seconds"] for run in runs]
    print()
    print(_line("hook-stop (every Stop)", hooks, MAX_HOOK_SECONDS))
    print(_line("hook-stop (the scheduling one)", scheduling))
    print(_line("hook-stop alone", [t for run in runs for t in run["hook_alone_seconds"]]))
    print(_line("switch downtime", downtime, MAX_DOWNTIME_SECONDS))
    for name, _, _ in PHASES:
        print(_line(f"  {name}", [run["phases"][name] for run in runs]))
    if args.json:
        args.json.write_bytes(orjson.dumps({"runs": runs}, option=orjson.OPT_INDENT_2))
    met = max(hooks) < MAX_HOOK_SECONDS and max(downtime) < MAX_DOWNTIME_SECONDS
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
