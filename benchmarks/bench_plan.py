#!/usr/bin/env python3
"""Benchmark `kael-thread-rebuild plan` against a parse-only floor measured in the same run.

For each size asked, a realistic transcript is generated (or reused from --cache-dir), then,
--repeat times and interleaved:

- the floor: a child process that reads the file line by line in binary mode and parses every
  line with orjson.loads, nothing else;
- the digest: a child process that computes the SHA-256 of the file (4 MiB reads);
- the plan: a child process running
  `kael-thread-rebuild --config <cfg> plan --transcript <file> --json`.

Each child's wall time is measured around its whole life (start-up included) and its peak RSS
is taken from its own rusage (os.wait4), not from this process; the plan's whole process tree is
also sampled in one extra run. Times are the best of the runs; peak RSS is the highest of the
runs. Targets (issue 11): plan/floor time ratio <= 1.0 and plan tree peak < 100 MiB (both
adjustable); issue 26: `kael-thread-rebuild --help` and `dirty` on the one-turn transcript
within 0.15 s each (their best of --repeat runs, measured after the plan's start-up run, which
validated the config: `dirty` runs as every call after a household's first does, from the
checked config). `dirty` on a config not validated before (its record removed before each run,
as after an edit of the config) is shown beside them, without a target.
Exit status: 0 when every target passes (or with --floor-only), 1 when one fails, 2 on a usage
error.

Usage: .venv/bin/python benchmarks/bench_plan.py [--sizes 200,1024] [--repeat 3] [--json OUT]
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import platform
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from kael_thread_rebuild.checked_config import RECORD as CHECKED_CONFIG
from kael_thread_rebuild.conversation.scan_cache import SUFFIX as SCAN_SUFFIX

HERE = Path(__file__).resolve().parent
GENERATOR = HERE / "gen_transcript.py"
MIB = 1024 * 1024
STARTUP_TARGETS = {"help": "--help", "dirty": "dirty (one-turn transcript)"}

# The floor: the least any reader must do (read every line, parse it), in its own process.
FLOOR_CODE = """\
import sys
from orjson import loads
n = 0
with open(sys.argv[1], "rb") as f:
    for line in f:
        loads(line)
        n += 1
print(n)
"""

# The other floor: SHA-256 of the file, which the plan computes anyway (the file's digest).
SHA256_CODE = """\
import hashlib, sys
digest = hashlib.sha256()
with open(sys.argv[1], "rb", buffering=0) as f:
    while chunk := f.read(4 << 20):
        digest.update(chunk)
print(digest.hexdigest())
"""

# Fields of the plan report worth keeping next to the timings (spec §11).
PLAN_FIELDS = (
    "source_turns",
    "selected_turns",
    "open_tail_turns",
    "dropped_oldest_turns",
    "estimated_tokens",
    "unreadable_lines",
    "abandoned_branch_records",
    "blocked_reason",
)


@dataclass
class Run:
    """One child process: wall seconds, peak RSS in bytes, exit code."""

    wall_s: float
    peak_rss: int
    returncode: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "wall_s": round(self.wall_s, 4),
            "peak_rss_mib": round(self.peak_rss / MIB, 1),
            "returncode": self.returncode,
        }


@dataclass
class Series:
    """The runs of one command on one file."""

    runs: list[Run] = field(default_factory=list)
    error: str = ""
    tree_pss: int = 0

    @property
    def ok_runs(self) -> list[Run]:
        return [r for r in self.runs if r.returncode == 0]

    @property
    def best_s(self) -> float | None:
        ok = self.ok_runs
        return min(r.wall_s for r in ok) if ok else None

    @property
    def median_s(self) -> float | None:
        ok = self.ok_runs
        return statistics.median(r.wall_s for r in ok) if ok else None

    @property
    def peak_rss(self) -> int | None:
        ok = self.ok_runs
        return max(r.peak_rss for r in ok) if ok else None

    @property
    def peak_memory(self) -> int | None:
        """The larger of any one process's peak RSS and the process tree's peak PSS."""
        rss = self.peak_rss
        return None if rss is None else max(rss, self.tree_pss)

    def as_dict(self) -> dict[str, Any]:
        best, median, rss = self.best_s, self.median_s, self.peak_rss
        return {
            "best_s": None if best is None else round(best, 4),
            "median_s": None if median is None else round(median, 4),
            "peak_rss_mib": None if rss is None else round(rss / MIB, 1),
            "tree_peak_pss_mib": round(self.tree_pss / MIB, 1) if self.tree_pss else None,
            "runs": [r.as_dict() for r in self.runs],
            "error": self.error,
        }


def run_measured(argv: list[str], stdout: Path, stderr: Path, timeout: float) -> Run:
    """Run `argv` to completion; wall time from spawn to reap, peak RSS from its rusage."""
    with open(stdout, "wb") as out, open(stderr, "wb") as err:
        started = time.perf_counter()
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err)
        timer = threading.Timer(timeout, _kill, (proc.pid,))
        timer.start()
        try:
            # wait for the exit without reaping, so the timer can never hit a recycled pid
            os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
        finally:
            timer.cancel()
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, tell Popen
    # ru_maxrss is KiB on Linux, bytes on macOS
    peak = usage.ru_maxrss if sys.platform == "darwin" else usage.ru_maxrss * 1024
    return Run(wall, peak, proc.returncode)


def _pss_kib(pid: int) -> int:
    """Proportional set size: pages shared with a forked child are counted once in the tree."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as rollup:
            for line in rollup:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as listing:
            return [int(child) for child in listing.read().split()]
    except OSError:
        return []


def tree_peak_pss(argv: list[str], timeout: float) -> int:
    """Peak PSS of a command and its children together, sampled every 5 ms (one untimed run:
    the sampling would disturb the timed ones). The plan forks a reader for large files, and
    each process's own peak RSS would hide the other's."""
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + timeout
    peak = 0
    while proc.poll() is None and time.monotonic() < deadline:
        peak = max(peak, _pss_kib(proc.pid) + sum(_pss_kib(c) for c in _children(proc.pid)))
        time.sleep(0.005)
    if proc.poll() is None:
        _kill(proc.pid)
        proc.wait()
    return peak * 1024


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def warm_cache(path: Path) -> None:
    """Read the file once so that the first timed run does not pay for the disk."""
    with open(path, "rb", buffering=0) as f:
        while f.read(16 * MIB):
            pass


def tail(path: Path, limit: int = 600) -> str:
    try:
        text = path.read_bytes()[-limit:].decode("utf-8", "replace")
    except OSError:
        return ""
    return " ".join(text.split())


def generator_digest() -> str:
    return hashlib.sha256(GENERATOR.read_bytes()).hexdigest()


def ensure_transcript(
    data_dir: Path, size_mb: float, seed: int, snapshot_policy: str
) -> tuple[Path, dict[str, Any]]:
    """Generate the transcript for `size_mb`, or reuse a cached one made by the same generator."""
    stem = f"transcript-{size_mb:g}mib-seed{seed}-{snapshot_policy}"
    path = data_dir / f"{stem}.jsonl"
    meta_path = data_dir / f"{stem}.meta.json"
    digest = generator_digest()
    if path.exists() and meta_path.exists():
        try:
            meta = orjson.loads(meta_path.read_bytes())
        except orjson.JSONDecodeError:
            meta = {}
        stats = meta.get("stats", {})
        if meta.get("generator_sha256") == digest and stats.get("bytes") == path.stat().st_size:
            print(f"[gen] reusing {path.name} ({path.stat().st_size / MIB:.1f} MiB)", flush=True)
            return path, stats
    print(f"[gen] generating {size_mb:g} MiB (seed {seed}) ...", end=" ", flush=True)
    started = time.perf_counter()
    argv = [sys.executable, str(GENERATOR), str(path), "--size-mb", f"{size_mb:g}"]
    argv += ["--seed", str(seed), "--snapshot-policy", snapshot_policy]
    done = subprocess.run(argv, check=True, capture_output=True)
    stats = orjson.loads(done.stdout)
    stats.pop("path", None)
    meta_path.write_bytes(
        orjson.dumps({"generator_sha256": digest, "stats": stats}, option=orjson.OPT_INDENT_2)
    )
    print(
        f"{stats['bytes'] / MIB:.1f} MiB, {stats['turns']} turns, "
        f"{time.perf_counter() - started:.1f} s",
        flush=True,
    )
    return path, stats


def default_cli() -> list[str]:
    script = Path(sys.executable).parent / "kael-thread-rebuild"
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "kael_thread_rebuild.interfaces.cli"]


def write_config(work: Path, project_dir: Path) -> Path:
    state = work / "state"
    state.mkdir(exist_ok=True)
    config = work / "bench-config.toml"
    config.write_text(
        f"project_dir = {_toml_str(project_dir)}\nstate_dir = {_toml_str(state)}\n",
        encoding="utf-8",
    )
    return config


def _toml_str(path: Path) -> str:
    return '"' + str(path).replace("\\", "\\\\").replace('"', '\\"') + '"'


def plan_summary(stdout: Path) -> dict[str, Any]:
    try:
        report = orjson.loads(stdout.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}
    if not isinstance(report, dict):
        return {}
    nested = report.get("report")
    inner: dict[str, Any] = nested if isinstance(nested, dict) else report
    return {key: inner[key] for key in PLAN_FIELDS if key in inner}


def fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def verdict(ok: bool | None) -> str:
    return "-" if ok is None else ("PASS" if ok else "FAIL")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n", 1)[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--sizes", default="200", help="comma-separated sizes in MiB")
    parser.add_argument("--repeat", type=int, default=3, help="runs per command (best is kept)")
    parser.add_argument("--seed", type=int, default=0, help="generator seed")
    parser.add_argument(
        "--snapshot-policy",
        choices=("every-turn", "first-turn"),
        default="first-turn",
        help="generator: when to write prompt_snapshot",
    )
    parser.add_argument(
        "--cache-dir", type=Path, help="keep and reuse generated transcripts here (never deleted)"
    )
    parser.add_argument(
        "--keep", action="store_true", help="keep the temporary directory (transcripts, outputs)"
    )
    parser.add_argument("--json", type=Path, dest="json_out", help="also write figures here")
    parser.add_argument("--floor-only", action="store_true", help="measure only the floor")
    parser.add_argument(
        "--cli",
        help="command that runs the CLI (default: the console script "
        "next to this Python, else python -m kael_thread_rebuild.interfaces.cli)",
    )
    parser.add_argument("--max-ratio", type=float, default=1.0, help="target: plan/floor time")
    parser.add_argument(
        "--max-rss-mb",
        type=float,
        default=100.0,
        help="target: plan peak memory (process tree) in MiB (strictly below)",
    )
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per child run")
    parser.add_argument("--max-startup-s", type=float, default=0.15,
                        help="target: `--help` and `dirty` on a one-turn transcript, seconds")
    args = parser.parse_args(argv)
    try:
        args.size_list = [float(s) for s in args.sizes.split(",") if s.strip()]
    except ValueError:
        parser.error(f"--sizes: not a list of numbers: {args.sizes!r}")
    if not args.size_list or any(s <= 0 for s in args.size_list):
        parser.error("--sizes: give positive sizes in MiB")
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    args.cli_argv = shlex.split(args.cli) if args.cli else default_cli()
    return args


@dataclass
class Bench:
    """What every measurement of one invocation shares."""

    cli: list[str]
    config: Path
    work: Path
    repeat: int
    floor_only: bool
    timeout: float

    def measure(self, path: Path, label: str) -> tuple[Series, Series, Series, dict[str, Any]]:
        """Floor, digest and plan on `path`, interleaved, `repeat` times; plus the plan's
        summary."""
        warm_cache(path)
        floor, digest, plan = Series(), Series(), Series()
        floor_argv = [sys.executable, "-c", FLOOR_CODE, str(path)]
        digest_argv = [sys.executable, "-c", SHA256_CODE, str(path)]
        plan_argv = [*self.cli, "--config", str(self.config), "plan", "--transcript", str(path)]
        plan_argv.append("--json")
        out, err = self.work / "stdout", self.work / "stderr"
        for index in range(self.repeat):
            run = run_measured(floor_argv, out, err, self.timeout)
            floor.runs.append(run)
            print(
                f"[{label}] run {index + 1}/{self.repeat} floor {run.wall_s:.3f} s "
                f"{run.peak_rss / MIB:.0f} MiB",
                end="",
                flush=True,
            )
            if run.returncode != 0:
                floor.error = f"exit {run.returncode}: {tail(err)}"
            run = run_measured(digest_argv, out, err, self.timeout)
            digest.runs.append(run)
            print(f" | sha256 {run.wall_s:.3f} s", end="", flush=True)
            if run.returncode != 0:
                digest.error = f"exit {run.returncode}: {tail(err)}"
            if self.floor_only:
                print(flush=True)
                continue
            self.forget_scans()
            try:
                run = run_measured(plan_argv, out, err, self.timeout)
            except OSError as exc:  # the CLI is not there
                print(flush=True)
                plan.error = f"cannot run {shlex.join(self.cli)}: {exc}"
                break
            plan.runs.append(run)
            print(
                f" | plan {run.wall_s:.3f} s {run.peak_rss / MIB:.0f} MiB"
                + ("" if run.returncode == 0 else f" (exit {run.returncode})"),
                flush=True,
            )
            if run.returncode != 0:
                plan.error = f"exit {run.returncode}: {tail(err)}"
        summary = plan_summary(out) if plan.ok_runs else {}
        if plan.ok_runs:
            self.forget_scans()
            plan.tree_pss = tree_peak_pss(plan_argv, self.timeout)
        return floor, digest, plan, summary

    def startup(self, tiny: Path) -> dict[str, Series]:
        """`--help`, `dirty` and `dirty` on a config not validated before, on the one-turn
        transcript TINY, REPEAT times each (a command's start-up is nearly all it costs
        there)."""
        dirty = [*self.cli, "--config", str(self.config), "dirty", "--transcript", str(tiny),
                 "--json"]
        commands = {"help": [*self.cli, "--help"], "dirty": dirty, "dirty-unchecked": dirty}
        out, err = self.work / "stdout", self.work / "stderr"
        measured: dict[str, Series] = {}
        for name, argv in commands.items():
            series = measured[name] = Series()
            for _ in range(self.repeat):
                self.forget_scans()
                if name == "dirty-unchecked":
                    (self.work / "state" / "scan-cache" / CHECKED_CONFIG).unlink(missing_ok=True)
                run = run_measured(argv, out, err, self.timeout)
                series.runs.append(run)
                if run.returncode != 0:
                    series.error = f"exit {run.returncode}: {tail(err)}"
            print(f"[start-up] {name}: " + " ".join(f"{r.wall_s:.3f} s" for r in series.runs),
                  flush=True)
        return measured

    def forget_scans(self) -> None:
        """Every plan here reads the whole file (and writes the state dir's scan cache, as a
        first call does): bench_dirty.py measures a plan taken up from the cache. The checked
        config stays, as in a household."""
        for entry in (self.work / "state" / "scan-cache").glob(f"*{SCAN_SUFFIX}"):
            entry.unlink()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="ktr-bench-"))
    data_dir = args.cache_dir.resolve() if args.cache_dir else work / "transcripts"
    data_dir.mkdir(parents=True, exist_ok=True)
    bench = Bench(
        cli=args.cli_argv,
        config=write_config(work, data_dir),
        work=work,
        repeat=args.repeat,
        floor_only=args.floor_only,
        timeout=args.timeout,
    )
    load_before = os.getloadavg()
    results: list[dict[str, Any]] = []
    startup: dict[str, Any] = {}
    failed = False
    try:
        # start-up cost of each child alone: both commands on a one-turn transcript
        tiny, _ = ensure_transcript(data_dir, 0.01, args.seed, args.snapshot_policy)
        floor, _, plan, _ = bench.measure(tiny, "start-up")
        startup = {"floor": floor.as_dict(), "plan": None if args.floor_only else plan.as_dict()}
        if not args.floor_only:
            for name, series in bench.startup(tiny).items():
                best = series.best_s
                startup[name] = series.as_dict()
                if name in STARTUP_TARGETS:
                    startup[name]["pass"] = best is not None and best <= args.max_startup_s
                    failed = failed or not startup[name]["pass"]
        for size in args.size_list:
            path, stats = ensure_transcript(data_dir, size, args.seed, args.snapshot_policy)
            size_bytes = path.stat().st_size
            floor, digest, plan, summary = bench.measure(path, f"{size:g} MiB")
            floor_best, plan_best, plan_rss = floor.best_s, plan.best_s, plan.peak_memory
            ratio = plan_best / floor_best if plan_best and floor_best else None
            digest_best = digest.best_s
            sha_ratio = plan_best / digest_best if plan_best and digest_best else None
            measured = floor_best if args.floor_only else plan_best
            throughput = size_bytes / MIB / measured if measured else None
            pass_ratio = pass_rss = None
            if not args.floor_only:
                pass_ratio = ratio is not None and ratio <= args.max_ratio
                pass_rss = plan_rss is not None and plan_rss / MIB < args.max_rss_mb
                failed = failed or not (pass_ratio and pass_rss)
            failed = failed or bool(floor.error)
            results.append(
                {
                    "size_mib": round(size_bytes / MIB, 1),
                    "bytes": size_bytes,
                    "generator": stats,
                    "floor": floor.as_dict(),
                    "sha256": digest.as_dict(),
                    "plan": None if args.floor_only else plan.as_dict(),
                    "plan_report": summary,
                    "ratio": None if ratio is None else round(ratio, 3),
                    "ratio_sha256": None if sha_ratio is None else round(sha_ratio, 3),
                    "mib_per_s": None if throughput is None else round(throughput, 1),
                    "mib_per_s_of": "floor" if args.floor_only else "plan",
                    "pass_ratio": pass_ratio,
                    "pass_rss": pass_rss,
                }
            )
    finally:
        if args.keep:
            print(f"[bench] kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)

    print_table(results, args.max_ratio, args.max_rss_mb, args.floor_only)
    if startup:
        plan_start = (startup["plan"] or {}).get("best_s")
        print(
            f"start-up alone (one-turn transcript): floor {fmt(startup['floor']['best_s'], 3)} s, "
            f"plan {fmt(plan_start, 3)} s (included in the figures above)"
        )
        for name, label in STARTUP_TARGETS.items():
            if name in startup:
                print(f"start-up target: {label} {fmt(startup[name]['best_s'], 3)} s, "
                      f"<= {args.max_startup_s:g} s {verdict(startup[name]['pass'])}")
        if "dirty-unchecked" in startup:
            print(f"start-up: dirty (one-turn transcript) on a config not validated before "
                  f"{fmt(startup['dirty-unchecked']['best_s'], 3)} s (no target)")
    for row in results:
        for name in ("floor", "sha256", "plan"):
            if row[name] and row[name]["error"]:
                print(f"{row['size_mib']:g} MiB {name}: {row[name]['error']}")
        if row["plan_report"]:
            print(
                f"{row['size_mib']:g} MiB plan report: "
                + ", ".join(f"{k}={v!r}" for k, v in row["plan_report"].items())
                + f" (generated turns: {row['generator'].get('turns')})"
            )
    load_after = os.getloadavg()
    print(f"load average (1 min): {load_before[0]:.2f} before, {load_after[0]:.2f} after")
    if args.json_out:
        figures = {
            "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "python": platform.python_version(),
            "orjson": orjson.__version__,
            "machine": platform.machine(),
            "cpu_count": os.cpu_count(),
            "loadavg_1min": {"before": load_before[0], "after": load_after[0]},
            "repeat": args.repeat,
            "seed": args.seed,
            "snapshot_policy": args.snapshot_policy,
            "floor_only": args.floor_only,
            "targets": {"max_ratio": args.max_ratio, "max_plan_rss_mib": args.max_rss_mb,
                        "max_startup_s": args.max_startup_s},
            "startup": startup,
            "results": results,
        }
        args.json_out.parent.mkdir(parents=True, exist_ok=True)
        args.json_out.write_bytes(orjson.dumps(figures, option=orjson.OPT_INDENT_2) + b"\n")
        print(f"[bench] figures written to {args.json_out}")
    return 1 if failed else 0


def print_table(
    results: list[dict[str, Any]], max_ratio: float, max_rss: float, floor_only: bool
) -> None:
    head = (
        "size MiB",
        "floor s",
        "sha256 s",
        "plan s",
        "plan/floor",
        "plan/sha256",
        "MiB/s",
        "floor RSS MiB",
        "plan RSS MiB",
        "plan tree PSS MiB",
        f"ratio<={max_ratio:g}",
        f"RSS<{max_rss:g}MiB",
    )
    rows = []
    for r in results:
        plan = r["plan"] or {}
        rows.append(
            (
                f"{r['size_mib']:.1f}",
                fmt(r["floor"]["best_s"], 3),
                fmt(r["sha256"]["best_s"], 3),
                fmt(plan.get("best_s"), 3),
                fmt(r["ratio"], 2),
                fmt(r["ratio_sha256"], 2),
                fmt(r["mib_per_s"], 1) + (" (floor)" if floor_only else ""),
                fmt(r["floor"]["peak_rss_mib"], 1),
                fmt(plan.get("peak_rss_mib"), 1),
                fmt(plan.get("tree_peak_pss_mib"), 1),
                verdict(r["pass_ratio"]),
                verdict(r["pass_rss"]),
            )
        )
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(head)]
    line = "  ".join(h.rjust(w) for h, w in zip(head, widths, strict=True))
    print()
    print(line)
    print("-" * len(line))
    for row in rows:
        print("  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)))
    print()


if __name__ == "__main__":
    raise SystemExit(main())
