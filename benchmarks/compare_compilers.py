"""Which compiler for the scanner that measures payloads without decoding them (issue 26): mypyc
or Cython, chosen by measurement.

The kernel is the engine's own payload scanner (`kael_thread_rebuild/transcript/scanner.py`,
`long_strings`): one pass over every byte of a line that finds each string, checks its UTF-8
and escapes, and measures its UTF-8 size (escapes, `\\u` escapes and surrogate pairs decoded, a
lone surrogate as three bytes, as the engine measures text) without building it; timed as the
engine asks it (strings of `reader.SKIP_LEAST` bytes or more), checked on every string value.
Its source is copied into a temporary directory and built there two ways:

- mypyc: the file as it is (its integers typed `i64`), as the package and the image build it;
- Cython on the same file, unchanged (what one source for both would give Cython);
- Cython on the same file with `benchmarks/scanner.pxd` beside it, which gives its functions,
  locals and constants C types (one source still, its types for Cython declared apart);

and run, with the source interpreted, on every line of one transcript held in memory, beside
orjson's parse of every line (the floor of bench_plan.py). Every kernel's sizes must equal the
engine's own (`loads_line`, then `text_bytes` of every string value) on each line the engine
reads, or the kernel is reported as differing and the script exits 1. CPU seconds, least of
`--repeat` runs; the interpreted kernel runs on a share of the lines and is scaled up. A
compiler that is not installed is reported and left out. Beside them, a bound that is not a
scanner (`benchmarks/byte_loop_bound.pyx`, built by Cython): the same pass with C pointers
and a table per byte that checks nothing, what any compiled pass over every byte costs at
least; its sizes are not checked (it decodes no escape). And the same rules as the scanner
with C pointers (`benchmarks/scanner_pointers.pyx`, a second source kept for this measurement):
what a checked pass costs at best; its sizes are checked.

`--above BYTES` times only the lines longer than BYTES, orjson's parse too (the lines the
compiled engine scans are those over `reader.SCAN_ABOVE`).

    .venv/bin/python benchmarks/compare_compilers.py --size-mb 200 --cache-dir DIR
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import orjson

import kael_thread_rebuild.transcript
from bench_plan import MIB, ensure_transcript
from kael_thread_rebuild.transcript.json_text import loads_line, text_bytes
from kael_thread_rebuild.transcript.reader import SKIP_LEAST

# The source, even where the package runs the compiled module in its place.
SCANNER = Path(kael_thread_rebuild.transcript.__file__).resolve().parent / "scanner.py"
HERE = Path(__file__).resolve().parent
SCANNER_TYPES = HERE / "scanner.pxd"
BOUND = HERE / "byte_loop_bound.pyx"
POINTERS = HERE / "scanner_pointers.pyx"
Kernel = Callable[[bytes], int]


@dataclass
class Built:
    name: str
    module: ModuleType | None
    build_s: float = 0.0
    size_kib: float = 0.0
    why_not: str = ""
    # A bound, timed but not checked (see BOUND).
    bound: bool = False


def string_sizes(value: Any) -> Iterator[int]:
    """The engine's UTF-8 size of every string value in VALUE (keys left out)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield len(text_bytes(item))
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def reference(line: bytes) -> int | None:
    """The kernel's answer as the engine finds it; None for a line the engine does not read."""
    try:
        return sum(string_sizes(loads_line(line)))
    except ValueError:
        return None


def _load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def kernel_of(module: ModuleType, least: int = 0) -> Kernel:
    """What MODULE's `long_strings` (a build of the scanner) finds in a line: the UTF-8 bytes of
    its string values of at least LEAST bytes; -1 for a line whose strings a parse refuses.
    Checked with LEAST 0 (every string value); timed with the engine's `SKIP_LEAST`, as the
    engine runs it (a pass over every byte that reports only the few long strings)."""
    long_strings = module.long_strings

    def measure(line: bytes) -> int:
        try:
            found: list[int] = long_strings(line, least)
        except ValueError:
            return -1
        return sum(found[2::4])

    return measure


def _build(name: str, source: Path, command: list[str], work: Path,
           declarations: Path | None = None) -> Built:
    """Build SOURCE (copied into WORK as module NAME, DECLARATIONS beside it as NAME.pxd) with
    COMMAND, then import it."""
    target = work / (name + source.suffix)
    shutil.copyfile(source, target)
    if declarations is not None:
        shutil.copyfile(declarations, work / (name + ".pxd"))
    started = time.perf_counter()
    done = subprocess.run([*command, target.name], cwd=work, capture_output=True, text=True,
                          check=False)
    seconds = time.perf_counter() - started
    built = sorted(work.glob(f"{name}.*.so"))
    if done.returncode != 0 or not built:
        return Built(name, None, why_not=(done.stderr or done.stdout).strip()[-300:])
    return Built(name, _load(built[0], name), seconds, built[0].stat().st_size / 1024)


# No bounds checks: the scanner checks every index against the line's length itself.
CYTHONIZE = [sys.executable, "-c",
             "import sys; from setuptools import setup; from Cython.Build import cythonize; "
             "setup(ext_modules=cythonize(sys.argv[1], quiet=True, compiler_directives="
             "{'language_level': 3, 'boundscheck': False, 'wraparound': False}), "
             "script_args=['build_ext', '--inplace'])"]


def build_all(work: Path) -> list[Built]:
    kernels = [Built("interpreted", _load(SCANNER, "scanner_interpreted"))]
    if importlib.util.find_spec("mypyc") is None:
        kernels.append(Built("mypyc", None, why_not="mypyc is not installed"))
    else:
        kernels.append(_build("scanner_mypyc", SCANNER, [sys.executable, "-m", "mypyc"], work))
    if importlib.util.find_spec("Cython") is None:
        kernels.append(Built("cython", None, why_not="Cython is not installed"))
    else:
        kernels.append(_build("scanner_cython", SCANNER, CYTHONIZE, work))
        kernels.append(_build("scanner_cython_pxd", SCANNER, CYTHONIZE, work, SCANNER_TYPES))
        bound = _build("byte_loop_bound", BOUND, CYTHONIZE, work)
        bound.bound = True
        kernels.append(bound)
        kernels.append(_build("scanner_pointers", POINTERS, CYTHONIZE, work))
    return kernels


def disagreements(kernel: Kernel, lines: list[bytes], expected: list[int | None]) -> int:
    return sum(1 for line, want in zip(lines, expected, strict=True)
               if want is not None and kernel(line) != want)


def cpu_seconds(run: Callable[[bytes], object], lines: list[bytes], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.process_time()
        for line in lines:
            run(line)
        best = min(best, time.process_time() - started)
    return best


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--transcript", type=Path, help="an existing transcript")
    source.add_argument("--size-mb", type=float, default=200.0, help="generate this size")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cache-dir", type=Path, help="generate into (and reuse from) DIR")
    parser.add_argument("--repeat", type=int, default=3, help="runs per kernel (least is kept)")
    parser.add_argument("--interpreted-share", type=float, default=0.02,
                        help="share of the lines the interpreted kernel runs on (scaled up)")
    parser.add_argument("--above", type=int, default=0, metavar="BYTES",
                        help="time only the lines longer than BYTES (all are checked)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="ktr-compilers-"))
    try:
        path = args.transcript
        if path is None:
            data_dir = args.cache_dir or work
            data_dir.mkdir(parents=True, exist_ok=True)
            path, _ = ensure_transcript(data_dir, args.size_mb, args.seed, "first-turn")
        lines = path.read_bytes().splitlines(keepends=True)
        expected = [reference(line) for line in lines]
        kernels = build_all(work)
        timed = [line for line in lines if len(line) > args.above]
        floor = cpu_seconds(_floor, timed, args.repeat)
        print(f"{path.stat().st_size / MIB:.1f} MiB, {len(lines)} lines "
              f"({expected.count(None)} the engine does not read), CPU seconds, least of "
              f"{args.repeat}; load average {os.getloadavg()[0]:.1f}")
        if args.above:
            print(f"timed: the {len(timed)} lines over {args.above} bytes "
                  f"({sum(map(len, timed)) / MIB:.1f} MiB)")
        print(f"  {'orjson floor':24s} {floor:8.3f}  1.00")
        differs = False
        for built in kernels:
            if built.module is None:
                print(f"  {built.name:24s} left out: {built.why_not}")
                continue
            wrong = 0 if built.bound else disagreements(kernel_of(built.module), lines,
                                                        expected)
            differs = differs or bool(wrong)
            share = timed
            if built.name == "interpreted":
                share = timed[: max(1, int(len(timed) * args.interpreted_share))]
            scan = kernel_of(built.module, SKIP_LEAST)
            seconds = cpu_seconds(scan, share, args.repeat) * len(timed) / len(share)
            note = "a bound, not checked" if built.bound else (
                f"DIFFERS on {wrong} lines" if wrong else "same sizes")
            if built.build_s:
                note += f"; built in {built.build_s:.1f} s, {built.size_kib:.0f} KiB"
            if share is not timed:
                note += f"; scaled from {len(share)} lines"
            print(f"  {built.name:24s} {seconds:8.3f}  {seconds / floor:.2f}  {note}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if differs else 0


def _floor(line: bytes) -> object:
    """orjson's parse of LINE (None for a line it refuses)."""
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        return None


if __name__ == "__main__":
    sys.exit(main())
