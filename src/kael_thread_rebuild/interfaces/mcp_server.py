"""The `kael-thread-rebuild-mcp` stdio server: the seven tools the model uses (spec §8).

Four read-only previews (doctor, dirty, plan, status) and three state changes that each need an
exact confirmation word (request, cancel, rollback request). A state change only records the
wish: the switch happens after the model's reply ends (Stop hook, then the daemon).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Annotated, Any, TypeVar

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import BaseModel, Field

from .. import __version__
from ..config import Config, load_config
from ..conversation.dirty import DirtyReport
from ..defaults import CONFIG_ENV
from ..doctor import MCP_COMMAND, SERVER_NAME, DoctorReport, run_doctor
from ..errors import ConfigError, KaelError
from ..operations import service
from ..operations.model import Operation, OperationStatus, utcnow
from ..paths import resolve_transcript, shown
from ..plan import PlanReport, build_plan

PROG = MCP_COMMAND

INSTRUCTIONS = f"""\
This server rebuilds the current Claude Code session into a clean new session that carries every
user and assistant word verbatim and drops only runtime traces (tool results, thinking, images,
injected context), then switches the running Claude Code onto it.

1. Preview first, with the read-only tools: thread_rebuild_doctor (is the setup sound?),
   thread_rebuild_dirty (how much runtime noise is there?) and thread_rebuild_plan (what would be
   carried; blocked_reason must be empty).
2. Show the plan to the human - at least source_turns, selected_turns, dropped_oldest_turns,
   blocked_reason and any failed doctor check - and ask whether to rebuild. Never request on your
   own judgement.
3. Only after the human agrees, call thread_rebuild_request once, with the confirmation word
   {service.REBUILD_WORD}.
4. Then finish your reply normally and end it: the switch happens only after your reply ends.
   Do not wait for it, do not poll, and never request twice.

thread_rebuild_status shows an operation's progress. thread_rebuild_cancel (word
{service.CANCEL_WORD}) ends a request that has not run yet. thread_rebuild_rollback_request (word
{service.ROLLBACK_WORD}) returns to the old session after an activated rebuild, again after the
reply ends. Use them only when the human asks.
"""

_READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True,
                             open_world_hint=False)
_DESTRUCTIVE = ToolAnnotations(read_only_hint=False, destructive_hint=True,
                               idempotent_hint=False, open_world_hint=False)

Transcript = Annotated[str | None, Field(
    description="a transcript inside project_dir; default: the newest session transcript")]
OperationId = Annotated[str, Field(description="the operation_id a request returned")]


class StatusResult(BaseModel):
    """An operation's record (ids, states, digests, counts; never conversation text)."""

    found: bool
    operation: Operation | None


class OperationResult(BaseModel):
    operation_id: str
    status: OperationStatus
    joined_existing: bool = False
    next_step: str


_AFTER_REPLY = ("Tell the human it is recorded, then finish your reply normally; the switch "
                "happens after the reply ends. Do not call this tool again.")

T = TypeVar("T")


def _call(action: Callable[[], T]) -> T:
    """Engine refusals become tool errors carrying the engine's one-line reason; so does a
    file system error (the tool must always say why)."""
    try:
        return action()
    except KaelError as exc:
        raise ToolError(str(exc)) from None
    except OSError as exc:
        where = f" ({shown(exc.filename)})" if exc.filename else ""
        raise ToolError(f"{exc.strerror or exc}{where}") from None


def build_server(config: Config) -> MCPServer[Any]:
    server: MCPServer[Any] = MCPServer(SERVER_NAME, instructions=INSTRUCTIONS,
                                       version=__version__, log_level="WARNING")

    def plan_report(transcript: str | None) -> PlanReport:
        return build_plan(config, resolve_transcript(config, transcript)).report

    @server.tool(annotations=_READ_ONLY)
    def thread_rebuild_doctor() -> DoctorReport:
        """Check everything a rebuild and switch needs (read-only): project dir, workdir, state
        dir, target, running session, resume command flags, Stop hook and its delivery, MCP
        registration and containers, stuck operations, image and daemon versions."""
        return run_doctor(config)

    @server.tool(annotations=_READ_ONLY)
    def thread_rebuild_dirty(transcript: Transcript = None) -> DirtyReport:
        """Runtime bytes by category and whether a rebuild is advised (read-only; it never
        requests)."""
        return _call(lambda: plan_report(transcript).dirty)

    @server.tool(annotations=_READ_ONLY)
    def thread_rebuild_plan(transcript: Transcript = None) -> PlanReport:
        """What a rebuild would carry and whether it is blocked (read-only). Show it to the
        human before any request."""
        return _call(lambda: plan_report(transcript))

    @server.tool(annotations=_READ_ONLY)
    def thread_rebuild_status(operation_id: Annotated[str | None, Field(
            description="default: the operation in flight, else the latest")] = None,
    ) -> StatusResult:
        """An operation's state and record (read-only)."""
        op = _call(lambda: service.status(config, operation_id))
        return StatusResult(found=op is not None, operation=op)

    @server.tool(annotations=_DESTRUCTIVE)
    def thread_rebuild_request(
        reason: Annotated[str, Field(description="why the human wants the rebuild")],
        confirmation: Annotated[str, Field(
            description=f"exactly {service.REBUILD_WORD}, only after the human agreed")],
    ) -> OperationResult:
        """Record a rebuild that runs after this reply ends. Only after showing the plan and
        the human agreeing. Call once; then finish the reply normally."""
        asked_at: datetime = utcnow()
        op = _call(lambda: service.request(config, reason, confirmation, requested_by="mcp"))
        return OperationResult(operation_id=op.operation_id, status=op.status,
                               joined_existing=op.created_at < asked_at,
                               next_step=_AFTER_REPLY)

    @server.tool(annotations=_DESTRUCTIVE)
    def thread_rebuild_cancel(
        operation_id: OperationId,
        confirmation: Annotated[str, Field(description=f"exactly {service.CANCEL_WORD}")],
    ) -> OperationResult:
        """Cancel a rebuild that has not started yet (pending or scheduled)."""
        op = _call(lambda: service.cancel(config, operation_id, confirmation))
        return OperationResult(operation_id=op.operation_id, status=op.status,
                               next_step="Nothing will be switched.")

    @server.tool(annotations=_DESTRUCTIVE)
    def thread_rebuild_rollback_request(
        operation_id: OperationId,
        confirmation: Annotated[str, Field(description=f"exactly {service.ROLLBACK_WORD}")],
    ) -> OperationResult:
        """Return to the old session after an activated rebuild; the switch back happens after
        this reply ends."""
        op = _call(lambda: service.rollback_request(config, operation_id, confirmation))
        return OperationResult(operation_id=op.operation_id, status=op.status,
                               next_step=_AFTER_REPLY)

    return server


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=PROG, description="The kael-thread-rebuild MCP server (stdio).")
    parser.add_argument("--config", metavar="PATH",
                        help=f"the instance's TOML config (default: ${CONFIG_ENV})")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    args = parser.parse_args(argv)
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        print(f"{PROG}: {exc.source}: {'; '.join(exc.problems)}", file=sys.stderr)
        return exc.exit_code
    with contextlib.suppress(KeyboardInterrupt):
        build_server(config).run("stdio")
    return 0


if __name__ == "__main__":
    sys.exit(main())
