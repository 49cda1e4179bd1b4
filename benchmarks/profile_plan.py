"""Where `plan` spends its CPU beyond parsing: a breakdown in CPU seconds (issue 11).

CPU time, not wall time: on a shared machine the wall clock mostly measures the other
processes, while the CPU a step costs stays put. Each step runs `--repeat` times and the least
is kept. The steps, each on the same transcript with a warm page cache:

- floor: a fresh `python -c` child parses every line with orjson (bench_plan.py's floor);
- parse: the same loop in this process (no interpreter start-up);
- read: the engine's reader (`read_records`) alone;
- classify: the reader plus `Classifier.classify_all` (every record), one process, no digest;
- scan 1 proc: `scan(parallel=False)` (the SHA-256 thread added);
- scan 2 procs: `scan(parallel=True)`, this process and its forked reader together;
- start-up: the CLI's `plan --json` on a one-turn transcript (imports, config, report);
- plan: the CLI's `plan --json` on the transcript, the whole process tree (its scan cache is
  deleted first, as bench_plan.py does).

The differences between consecutive steps are what each layer adds. Run with the project's
virtualenv Python: `.venv/bin/python benchmarks/profile_plan.py --size-mb 200`.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import orjson

from bench_plan import FLOOR_CODE, MIB, default_cli, ensure_transcript, warm_cache, write_config
from kael_thread_rebuild.conversation.records import Classifier, SpeechRules
from kael_thread_rebuild.conversation.scan import scan
from kael_thread_rebuild.transcript.reader import READ_BUFFER, ReadStats, read_records

NO_TOOLS = SpeechRules((), ())


def cpu_seconds() -> float:
    """CPU of this process and of the children it has reaped so far."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def cpu_of(step: Callable[[], object]) -> float:
    started = cpu_seconds()
    step()
    return cpu_seconds() - started


def child_cpu(argv: list[str], stdout: Path) -> float:
    """CPU of one child process and every process it reaped (`wait4`)."""
    with stdout.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{argv[0]} exited {proc.returncode}")
    return usage.ru_utime + usage.ru_stime


def parse_only(path: Path) -> None:
    loads = orjson.loads
    with path.open("rb") as lines:
        for line in lines:
            loads(line)


def read_only(path: Path) -> None:
    with path.open("rb", buffering=READ_BUFFER) as handle:
        for _ in read_records(handle.fileno(), 0, path.stat().st_size, ReadStats(),
                              settle=Classifier(NO_TOOLS).settle):
            pass


def classify_only(path: Path) -> None:
    read = Classifier(NO_TOOLS)
    tally: dict[str, int] = {}
    with path.open("rb", buffering=READ_BUFFER) as handle:
        read.classify_all(read_records(handle.fileno(), 0, path.stat().st_size, ReadStats(),
                                       settle=read.settle), tally)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--size-mb", type=float, default=200.0, help="transcript size in MiB")
    parser.add_argument("--repeat", type=int, default=3, help="runs per step (least is kept)")
    parser.add_argument("--seed", type=int, default=0, help="generator seed")
    parser.add_argument("--cache-dir", type=Path, help="generate into (and reuse from) DIR")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="ktr-profile-"))
    try:
        data = args.cache_dir.resolve() if args.cache_dir else work
        data.mkdir(parents=True, exist_ok=True)
        path, _ = ensure_transcript(data, args.size_mb, args.seed, "first-turn")
        tiny, _ = ensure_transcript(data, 0.01, args.seed, "first-turn")
        config = write_config(work, data)
        warm_cache(path)
        out = work / "stdout"

        def cli_plan(transcript: Path) -> Callable[[], float]:
            argv = [*default_cli(), "--config", str(config), "plan", "--transcript",
                    str(transcript), "--json"]

            def run() -> float:
                shutil.rmtree(work / "state" / "scan-cache", ignore_errors=True)
                return child_cpu(argv, out)
            return run

        floor_argv = [sys.executable, "-c", FLOOR_CODE, str(path)]
        steps: list[tuple[str, Callable[[], float]]] = [
            ("floor (child)", lambda: child_cpu(floor_argv, out)),
            ("parse", lambda: cpu_of(lambda: parse_only(path))),
            ("read", lambda: cpu_of(lambda: read_only(path))),
            ("classify", lambda: cpu_of(lambda: classify_only(path))),
            ("scan 1 proc", lambda: cpu_of(lambda: scan(path, NO_TOOLS, parallel=False))),
            ("scan 2 procs", lambda: cpu_of(lambda: scan(path, NO_TOOLS, parallel=True))),
            ("start-up (CLI)", cli_plan(tiny)),
            ("plan (CLI)", cli_plan(path)),
        ]
        print(f"{path.stat().st_size / MIB:.1f} MiB, CPU seconds, least of {args.repeat} "
              f"(load average {os.getloadavg()[0]:.1f})")
        figures: dict[str, float] = {}
        for name, step in steps:
            figures[name] = min(step() for _ in range(args.repeat))
            print(f"  {name:<16} {figures[name]:7.3f}", flush=True)
        floor = figures["floor (child)"]
        print(f"  plan/floor CPU   {figures['plan (CLI)'] / floor:7.2f}")
        print(f"  reader adds      {figures['read'] - figures['parse']:7.3f}")
        print(f"  classify adds    {figures['classify'] - figures['read']:7.3f}")
        print(f"  digest adds      {figures['scan 1 proc'] - figures['classify']:7.3f}")
        print(f"  fork adds        {figures['scan 2 procs'] - figures['scan 1 proc']:7.3f}")
        print(f"  CLI adds         {figures['plan (CLI)'] - figures['scan 2 procs']:7.3f}")
        print(f"load average after: {os.getloadavg()[0]:.1f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
