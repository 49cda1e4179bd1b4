"""The five tools' behaviour for one project: auto-binding consultations that run in the
background, polls, and the bindings' create, list and close."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from kael_thread_rebuild.defaults import ANSWER_MARK
from kael_thread_rebuild.errors import one_line

from . import runner
from .errors import AdvisorError, SessionLost
from .modes import with_mode
from .registry import Consultation, Registry
from .stream import Transcript
from .table import Binding, BindingTable, Table
from .windows import current_conversation

PROGRESS_SECONDS = 2.0


def _when(stamp: float | None) -> str:
    if stamp is None:
        return "never"
    return datetime.fromtimestamp(stamp, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _default_name(key: str) -> str:
    return f"conversation {key[:8]}"


def seeded(goal: str, message: str) -> str:
    """The first message of a session: the task's goal, if any, before MESSAGE."""
    return f"Goal of this task: {goal}\n\n{message}" if goal else message


class Advisor:
    """The advisor of the project PROJECT (the server's working directory)."""

    def __init__(self, project: Path, sessions: Path | None = None,
                 idle: float | None = None) -> None:
        self.project = project
        self.sessions = sessions
        self.idle = idle
        self.table = BindingTable(project)
        self.registry = Registry(project)
        self._turns: dict[str, threading.Lock] = {}
        self._threads: dict[str, threading.Thread] = {}
        self._guard = threading.Lock()

    # -- which binding ---------------------------------------------------------------------------

    def conversation(self) -> str:
        return current_conversation(self.project, self.sessions)

    def _key(self, table: Table, task_id: str | None) -> str:
        return table.find(task_id)[0] if task_id else self.conversation()

    # -- consult and poll ------------------------------------------------------------------------

    def consult(self, message: str, mode: str | None, task_id: str | None) -> str:
        key = self._key(self.table.read(), task_id)

        def bind(table: Table) -> Binding:
            current = table.bindings.get(key)
            if current is None or current.status == "closed":
                if current is not None:
                    table.retire(key)
                current = table.bindings[key] = Binding(claude_session=key,
                                                        name=_default_name(key))
            current.last_used = time.time()
            return current.model_copy()

        binding = self.table.change(bind)
        consultation = self.registry.start(key, binding.name, message, mode)

        def note(table: Table) -> None:
            if key in table.bindings:
                table.bindings[key].consultations.append(consultation.id)

        self.table.change(note)
        thread = threading.Thread(target=self._advise, args=(consultation,),
                                  name=f"advisor-{consultation.id}", daemon=True)
        with self._guard:
            self._threads[consultation.id] = thread
        thread.start()
        session = binding.kimi_session or "a new one, created by this consultation"
        return (f"⏳ consultation started #{consultation.id} (task {binding.name!r}, Kimi "
                f"session: {session}) · poll with advisor_poll(\"{consultation.id}\")")

    def _turn(self, key: str) -> threading.Lock:
        with self._guard:
            return self._turns.setdefault(key, threading.Lock())

    def _advise(self, consultation: Consultation) -> None:
        """Run one consultation to its end and record how it ended, whatever happens."""
        with self._turn(consultation.binding):
            try:
                self._run(consultation)
                consultation.status = "done"
            except AdvisorError as exc:
                consultation.status, consultation.error = "failed", str(exc)
            except Exception as exc:  # a bug must still end the task, with its one line
                consultation.status = "failed"
                consultation.error = one_line(f"{type(exc).__name__}: {exc}")
            if runner.stopping():  # left running: its server is gone, so polls say interrupted
                return
            consultation.finished_at = time.time()
            self.registry.save(consultation)

    def _progress(self, consultation: Consultation) -> Callable[[Transcript], None]:
        last = [0.0]

        def saw(transcript: Transcript) -> None:
            consultation.answer, consultation.tools = transcript.answer, list(transcript.tools)
            consultation.retries = transcript.retries
            if time.monotonic() - last[0] >= PROGRESS_SECONDS:
                last[0] = time.monotonic()
                self.registry.save(consultation)

        return saw

    def _run(self, consultation: Consultation) -> None:
        binding = self.table.read().bindings.get(consultation.binding)
        if binding is None:
            raise AdvisorError("the task was closed and archived before its consultation ran")
        message = with_mode(consultation.message, consultation.mode)
        session = binding.kimi_session
        consultation.kimi_session = session
        progress = self._progress(consultation)
        try:
            outcome = runner.run(self.project, message if session else
                                 seeded(binding.goal, message), session,
                                 progress=progress, idle=self.idle)
        except SessionLost:
            consultation.rebuilt = True
            outcome = runner.run(self.project, seeded(binding.goal, message), None,
                                 progress=progress, idle=self.idle)
        transcript = outcome.transcript
        consultation.kimi_session = outcome.session_id
        consultation.answer, consultation.tools = transcript.answer, transcript.tools
        consultation.retries = transcript.retries

        def rebind(table: Table) -> None:
            current = table.bindings.get(consultation.binding)
            if current is not None and current.created_at == binding.created_at:
                current.kimi_session = outcome.session_id
                current.last_used = time.time()

        self.table.change(rebind)

    def wait(self, consultation_id: str, timeout: float | None = None) -> None:
        """Wait for a consultation this server runs (tests, the CLI)."""
        with self._guard:
            thread = self._threads.get(consultation_id)
        if thread is not None:
            thread.join(timeout)

    def poll(self, task: str) -> str:
        consultation = self.registry.load(task)
        ident = f"#{consultation.id}"
        if consultation.status == "failed":
            return f"❌ consultation {ident} failed: {consultation.error}"
        if consultation.status == "done":
            return _answer(consultation)
        if self.registry.interrupted(consultation):
            known = consultation.answer.strip()
            said = f" What it had said so far:\n\n{known}" if known else \
                " It had not answered yet."
            return (f"⚠ consultation {ident} was interrupted: the advisor server stopped before "
                    f"it finished (started {_when(consultation.started_at)}, Kimi session "
                    f"{consultation.kimi_session or 'not yet created'}). Consult again to ask "
                    f"anew.{said}")
        return (f"⏳ the advisor is still thinking ({ident}, {consultation.elapsed:.0f} s) · "
                "poll again later")

    # -- the bindings ----------------------------------------------------------------------------

    def create_task(self, name: str, goal: str | None, force_new: bool) -> str:
        key = self.conversation()

        def create(table: Table) -> str:
            current = table.bindings.get(key)
            if current is not None and current.status == "open" and not force_new:
                old = current.name
                current.name = name
                if goal is not None:
                    current.goal = goal
                session = current.kimi_session or "none yet"
                return (f"📌 task {old!r} renamed {name!r}; it keeps its Kimi session "
                        f"({session})")
            if current is not None:
                table.retire(key)
            table.bindings[key] = Binding(claude_session=key, name=name, goal=goal or "")
            return (f"📌 task {name!r} bound to this conversation; its Kimi session is created "
                    "by the first consultation")

        return self.table.change(create)

    def list_tasks(self) -> str:
        table = self.table.read()
        try:
            here: str | None = self.conversation()
        except AdvisorError:
            here = None
        rows = [(b, "") for b in table.bindings.values()] + [(b, " (archived)")
                                                              for b in table.archived]
        if not rows:
            return "no advisor tasks in this project yet (advisor_consult creates one)"
        lines = [f"advisor tasks of {self.project}:"]
        for binding, archived in rows:
            mark = "▶ " if binding.claude_session == here and not archived else "  "
            cost = "unknown" if binding.cost is None else f"{binding.cost:g}"
            lines.append(
                f"{mark}{binding.name} · {binding.status}{archived} · Kimi session "
                f"{binding.kimi_session or 'none yet'} · last used {_when(binding.last_used)} · "
                f"consultations {len(binding.consultations)} · cost {cost} · conversation "
                f"{binding.claude_session}")
        return "\n".join(lines)

    def close_task(self, task_id: str | None) -> str:
        key = self._key(self.table.read(), task_id)

        def close(table: Table) -> str:
            current = table.bindings.get(key)
            if current is None:
                raise AdvisorError("this conversation has no advisor task to close")
            if current.status == "closed":
                return f"task {current.name!r} is closed already"
            current.status, current.closed_at = "closed", time.time()
            return (f"🔒 task {current.name!r} closed; its Kimi session "
                    f"{current.kimi_session or '(none)'} is kept, and the next consultation "
                    "here opens a new one")

        return self.table.change(close)


def _answer(consultation: Consultation) -> str:
    # ANSWER_MARK starts it: what a rebuild carries as words said (the engine's rule).
    parts = [f"{ANSWER_MARK}{consultation.id} ({consultation.elapsed:.0f} s):",
             consultation.answer or "(the advisor gave no text)"]
    notes = []
    if consultation.tools:
        notes.append("advisor's tool actions: " + ", ".join(consultation.tools))
    if consultation.retries:
        notes.append(f"the provider was retried {consultation.retries} times")
    if consultation.rebuilt:
        notes.append(f"⚠ the task's Kimi session was not found; a new one "
                     f"({consultation.kimi_session}) was started from the task's goal: the "
                     "advisor's earlier context was lost")
    if notes:
        parts.append("---\n" + "\n".join(notes))
    return "\n\n".join(parts)
