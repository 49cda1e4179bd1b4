#!/usr/bin/env python3
"""Peak memory of `plan` and `candidate` (whole process tree) against a read-only floor.

Sessions are generated (or reused from --cache-dir) by `gen_transcript.py`:

- chat: --messages short messages (default 1,000,000), a user prompt and an answer in turn;
- single line: one turn whose command output is one line of --line-mb MiB (default 500);
- realistic: a long tool-using session of each size in --sizes MiB (default none; the issue's
  figures are 200, 1024 and 4096), as `bench_plan.py` generates it.

On each, three commands run one after the other, each in a fresh child process:

- floor: reads the file line by line (binary, no parsing): what holding the largest line costs;
- plan: `kael-thread-rebuild --config <cfg> plan --transcript <file> --json`;
- candidate: `... candidate --transcript <file> --output-dir <dir> --json`.

The peak of the process tree is the highest sum, over the command and every process it forked,
of their resident set sizes, sampled every 5 ms from /proc (pages a forked reader shares with
its parent count twice: the figure errs high). Wall time is from spawn to exit. Targets (spec
§3, issue 8): on the chat, plan and candidate below --max-mib (200); on the single line, no more
than the line's size plus --line-extra-mib (100); on the realistic sessions (issue 11), below
--realistic-max-mib (100). Exit status 0 when every target passes, 1
otherwise. This is a benchmark, not a test: run it by hand; it takes minutes.

Usage: .venv/bin/python benchmarks/bench_memory.py [--messages 1000000] [--line-mb 500]
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import orjson

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_plan import (  # noqa: E402
    default_cli,
    ensure_transcript,
    generator_digest,
    warm_cache,
)
from gen_transcript import generate_shape  # noqa: E402

MIB = 1024 * 1024
SAMPLE_SECONDS = 0.005

FLOOR_CODE = """\
import sys
n = 0
with open(sys.argv[1], "rb") as f:
    for line in f:
        n += 1
print(n)
"""


@dataclass
class Measured:
    label: str
    seconds: float
    peak_bytes: int
    returncode: int
    stderr: str

    @property
    def mib(self) -> float:
        return self.peak_bytes / MIB


def _rss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _tree(pid: int) -> list[int]:
    """PID and all its descendants (children of children included)."""
    found, queue = [], [pid]
    while queue:
        current = queue.pop()
        found.append(current)
        try:
            with open(f"/proc/{current}/task/{current}/children") as listing:
                queue.extend(int(child) for child in listing.read().split())
        except OSError:
            continue
    return found


def measure(label: str, argv: list[str], work: Path, timeout: float) -> Measured:
    """Run ARGV to its end, sampling the resident memory of its whole process tree."""
    err_path = work / f"{label}.stderr"
    with open(work / f"{label}.stdout", "wb") as out, open(err_path, "wb") as err:
        started = time.perf_counter()
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err)
        peak = 0
        deadline = time.monotonic() + timeout
        while proc.poll() is None:
            peak = max(peak, sum(_rss_bytes(pid) for pid in _tree(proc.pid)))
            if time.monotonic() > deadline:
                proc.kill()
            time.sleep(SAMPLE_SECONDS)
        seconds = time.perf_counter() - started
    stderr = err_path.read_text(errors="replace").strip()[-400:]
    return Measured(label, seconds, peak, proc.returncode, stderr)


def ensure(data_dir: Path, shape: str, amount: int, seed: int) -> Path:
    """Generate SHAPE, or reuse the file a run with the same generator left in DATA_DIR."""
    path = data_dir / f"memory-{shape}-{amount}-seed{seed}.jsonl"
    meta = path.with_suffix(".meta.json")
    digest = generator_digest()
    if path.exists() and meta.exists():
        known = orjson.loads(meta.read_bytes())
        if known.get("generator_sha256") == digest and known.get("bytes") == path.stat().st_size:
            print(f"[gen] reusing {path.name}", flush=True)
            return path
    print(f"[gen] {shape} {amount} ...", end=" ", flush=True)
    stats = generate_shape(path, shape, amount, seed)
    meta.write_bytes(orjson.dumps({"generator_sha256": digest, "bytes": stats.bytes}))
    print(f"{stats.bytes / MIB:.0f} MiB, {stats.lines} lines", flush=True)
    return path


def run_session(path: Path, cli: list[str], config: Path, work: Path,
                timeout: float) -> list[Measured]:
    warm_cache(path)
    output_dir = work / "out"
    shutil.rmtree(output_dir, ignore_errors=True)
    output_dir.mkdir()
    common = [*cli, "--config", str(config)]
    runs = [
        measure("floor", [sys.executable, "-c", FLOOR_CODE, str(path)], work, timeout),
        measure("plan", [*common, "plan", "--transcript", str(path), "--json"], work, timeout),
        measure("candidate", [*common, "candidate", "--transcript", str(path), "--output-dir",
                              str(output_dir), "--json"], work, timeout),
    ]
    shutil.rmtree(output_dir, ignore_errors=True)
    return runs


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--line-mb", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cache-dir", type=Path, help="generate into DIR and reuse files there")
    parser.add_argument("--max-mib", type=float, default=100.0,
                        help="limit on the chat (issue 11: below 100 MiB; spec §3 said 200)")
    parser.add_argument("--line-extra-mib", type=float, default=100.0)
    parser.add_argument("--sizes", default="", help="realistic sessions: sizes in MiB, comma-"
                        "separated (e.g. 200,1024,4096); each is deleted after its run unless "
                        "--cache-dir is given")
    parser.add_argument("--realistic-max-mib", type=float, default=100.0)
    parser.add_argument("--skip-chat", action="store_true")
    parser.add_argument("--skip-line", action="store_true")
    parser.add_argument("--timeout", type=float, default=1800.0)
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="ktr-bench-memory-"))
    data_dir = (args.cache_dir or work / "transcripts").resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    config = work / "config.toml"
    (work / "state").mkdir(mode=0o700)
    config.write_text(f"project_dir = {orjson.dumps(str(data_dir)).decode()}\n"
                      f"state_dir = {orjson.dumps(str(work / 'state')).decode()}\n")
    cli = default_cli()
    sessions: list[tuple[str, float, Callable[[int], float]]] = []
    if not args.skip_chat:
        sessions.append(("chat", args.messages, lambda size: args.max_mib * MIB))
    if not args.skip_line:
        sessions.append(("single-line", args.line_mb * MIB,
                         lambda size: size + args.line_extra_mib * MIB))
    sessions += [("realistic", float(size), lambda size: args.realistic_max_mib * MIB)
                 for size in args.sizes.split(",") if size.strip()]
    figures: list[dict[str, object]] = []
    failed = False
    try:
        for shape, amount, limit_of in sessions:
            if shape == "realistic":
                path, _ = ensure_transcript(data_dir, amount, args.seed, "first-turn")
            else:
                path = ensure(data_dir, shape, int(amount), args.seed)
            size = path.stat().st_size
            limit = limit_of(size)
            runs = run_session(path, cli, config, work, args.timeout)
            if shape == "realistic" and args.cache_dir is None:
                path.unlink()  # a 4 GiB file must not wait for the others
            floor = runs[0]
            for run in runs:
                passed = run.returncode == 0 and (run is floor or run.peak_bytes <= limit)
                failed = failed or not passed
                figures.append({
                    "session": shape if shape != "realistic" else f"realistic {amount:g}",
                    "file_mib": round(size / MIB, 1), "command": run.label,
                    "seconds": round(run.seconds, 2), "peak_mib": round(run.mib, 1),
                    "vs_floor": round(run.peak_bytes / floor.peak_bytes, 2),
                    "limit_mib": None if run is floor else round(limit / MIB, 1),
                    "pass": passed, "exit": run.returncode,
                })
                if run.returncode:
                    print(f"[{shape}] {run.label} exited {run.returncode}: {run.stderr}")
    finally:
        shutil.rmtree(work / "out", ignore_errors=True)
        if args.cache_dir is None:
            shutil.rmtree(work, ignore_errors=True)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python "
          f"{platform.python_version()}, {platform.platform()}")
    header = "| session | file MiB | command | seconds | tree peak MiB | × floor | limit MiB | |"
    print(header)
    print("|---|---|---|---|---|---|---|---|")
    for row in figures:
        limit = "" if row["limit_mib"] is None else row["limit_mib"]
        verdict = "" if row["limit_mib"] is None else ("PASS" if row["pass"] else "FAIL")
        print(f"| {row['session']} | {row['file_mib']} | {row['command']} | {row['seconds']} | "
              f"{row['peak_mib']} | {row['vs_floor']} | {limit} | {verdict} |")
    if args.json:
        args.json.write_bytes(orjson.dumps(figures, option=orjson.OPT_INDENT_2))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
