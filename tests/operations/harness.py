"""Test-only switching base and helpers for the operations tests.

`HarnessBase` is the real pointer base (a real pointer file, written atomically) plus knobs kept
in files, so that a forked worker and the test see the same state: sessions that "die" when
resumed, sessions whose switch fails, a base that cannot report the running session, and a log
of every switch.
"""

from __future__ import annotations

from pathlib import Path

import orjson

from kael_thread_rebuild.config import Config
from kael_thread_rebuild.errors import KaelError
from kael_thread_rebuild.operations import service
from kael_thread_rebuild.operations.model import Operation
from kael_thread_rebuild.operations.stop_input import StopHookInput
from kael_thread_rebuild.switching.base import StepHook
from kael_thread_rebuild.switching.pointer import PointerBase
from tests.builder import SESSION, TranscriptBuilder

SECRET = "the words only the user ever said: kingfisher 7731"


class HarnessBase(PointerBase):
    name = "pointer"

    def __init__(self, config: Config, control: Path) -> None:
        super().__init__(config)
        self.control = control
        control.mkdir(parents=True, exist_ok=True)

    def _listed(self, name: str) -> set[str]:
        path = self.control / name
        return set(path.read_text().split()) if path.exists() else set()

    def set(self, name: str, *sessions: str) -> None:
        (self.control / name).write_text("\n".join(sessions))

    def alive(self) -> bool:
        """A session listed in `dead` dies at once; with `only-alive`, every session not listed
        there does."""
        session = super().running_session()
        if (self.control / "only-alive").exists() and session not in self._listed("only-alive"):
            return False
        return super().alive() and session not in self._listed("dead")

    def running_session(self) -> str | None:
        if (self.control / "no-report").exists() or not self.alive():
            return None
        return super().running_session()

    def switch_to(self, session_id: str, step: StepHook | None = None) -> list[str]:
        with (self.control / "switches.log").open("a") as log:
            log.write(session_id + "\n")
        refused = session_id in self._listed("switch-fails") or (
            (self.control / "switch-only").exists()
            and session_id not in self._listed("switch-only"))
        if refused:
            raise KaelError(f"cannot switch to {session_id}")
        return super().switch_to(session_id, step)

    def switches(self) -> list[str]:
        log = self.control / "switches.log"
        return log.read_text().split() if log.exists() else []

    def pointer(self) -> str:
        return self.path.read_text().strip()


def write_source(config: Config, turns: int = 3) -> Path:
    builder = TranscriptBuilder()
    builder.first_turn_attachments()
    builder.user(f"hello, {SECRET}")
    builder.tool_call("Bash", "x" * 2000, text="let me look")
    builder.say("I looked.")
    for index in range(turns - 1):
        builder.user(f"question {index}")
        builder.thinking()
        builder.say(f"answer {index}")
    builder.system()
    return builder.write(config.project_dir / f"{SESSION}.jsonl")


def turn_ended(config: Config, session: str) -> None:
    """A turn in SESSION as Claude Code ends it: the words, then (after the Stop hooks returned)
    `stop_hook_summary`. A rollback's Stop comes after such a turn in the rebuilt session."""
    builder = TranscriptBuilder()
    builder.user("please go back")
    builder.say("going back")
    builder.system()
    with (config.project_dir / f"{session}.jsonl").open("ab") as handle:
        handle.write(b"".join(orjson.dumps(record) + b"\n" for record in builder.records))


def stop_input(config: Config, session: str = SESSION, path: Path | str | None = None,
               **extra: object) -> StopHookInput:
    transcript = str(path) if path is not None else str(config.project_dir / f"{session}.jsonl")
    data = {"session_id": session, "transcript_path": transcript, "cwd": "/home/user/project",
            "hook_event_name": "Stop", "stop_hook_active": False, **extra}
    return StopHookInput.parse(orjson.dumps(data))


def scheduled(config: Config, base: HarnessBase | None = None) -> Operation:
    op = service.request(config, "test rebuild", "REBUILD")
    changed = service.record_stop(config, stop_input(config), base)
    assert changed is not None and changed.operation_id == op.operation_id
    return changed


def leftovers(*roots: Path) -> list[Path]:
    """Temporary files and staging leftovers under ROOTS."""
    return [p for root in roots for p in root.rglob("*") if p.name.endswith(".tmp")]
