"""The demo's steps: each shown as it starts and ends, with the time it took; a failure names the
step, says what to do and exits 1."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


class StepFailed(Exception):
    """A step could not be done; ``advice`` says what the person can do about it."""

    def __init__(self, message: str, advice: str = "") -> None:
        super().__init__(message)
        self.advice = advice


def shown(path: Path) -> str:
    """PATH as the person typed from the checkout: relative to the current directory."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _clock() -> str:
    return datetime.now(UTC).strftime("%H:%M:%S")


class Steps:
    """Numbered steps; ``total`` is how many the demo runs."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.done = 0
        self.started = time.monotonic()

    def run(self, title: str, work: Callable[[], T], advice: str = "") -> T:
        self.done += 1
        print(f"[{_clock()}] step {self.done}/{self.total}: {title} …", flush=True)
        began = time.monotonic()
        try:
            value = work()
        except StepFailed as failure:
            self._fail(title, began, str(failure), failure.advice or advice)
        except (OSError, subprocess.SubprocessError, ValueError, KeyError) as error:
            self._fail(title, began, f"{type(error).__name__}: {error}", advice)
        print(f"[{_clock()}]   done in {time.monotonic() - began:.0f} s", flush=True)
        return value

    def _fail(self, title: str, began: float, why: str, advice: str) -> None:
        print(f"[{_clock()}] step {self.done}/{self.total} FAILED after "
              f"{time.monotonic() - began:.0f} s: {title}\n  why: {why}", file=sys.stderr)
        if advice:
            print(f"  what to do: {advice}", file=sys.stderr)
        raise SystemExit(1)

    def elapsed(self) -> float:
        return time.monotonic() - self.started


def run_logged(argv: Sequence[str], log: Path, what: str, env: dict[str, str] | None = None,
               timeout: float = 1800) -> None:
    """Run ARGV with its output appended to LOG; on failure raise StepFailed with the log's
    last lines."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a", encoding="utf-8") as out:
        out.write(f"\n$ {' '.join(argv)}\n")
        out.flush()
        try:
            done = subprocess.run(list(argv), stdout=out, stderr=subprocess.STDOUT, env=env,
                                  timeout=timeout, check=False)
        except subprocess.TimeoutExpired as error:
            raise StepFailed(f"{what} did not finish within {timeout:.0f} s",
                             f"read {shown(log)}") from error
    if done.returncode != 0:
        tail = [line if len(line) <= 300 else f"{line[:300]}…" for line in
                log.read_text(encoding="utf-8", errors="replace").splitlines()[-40:]]
        raise StepFailed(f"{what} exited {done.returncode}; the end of {shown(log)}:\n    "
                         + "\n    ".join(tail))
