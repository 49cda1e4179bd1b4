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
  operation) to the `activated` transition (the new session healthy: registered by Claude Code
  and up, or alive for `health_window_seconds`), from the operation record's timestamps; with
  its phases.

The phases of the downtime, each from one mark to the next: the hook records the Stop
(`scheduled`), the worker picks it up (`running`), Claude Code records the Stop
(`stop_hook_summary` of the old transcript, written once the hook process returned), the
transcript is stable and backed up and the candidate written (`verifying`), the checks before
the switch (`activating`), the old process stopped and the new one started (its registry entry's
`startedAt`), the new session healthy (`activated`). A phase can be negative when its mark comes
before the previous one (Claude Code recording the Stop before the worker picked it up).

With `--baseline-src DIR` (e.g. `src` of another commit, exported with `git archive`), the
runs alternate between that engine (on the PYTHONPATH of the daemon, the hook and the MCP
server) and this tree's, so that both sets of figures come from the same conditions.

Targets (issue 11): hook-stop < 0.3 s (max over every Stop), downtime median <= 3 s. Exit status
0 when both hold for this tree, 1 when one does not, 2 when a drill fails.

Usage: .venv/bin/python benchmarks/bench_switch.py [--runs 5] [--json OUT] [--baseline-src DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.drill import live, procs

from kael_thread_rebuild.claude_code import registry
from kael_thread_rebuild.operations.model import Operation, OperationStatus

MAX_HOOK_SECONDS = 0.3
MEDIAN_DOWNTIME_SECONDS = 3.0
PACKAGE = "kael_thread_rebuild"
ALONE_RUNS = 5
# Each phase runs from one mark to the next; marks are operation transitions, plus `stop`
# (the `stop_hook_summary` Claude Code wrote for the scheduling Stop) and `started` (the
# `startedAt` of the new Claude Code process's registry entry).
MARKS = ["hook", "scheduled", "running", "stop", "verifying", "activating", "started",
         "activated"]
PHASE_NAMES = ["hook records the Stop", "worker picks up", "Stop recorded by Claude Code",
               "stable+backup+plan+candidate", "checks (source, identity)",
               "old stopped, new started", "healthy"]


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


def _last_stop_summary(transcript: Path) -> float:
    """When Claude Code wrote the last `stop_hook_summary` record of TRANSCRIPT (epoch s)."""
    for line in reversed(transcript.read_bytes().splitlines()):
        record = orjson.loads(line)
        if record.get("subtype") == "stop_hook_summary":
            return datetime.fromisoformat(record["timestamp"].replace("Z", "+00:00")).timestamp()
    raise RuntimeError(f"no stop_hook_summary in {transcript}")


def _marks(drill: live.Stage, op: Operation, old: str) -> dict[str, float]:
    entry = registry.entry_for_tree(drill.env.config_dir, drill.pane()[1])
    if op.hook is None or entry is None or entry.started_at is None:
        raise RuntimeError("the drill left no Stop record or no registry entry for the new "
                           "session")
    marks = {to: _at(op, to) for to in ("scheduled", "running", "verifying", "activating",
                                        "activated")}
    marks["hook"] = op.hook.received_at.timestamp()
    marks["stop"] = _last_stop_summary(drill.env.session_path(old))
    marks["started"] = entry.started_at / 1000
    return marks


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
        marks = _marks(drill, op, old)
        phases = {name: marks[to] - marks[start]
                  for name, start, to in zip(PHASE_NAMES, MARKS, MARKS[1:], strict=False)}
        return {
            "operation_id": op.operation_id,
            "hook_seconds": hooks,
            "scheduling_hook_seconds": hooks[-1],
            "hook_alone_seconds": alone,
            "downtime_seconds": marks["activated"] - marks["hook"],
            "phases": phases,
        }


def _line(name: str, values: list[float], target: float | None = None,
          median_target: float | None = None) -> str:
    median = statistics.median(values)
    text = f"{name:<34} median {median:6.3f} s   max {max(values):6.3f} s   (n={len(values)})"
    if target is not None:
        text += f"   target max < {target:g} s: {'ok' if max(values) < target else 'MISSED'}"
    if median_target is not None:
        text += (f"   target median <= {median_target:g} s: "
                 f"{'ok' if median <= median_target else 'MISSED'}")
    return text


def _summary(runs: list[dict[str, Any]]) -> bool:
    """Print the figures of RUNS; whether they meet the targets."""
    hooks = [seconds for run in runs for seconds in run["hook_seconds"]]
    downtime = [run["downtime_seconds"] for run in runs]
    print(_line("hook-stop (every Stop)", hooks, MAX_HOOK_SECONDS))
    print(_line("hook-stop (the scheduling one)", [run["scheduling_hook_seconds"] for run in runs]))
    print(_line("hook-stop alone", [t for run in runs for t in run["hook_alone_seconds"]]))
    print(_line("switch downtime", downtime, median_target=MEDIAN_DOWNTIME_SECONDS))
    for name in PHASE_NAMES:
        print(_line(f"  {name}", [run["phases"][name] for run in runs]))
    return max(hooks) < MAX_HOOK_SECONDS and statistics.median(downtime) <= MEDIAN_DOWNTIME_SECONDS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="live drills to run (default 5)")
    parser.add_argument("--json", type=Path, metavar="OUT", help="also write every figure here")
    parser.add_argument("--baseline-src", type=Path, metavar="DIR",
                        help="also run the engine from DIR (another version's `src`), "
                             "alternating with this one, --runs times each")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    if args.baseline_src is not None and not (args.baseline_src / PACKAGE).is_dir():
        parser.error(f"--baseline-src: no {PACKAGE} package in {args.baseline_src}")

    versions = [("this tree", None)]
    if args.baseline_src is not None:
        versions.insert(0, ("baseline", args.baseline_src.resolve()))
    runs: dict[str, list[dict[str, Any]]] = {label: [] for label, _ in versions}
    for number in range(1, args.runs + 1):
        for label, src in versions:
            # The daemon, the hook and the MCP server inherit this environment.
            os.environ.pop("PYTHONPATH", None)
            if src is not None:
                os.environ["PYTHONPATH"] = str(src)
            # A Claude Code process still exiting may write into the tree while it is removed.
            with tempfile.TemporaryDirectory(prefix="kael-bench-switch-",
                                             ignore_cleanup_errors=True) as temp:
                try:
                    run = one_drill(Path(temp))
                except (RuntimeError, TimeoutError) as exc:
                    print(f"run {number} ({label}): the drill failed: {exc}", file=sys.stderr)
                    return 2
            runs[label].append(run)
            print(f"run {number} ({label}): downtime {run['downtime_seconds']:.3f} s, "
                  f"scheduling hook-stop {run['scheduling_hook_seconds']:.3f} s", flush=True)
    os.environ.pop("PYTHONPATH", None)

    met = True
    for label, _ in versions:
        print(f"\n{label}:")
        met = _summary(runs[label])  # the last one printed, this tree's, decides
    if args.json:
        args.json.write_bytes(orjson.dumps(runs, option=orjson.OPT_INDENT_2))
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
