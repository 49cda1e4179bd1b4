"""The pointer drill of the Molecule households (molecule/images/household/pointer_drill.py)
finds the household's runner by its command line. A child the runner has forked but not yet
exec'd (or a subshell of it) has that very command line; the drill once counted it as a second
runner and failed a CI run. Here a real bash runner sits in a subshell, and the drill's own
lookup, run as on the household, must still name the runner and only it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HOUSEHOLD = ROOT / "molecule" / "images" / "household"


def bash_with(mark: str) -> list[int]:
    """The pids of the bash processes whose command line holds MARK."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            raw = (entry / "cmdline").read_bytes() if entry.name.isdigit() else b""
        except OSError:
            continue
        argv = raw.split(b"\0")
        if mark.encode() in raw and Path(argv[0].decode()).name == "bash":
            found.append(int(entry.name))
    return found


def drill_lookup(mark: str) -> subprocess.CompletedProcess[str]:
    """pointer_drill.runner_pid(MARK) in a Python laid out as on the household."""
    env = {**os.environ, "PYTHONPATH": f"{HOUSEHOLD}{os.pathsep}{ROOT / 'tests'}"}
    return subprocess.run(
        [sys.executable, "-c",
         f"import pointer_drill; print(pointer_drill.runner_pid({mark.encode()!r}))"],
        capture_output=True, text=True, env=env, timeout=60, check=False, cwd=HOUSEHOLD)


@contextmanager
def bash_runners(tmp_path: Path, body: str, count: int) -> Iterator[tuple[str, list[int]]]:
    """COUNT runners, each `bash` on a script of BODY whose name holds a mark of its own; once
    two bash processes with the mark run, the mark and the runners' pids. Killed after."""
    mark = f"pointer_runner-DO-NOT-CREATE-{uuid.uuid4().hex}.sh"
    script = tmp_path / mark
    script.write_text(body)
    runners = [subprocess.Popen(["bash", str(script)], start_new_session=True)
               for _ in range(count)]
    try:
        deadline = time.monotonic() + 30
        while len(bash_with(mark)) < 2:
            assert time.monotonic() < deadline, f"two bash processes never ran {body!r}"
            time.sleep(0.05)
        yield mark, [runner.pid for runner in runners]
    finally:
        for runner in runners:
            os.killpg(runner.pid, signal.SIGKILL)
            runner.wait()


def test_a_runner_inside_a_subshell_is_still_one_runner(tmp_path: Path) -> None:
    # The subshell is a fork of the runner that stays a while, as a fork before exec does
    # briefly; the `:` after sleep keeps bash from exec'ing sleep in place of the subshell.
    with bash_runners(tmp_path, "( sleep 60; : )\n", 1) as (mark, [runner]):
        found = drill_lookup(mark)

    assert found.returncode == 0, found.stderr
    assert int(found.stdout) == runner


def test_two_runners_are_reported(tmp_path: Path) -> None:
    with bash_runners(tmp_path, "sleep 60\n", 2) as (mark, _):
        found = drill_lookup(mark)

    assert found.returncode != 0
    assert "2 pointer runners run" in found.stderr
