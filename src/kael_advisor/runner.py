"""One run of the Kimi Code CLI as the advisor: `kimi -p MESSAGE --output-format stream-json`,
with `-S SESSION` to continue a binding's session, or `--agent-file` (the packaged read-only
agent) on a binding's first run, from the project directory (a Kimi session belongs to it).

Hang guard: no output line for `idle_seconds` ends the run, the process group killed; there is
no limit on the total time. A run that fails ends in one line (`AdvisorError`), or
`SessionLost` when the CLI no longer knows the session.
"""

from __future__ import annotations

import contextlib
import os
import queue
import re
import signal
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

from kael_thread_rebuild.errors import one_line

from .errors import AdvisorError, SessionLost
from .places import KIMI_HOME_ENV, idle_seconds, kimi_home, kimi_program
from .stream import Transcript

AGENT_FILE = "kael-advisor.md"
_NOT_FOUND = re.compile(r'Session "[^"]*" not found')
MAX_STDERR = 64 << 10


def agent_file() -> Path:
    """The packaged read-only advisor agent."""
    return Path(str(files("kael_advisor").joinpath("agent", AGENT_FILE)))


def kimi_environment() -> dict[str, str]:
    return {**os.environ, KIMI_HOME_ENV: str(kimi_home()), "KIMI_CODE_NO_AUTO_UPDATE": "1",
            "KIMI_DISABLE_TELEMETRY": "1"}


def command(message: str, session: str | None) -> list[str]:
    resume = ["-S", session] if session else ["--agent-file", str(agent_file())]
    return [kimi_program(), *resume, "-p", message, "--output-format", "stream-json"]


@dataclass
class Run:
    """A finished run: what it said and the session it used."""

    transcript: Transcript
    session_id: str


def _pump(stream: object, lines: queue.Queue[bytes | None]) -> None:
    for line in stream:  # type: ignore[attr-defined]
        lines.put(line)
    lines.put(None)


_RUNNING: set[subprocess.Popen[bytes]] = set()
_STOPPING = threading.Event()


def stopping() -> bool:
    """Whether the server is ending (a run that ends now was interrupted, not failed)."""
    return _STOPPING.is_set()


def stop_all() -> None:
    """Kill every run still going (the server is ending: no one would read their answer)."""
    _STOPPING.set()
    for process in list(_RUNNING):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)


def _end(process: subprocess.Popen[bytes], wait: float) -> None:
    """Give PROCESS up to WAIT seconds to exit, then kill what is left of its group."""
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=wait)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def _failure(returncode: int, stderr: str, transcript: Transcript) -> AdvisorError:
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.lower().startswith("error")]
    said = (errors or lines or [f"no message on stderr, {transcript.lines} output lines"])[-1]
    if _NOT_FOUND.search(stderr):
        return SessionLost(one_line(said))
    count = transcript.retries
    retried = f" (after {count} {'retry' if count == 1 else 'retries'})" if count else ""
    return AdvisorError(one_line(f"the Kimi Code CLI failed (exit {returncode}): {said}"
                                 f"{retried}"))


def run(project: Path, message: str, session: str | None, *,
        progress: Callable[[Transcript], None] | None = None,
        idle: float | None = None) -> Run:
    """Run the advisor on MESSAGE in PROJECT, continuing SESSION (None: a new session).
    PROGRESS is called after every output line."""
    limit = idle if idle is not None else idle_seconds()
    try:
        process = subprocess.Popen(command(message, session), cwd=project,
                                   env=kimi_environment(), stdin=subprocess.DEVNULL,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   start_new_session=True)
    except OSError as exc:
        hint = " (set KAEL_ADVISOR_KIMI)" if isinstance(exc, FileNotFoundError | PermissionError) \
            else ""
        raise AdvisorError(f"the Kimi Code CLI {kimi_program()!r} cannot be started: "
                           f"{exc.strerror or exc}{hint}") from None
    assert process.stdout is not None and process.stderr is not None
    _RUNNING.add(process)
    lines: queue.Queue[bytes | None] = queue.Queue()
    errors: list[bytes] = []
    out_reader = threading.Thread(target=_pump, args=(process.stdout, lines), daemon=True)
    out_reader.start()
    err_reader = threading.Thread(
        target=lambda: errors.append(process.stderr.read()), daemon=True)  # type: ignore[union-attr]
    err_reader.start()
    transcript = Transcript()
    wait = 0.0  # a hung run is killed at once; one that closed its output may exit
    try:
        while True:
            try:
                line = lines.get(timeout=limit)
            except queue.Empty:
                what = "no output" if transcript.spoke else "no first byte"
                raise AdvisorError(f"{what} from the advisor in {limit:g} s: the Kimi Code CLI "
                                   "was stopped (hang guard)") from None
            if line is None:
                wait = limit
                break
            transcript.feed(line)
            if progress is not None:
                progress(transcript)
    finally:
        _end(process, wait)
        _RUNNING.discard(process)
        # Its pipes close with the process group: a failed run leaves no reader behind either.
        out_reader.join(timeout=5)
        err_reader.join(timeout=5)
    stderr = b"".join(errors)[-MAX_STDERR:].decode("utf-8", "replace")
    if process.returncode != 0:
        raise _failure(process.returncode, stderr, transcript)
    found = transcript.session_id or session
    if not found:
        raise AdvisorError("the Kimi Code CLI named no session (no session.resume_hint line)")
    return Run(transcript, found)
