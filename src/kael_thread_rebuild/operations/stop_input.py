"""The Stop hook's input: parsed defensively, then checked against the config and the target.

Claude Code adds keys to the hook input over releases; only `session_id` and `transcript_path`
are needed (`cwd` is kept when present). Nothing here raises on bad input: a problem is a
sentence, which the service records on the operation it concerns.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict

from ..config import Config
from ..defaults import STOP_INPUT_MAX_BYTES
from ..errors import KaelError, UsageError
from ..paths import require_path_text, resolve_transcript
from ..switching.base import SwitchBase
from ..transcript.reader import loads_line
from .model import HookFacts, is_session_id, utcnow


class StopHookInput(BaseModel):
    model_config = ConfigDict(frozen=True)

    session_id: str = ""
    transcript_path: str = ""
    cwd: str = ""
    problem: str = ""  # why the raw input was unusable, when it was

    @classmethod
    def parse(cls, raw: bytes) -> StopHookInput:
        if len(raw) > STOP_INPUT_MAX_BYTES:
            return cls(problem=f"the Stop hook input is over {STOP_INPUT_MAX_BYTES} bytes")
        try:
            data = loads_line(raw)
        except ValueError:
            return cls(problem="the Stop hook input is not JSON")
        if not isinstance(data, dict):
            return cls(problem="the Stop hook input is not a JSON object")

        def text(key: str) -> str:
            value = data.get(key)
            return value if isinstance(value, str) else ""

        return cls(session_id=text("session_id"), transcript_path=text("transcript_path"),
                   cwd=text("cwd"))


def check_stop(config: Config, hook: StopHookInput,
               base: SwitchBase | None) -> HookFacts | str:
    """The checked facts of a Stop, or the one-sentence reason it cannot schedule anything."""
    if hook.problem:
        return hook.problem
    if not hook.session_id or not hook.transcript_path:
        return "the Stop hook input lacks session_id or transcript_path"
    given = Path(hook.transcript_path)
    if not given.is_absolute():
        return f"the Stop hook's transcript_path {hook.transcript_path!r} is not absolute"
    try:
        real = _named_transcript(config, given)
    except KaelError as exc:
        return str(exc)
    if real.parent != config.project_dir.resolve() or real.suffix != ".jsonl":
        return f"transcript {given} is not a session transcript directly in project_dir"
    if real.stem != hook.session_id:
        return f"the Stop hook's session_id {hook.session_id} is not the transcript's ({real.stem})"
    if not is_session_id(hook.session_id):
        return f"the Stop hook's session_id {hook.session_id[:80]!r} is not a session id (a UUID)"
    if base is not None:
        try:
            running = base.running_session()
        except KaelError:
            running = None  # cannot tell: the worker's identity checks still apply
        if running is not None and running != hook.session_id:
            return (f"the Stop came from session {hook.session_id}, but the target runs "
                    f"session {running}")
    return HookFacts(session_id=hook.session_id, transcript_path=str(real), cwd=hook.cwd,
                     received_at=utcnow())


def _named_transcript(config: Config, given: Path) -> Path:
    """The real path of the transcript GIVEN names. One that does not exist yet is taken when its
    folder is project_dir: Claude Code 2.1.328 can create a new session's transcript only after
    the first turn's Stop hook returned, so the hook (which must return at once) cannot wait for
    it; the worker waits, bounded by `stop_settle_timeout_seconds`."""
    if given.exists() or given.is_symlink():
        return resolve_transcript(config, given)
    try:
        require_path_text(str(given))
    except ValueError as exc:
        raise UsageError(f"the Stop hook's transcript_path {str(given)[:200]!r} {exc}") from None
    return given.parent.resolve() / given.name
