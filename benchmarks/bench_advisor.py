#!/usr/bin/env python3
"""Benchmark the advisor: the prompt hook's time and the MCP container's cold start.

- hook: the real `kael-advisor-hook` (the console script next to this Python, as a user's
  settings run it) with a realistic `UserPromptSubmit` event on stdin, wall time around the
  whole process; median of N. Next to it, in turn with it (so both see the same load), the same
  interpreter running `python -c pass`: the floor Python start-up sets. Target: median <= 50 ms.
- cold start: from starting the `docker run -i --rm ...` that Claude Code runs (as printed by
  image/advisor/mcp-command.sh) to the `initialize` answer on its stdout; median of N. Next to
  it, in turn, the same `docker run` line running the image's Python, answering one line (the
  floor Docker and Python set). Target: median <= 1.0 s.

Both are printed with the ratio to their floor. Exit 0 when both targets pass, 1 otherwise, 2
when a step fails.

Usage: .venv/bin/python benchmarks/bench_advisor.py [--hooks N] [--cold N] [--image IMAGE]
       [--no-docker] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from tests.appliance import engine

from bench_appliance import cold_start, python_floor

MAX_HOOK = 0.050
MAX_COLD_START = 1.0
REPO = Path(__file__).resolve().parents[1]
MCP_COMMAND = REPO / "image" / "advisor" / "mcp-command.sh"
PROMPT = ("Please review the change to the binding table before I call it done: the lock is "
          "taken before the table is read again, then the record is added and the file is "
          "written atomically. 请检查一下并发写入是否会丢记录。\n\n```python\n"
          + "def change(table):\n    with lock(table):\n        data = read(table)\n" * 8
          + "```\n")


def event(cwd: Path) -> bytes:
    """A `UserPromptSubmit` event as Claude Code 2.1 sends it."""
    session = str(uuid.uuid4())
    return json.dumps({
        "session_id": session,
        "transcript_path": f"/home/user/.claude/projects/-home-user-project/{session}.jsonl",
        "cwd": str(cwd), "permission_mode": "default", "hook_event_name": "UserPromptSubmit",
        "prompt": PROMPT}).encode()


def timed(command: list[str], stdin: bytes, env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(command, input=stdin, capture_output=True, env=env, timeout=60,
                          check=False)
    took = time.perf_counter() - started
    if done.returncode != 0 or done.stdout:
        raise RuntimeError(f"{command[0]} exited {done.returncode}: {done.stdout[:200]!r} "
                           f"{done.stderr[:300]!r}")
    return took


def measure_hook(runs: int) -> dict[str, Any]:
    hook = Path(sys.executable).with_name("kael-advisor-hook")
    if not hook.is_file():
        raise RuntimeError(f"{hook} is missing (pip install -e . installs it)")
    with tempfile.TemporaryDirectory(prefix="bench-advisor-") as root:
        sessions, project = Path(root, "sessions"), Path(root, "project")
        project.mkdir()
        env = {**os.environ, "KAEL_ADVISOR_SESSIONS": str(sessions)}
        stdin = event(project)
        floor = [sys.executable, "-c", "pass"]
        timed([str(hook)], stdin, env)  # the first run compiles and warms the page cache
        timed(floor, b"", env)
        hooks, floors = [], []
        for _ in range(runs):
            hooks.append(timed([str(hook)], stdin, env))
            floors.append(timed(floor, b"", env))
        if (sessions / "hook.log").exists():
            raise RuntimeError("the hook logged: " + (sessions / "hook.log").read_text()[-500:])
        if len(list(sessions.glob("*.json"))) != 1:
            raise RuntimeError(f"the hook wrote {list(sessions.iterdir())}, not one window file")
    return {"hook_seconds": hooks, "python_pass_seconds": floors}


def measure_cold_start(image: str, runs: int) -> dict[str, Any]:
    uid, gid = engine.TEST_UID, engine.TEST_GID
    with tempfile.TemporaryDirectory(prefix="bench-advisor-") as root:
        project, sessions, kimi = (Path(root, name) for name in ("project", "sessions", "kimi"))
        for folder in (project / ".agent", sessions, kimi):
            folder.mkdir(parents=True)
        for folder in (root, project, project / ".agent", sessions, kimi):
            os.chown(folder, uid, gid)
        mcp = subprocess.run(
            [str(MCP_COMMAND), "--project", str(project), "--sessions", str(sessions),
             "--kimi-home", str(kimi), "--user", f"{uid}:{gid}", "--image", image],
            capture_output=True, text=True, check=True, timeout=30).stdout.splitlines()
        floor = python_floor(mcp, image)
        cold_start(mcp)  # the first run after a build pays for the page cache; not counted
        cold_start(floor)
        colds, floors = [], []
        for _ in range(runs):
            colds.append(cold_start(mcp))
            floors.append(cold_start(floor))
    return {"cold_start_seconds": colds, "python_pass_in_container_seconds": floors,
            "image": image}


def line(name: str, seconds: list[float], floor: list[float], target: float,
         floor_name: str) -> tuple[bool, str]:
    got, base = statistics.median(seconds), statistics.median(floor)
    return got <= target, (f"{name}: median {got * 1000:.1f} ms of {len(seconds)} (target "
                           f"<= {target * 1000:.0f} ms); {floor_name} {base * 1000:.1f} ms, "
                           f"ratio {got / base:.2f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hooks", type=int, default=30, help="hook runs (default 30)")
    parser.add_argument("--cold", type=int, default=7, help="cold starts (default 7)")
    parser.add_argument("--image", default=os.environ.get("KAEL_ADVISOR_IMAGE")
                        or "kael-advisor:latest", help="the advisor image")
    parser.add_argument("--no-docker", action="store_true", help="the hook only")
    parser.add_argument("--json", type=Path, metavar="OUT", help="also write every figure here")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    try:
        figures = measure_hook(args.hooks)
        if not args.no_docker:
            problem = engine.engine_problem()
            if problem:
                raise RuntimeError(problem)
            figures |= measure_cold_start(args.image, args.cold)
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        print(f"bench_advisor: {exc}", file=sys.stderr)
        return 2
    results = [line("hook", figures["hook_seconds"], figures["python_pass_seconds"], MAX_HOOK,
                    "python -c pass")]
    if "cold_start_seconds" in figures:
        results.append(line("MCP cold start", figures["cold_start_seconds"],
                            figures["python_pass_in_container_seconds"], MAX_COLD_START,
                            "docker run of the image's python"))
    print(f"load average {load:.1f} before, {os.getloadavg()[0]:.1f} after")
    for ok, text in results:
        print(f"{'PASS' if ok else 'FAIL'}  {text}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(figures, indent=1) + "\n")
    return 0 if all(ok for ok, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main())
