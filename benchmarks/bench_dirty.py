#!/usr/bin/env python3
"""Benchmark `dirty` taken up from the scan cache against a full `dirty`, in the same run.

A realistic transcript is generated (or reused from --cache-dir) and copied into a project
folder; one `dirty` fills the scan cache. Then, --repeat times: 1 MiB of realistic records is
appended, `dirty` runs with a config whose state dir holds the cache (it reads only the new
bytes), and `dirty` runs again with a config whose state dir does not exist (a full read, no
cache written). Both are whole CLI processes (start-up included), their outputs must be
identical, and the figure is the ratio of their best times (target, issue 11: <= 5%).
Before that the engine's package is byte-compiled, as the image does (`compileall`): with
PYTHONDONTWRITEBYTECODE set, as in the project's shells and the image, an editable install would
otherwise compile every module again in every process, which no installed engine does.

Usage: .venv/bin/python benchmarks/bench_dirty.py [--size-mb 1024] [--repeat 3] [--json OUT]
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import orjson

from bench_plan import (
    GENERATOR,
    MIB,
    _toml_str,
    default_cli,
    ensure_transcript,
    run_measured,
    warm_cache,
)

APPEND_BYTES = 1 << 20


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mb", type=float, default=1024.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cache-dir", type=Path, help="reuse generated transcripts from here")
    parser.add_argument("--max-ratio", type=float, default=0.05)
    parser.add_argument("--timeout", type=float, default=1800.0)
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument("--no-compile", action="store_true",
                        help="do not byte-compile the engine's package first")
    return parser.parse_args(argv)


def _appended_lines(work: Path, seed: int) -> list[bytes]:
    """About APPEND_BYTES of realistic records per round (another session's, in order)."""
    path = work / "more.jsonl"
    subprocess.run([sys.executable, str(GENERATOR), str(path), "--size-mb", "8",
                    "--seed", str(seed + 1)], check=True, capture_output=True)
    return path.read_bytes().splitlines(keepends=True)


def _next_chunk(lines: list[bytes], start: int) -> tuple[bytes, int]:
    chunk = bytearray()
    index = start
    while len(chunk) < APPEND_BYTES:
        chunk += lines[index % len(lines)]
        index += 1
    return bytes(chunk), index


def compile_package() -> None:
    """Byte-compile the package the CLI imports (its __pycache__ folders, ignored by git)."""
    found = subprocess.run([sys.executable, "-c", "import kael_thread_rebuild as k; "
                            "print(k.__file__)"], check=True, capture_output=True, text=True)
    subprocess.run([sys.executable, "-m", "compileall", "-q",
                    str(Path(found.stdout.strip()).parent)], check=True)


def _config(work: Path, name: str, project: Path, state: Path) -> Path:
    path = work / f"{name}.toml"
    path.write_text(f"project_dir = {_toml_str(project)}\nstate_dir = {_toml_str(state)}\n",
                    encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="ktr-bench-dirty-"))
    try:
        return _run(args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _run(args: argparse.Namespace, work: Path) -> int:
    data_dir = (args.cache_dir or work / "transcripts").resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    source, _ = ensure_transcript(data_dir, args.size_mb, args.seed, "first-turn")
    project = work / "project"
    project.mkdir()
    path = project / "8d5c0d56-0000-4000-8000-000000000000.jsonl"
    shutil.copyfile(source, path)
    state = work / "state"
    state.mkdir(mode=0o700)
    cached = _config(work, "cached", project, state)
    full = _config(work, "full", project, work / "no-state-dir")
    lines = _appended_lines(work, args.seed)
    cli = default_cli()
    err = work / "stderr"

    def dirty(config: Path, name: str) -> tuple[float, bytes]:
        target = work / f"{name}.json"
        run = run_measured([*cli, "--config", str(config), "--json", "dirty", "--transcript",
                            str(path)], target, err, args.timeout)
        if run.returncode != 0:
            raise SystemExit(f"dirty failed: {err.read_text(errors='replace')[-400:]}")
        return run.wall_s, target.read_bytes()

    if not args.no_compile:
        compile_package()
    warm_cache(path)
    first, _ = dirty(cached, "first")
    print(f"[{args.size_mb:g} MiB] first dirty (full read, cache written) {first:.3f} s",
          flush=True)
    incremental: list[float] = []
    whole: list[float] = []
    index = 0
    for number in range(args.repeat):
        chunk, index = _next_chunk(lines, index)
        with path.open("ab") as handle:
            handle.write(chunk)
        seconds, taken_up = dirty(cached, "incremental")
        incremental.append(seconds)
        seconds, read_whole = dirty(full, "full")
        whole.append(seconds)
        if orjson.loads(taken_up) != orjson.loads(read_whole):
            raise SystemExit("the cached dirty differs from the full one")
        print(f"[{args.size_mb:g} MiB] run {number + 1}/{args.repeat}: +{len(chunk) / MIB:.2f} "
              f"MiB, cached dirty {incremental[-1]:.3f} s, full dirty {whole[-1]:.3f} s",
              flush=True)
    ratio = min(incremental) / min(whole)
    ok = ratio <= args.max_ratio
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python "
          f"{platform.python_version()}, {platform.platform()}")
    print(f"dirty after 1 MiB appended to {path.stat().st_size / MIB:.0f} MiB: cached "
          f"{min(incremental):.3f} s, full {min(whole):.3f} s, ratio {ratio:.1%} "
          f"(target <= {args.max_ratio:.0%}) {'PASS' if ok else 'FAIL'}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_bytes(orjson.dumps({
            "size_mib": args.size_mb, "first_s": first, "cached_s": incremental,
            "full_s": whole, "ratio": ratio, "ok": ok}, option=orjson.OPT_INDENT_2))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
