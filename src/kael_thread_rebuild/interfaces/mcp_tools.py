"""The eight tools of the `kael-thread-rebuild-mcp` stdio server (spec §8), on the MCP SDK:
the actions of the table (`actions`) that have a `Tool`.

Four read-only previews (doctor, dirty, plan, status) and three state changes that each need an
exact confirmation word (request, cancel, rollback request). A state change only records the
wish: the switch happens after the model's reply ends (Stop hook, then the daemon).

Importing this module takes the SDK and the engine (seconds on a loaded machine), so the
server's start-up path (`mcp_server`) answers `initialize` and the list requests from a snapshot
and hands the connection over to `serve` only when a tool is called.
"""

from __future__ import annotations

import inspect
import io
import json
import threading
from collections.abc import Callable, Hashable, Iterable, Sequence
from pathlib import Path
from typing import Annotated, Any, BinaryIO, TextIO, cast

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.stdio import stdio_server
from mcp_types import ToolAnnotations
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, Field
from pydantic.fields import FieldInfo

from .. import __version__
from ..config import Config
from ..doctor.mcp import SERVER_NAME
from ..errors import KaelError
from ..fsutil import atomic_write_bytes
from ..operations import service
from ..paths import shown
from .action_model import Action, Call
from .actions import ACTIONS
from .mcp_server import (
    PROTOCOL_VERSION_KEY,
    SNAPSHOT,
    SNAPSHOT_METHODS,
    SUBSCRIPTION_ID_KEY,
    Lines,
)

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
reply ends. thread_rebuild_reload (word {service.RELOAD_WORD}) restarts Claude Code onto this same
session after the reply ends, every word kept, so that MCP servers, hooks and settings added
since it started load. Use them only when the human asks.
"""

ACKNOWLEDGED = "notifications/subscriptions/acknowledged"
# The subscription Claude Code asks for; another one is handed to the SDK server at once.
LISTEN = {"notifications": {"toolsListChanged": True, "promptsListChanged": True,
                            "resourcesListChanged": True}}


def tool_annotations(action: Action[Any, Any]) -> ToolAnnotations:
    """What the client is told about a tool: read-only and idempotent, or destructive."""
    return ToolAnnotations(read_only_hint=not action.changes, destructive_hint=action.changes,
                           idempotent_hint=not action.changes, open_world_hint=False)


def tool_function(name: str, fields: Iterable[tuple[str, FieldInfo]], output: Any,
                  run: Callable[[dict[str, Any]], Any]) -> Callable[..., Any]:
    """The function the SDK reads a tool from: its keyword parameters are FIELDS (with the
    descriptions the model reads), it returns OUTPUT, and RUN answers a call. Engine refusals
    become tool errors carrying the engine's one-line reason; so does a file system error (the
    tool must always say why)."""

    def answer(**given: Any) -> Any:
        try:
            return run(given)
        except KaelError as exc:
            raise ToolError(str(exc)) from None
        except OSError as exc:
            where = f" ({shown(exc.filename)})" if exc.filename else ""
            raise ToolError(f"{exc.strerror or exc}{where}") from None

    parameters = [
        inspect.Parameter(field_name, inspect.Parameter.KEYWORD_ONLY,
                          annotation=Annotated[field.annotation,
                                               Field(description=field.description,
                                                     json_schema_extra=field.json_schema_extra)],
                          default=inspect.Parameter.empty if field.is_required()
                          else field.default)
        for field_name, field in fields]
    answer.__name__ = answer.__qualname__ = name
    answer.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        parameters, return_annotation=output)
    answer.__annotations__ = {p.name: p.annotation for p in parameters} | {"return": output}
    return answer


def _answering(action: Action[Any, Any], config: Config) -> Callable[..., BaseModel]:
    """The tool function of ACTION: its input model's fields, the tool's output."""
    assert action.tool is not None
    return tool_function(action.tool.name, ((name, field) for name, field, _ in action.fields()),
                         action.tool_output(),
                         lambda given: action.answer(Call(config=config, via="mcp"), given))


def build_server(config: Config) -> MCPServer[Any]:
    server: MCPServer[Any] = MCPServer(SERVER_NAME, instructions=INSTRUCTIONS,
                                       version=__version__, log_level="WARNING")
    for action in sorted(ACTIONS, key=lambda action: action.changes):  # the previews first
        if action.tool is not None:
            server.add_tool(_answering(action, config), name=action.tool.name,
                            description=action.tool.description,
                            annotations=tool_annotations(action))
    return server


class _Replay:
    """What the SDK's stdio transport reads: the client's lines the start-up path already
    answered (so the SDK's session goes through the same handshake), then the wire."""

    def __init__(self, answered: list[bytes], wire: Lines) -> None:
        self._answered = list(answered)
        self._wire = wire

    def readline(self) -> str:
        line = self._answered.pop(0) if self._answered else self._wire.readline()
        return line.decode("utf-8", errors="replace")


class _Answers:
    """What the SDK's stdio transport writes, one message per write: to the wire, except its
    answers to the replayed requests (the client already has those)."""

    def __init__(self, wire: BinaryIO, answered_ids: set[Hashable],
                 acknowledged: set[Hashable]) -> None:
        self._wire = wire
        self._answered_ids = set(answered_ids)
        self._acknowledged = set(acknowledged)

    def write(self, text: str) -> int:
        if not self._already_answered(text):
            self._wire.write(text.encode())
        return len(text)

    def flush(self) -> None:
        self._wire.flush()

    def _already_answered(self, text: str) -> bool:
        if not self._answered_ids and not self._acknowledged:
            return False
        message = json.loads(text)
        if not isinstance(message, dict):
            return False
        if message.get("method") == ACKNOWLEDGED:
            meta = (message.get("params") or {}).get("_meta") or {}
            return _take(self._acknowledged, meta.get(SUBSCRIPTION_ID_KEY))
        return "method" not in message and _take(self._answered_ids, message.get("id"))


def _take(ids: set[Hashable], wanted: object) -> bool:
    if isinstance(wanted, Hashable) and wanted in ids:
        ids.discard(wanted)
        return True
    return False


def serve(config: Config, wire_in: Lines, wire_out: BinaryIO, *,
          answered: Sequence[bytes] = (), answered_ids: set[Hashable] | None = None,
          acknowledged: set[Hashable] | None = None) -> None:
    """Serve the eight tools over WIRE_IN/WIRE_OUT until the client closes its side, first
    replaying ANSWERED (the client's lines so far) and holding back the answers to
    ANSWERED_IDS and the acknowledgements of the subscriptions ACKNOWLEDGED."""
    serve_server(build_server(config), wire_in, wire_out, answered=answered,
                 answered_ids=answered_ids, acknowledged=acknowledged)


def serve_server(server: MCPServer[Any], wire_in: Lines, wire_out: BinaryIO, *,
                 answered: Sequence[bytes] = (), answered_ids: set[Hashable] | None = None,
                 acknowledged: set[Hashable] | None = None) -> None:
    """`serve` for any SDK server (the advisor's too)."""
    lowlevel = server._lowlevel_server  # MCPServer.run_stdio_async, with our streams
    stdin = cast(TextIO, _Replay(list(answered), wire_in))
    stdout = cast(TextIO, _Answers(wire_out, answered_ids or set(), acknowledged or set()))

    async def run() -> None:
        async with stdio_server(anyio.wrap_file(stdin), anyio.wrap_file(stdout)) as (read, write):
            await lowlevel.run(read, write, lowlevel.create_initialization_options())

    anyio.run(run)


class _Script(io.RawIOBase):
    """The client side of `record_snapshot`: its lines, then end of file once every request
    has its answer (end of file earlier would end the session before the last answers)."""

    def __init__(self, lines: list[bytes], answers: _Collected) -> None:
        super().__init__()
        self._lines = lines
        self._answers = answers

    def readline(self, size: int | None = -1) -> bytes:
        if self._lines:
            return self._lines.pop(0)
        self._answers.complete.wait(timeout=60)
        return b""


class _Collected(io.RawIOBase):
    def __init__(self, expected: int) -> None:
        super().__init__()
        self.messages: list[dict[str, Any]] = []
        self.complete = threading.Event()
        self._expected = expected

    def write(self, data: Any) -> int:
        self.messages.append(json.loads(bytes(data)))
        if sum(isinstance(message.get("id"), int) for message in self.messages) >= \
                self._expected:
            self.complete.set()
        return len(data)


def record_snapshot(build: Callable[[], MCPServer[Any]] | None = None,
                    generated_by: str = "python -m kael_thread_rebuild.interfaces.mcp_tools",
                    ) -> dict[str, Any]:
    """The SDK server's answers to what a client asks before calling a tool, for every
    protocol version it speaks: `initialize` and the lists (handshake versions);
    `server/discover`, the acknowledgement of `subscriptions/listen` and the lists, each request
    carrying its version in `_meta` as Claude Code sends them (the newer versions). BUILD
    makes the server (default: this one's, with its tools listed, never called)."""
    build = build or (lambda: build_server(  # listed, never called
        Config.model_construct(project_dir=Path("/nonexistent"))))
    versions: dict[str, dict[str, Any]] = {}
    for version in HANDSHAKE_PROTOCOL_VERSIONS:
        hello = {"protocolVersion": version, "capabilities": {},
                 "clientInfo": {"name": "snapshot", "version": "0"}}
        initialized = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})
        versions[version] = _record(build, [("initialize", hello), initialized,
                                            *((method, None) for method in SNAPSHOT_METHODS)])
    for version in MODERN_PROTOCOL_VERSIONS:
        meta = {"_meta": {PROTOCOL_VERSION_KEY: version,
                          "io.modelcontextprotocol/clientInfo": {"name": "snapshot",
                                                                 "version": "0"},
                          "io.modelcontextprotocol/clientCapabilities": {}}}
        listen = json.dumps({"jsonrpc": "2.0", "id": "listen", "method": "subscriptions/listen",
                             "params": {**meta, **LISTEN}})
        answers = _record(build, [("server/discover", meta), listen,
                                  *((method, meta) for method in SNAPSHOT_METHODS)])
        answers["subscriptions/listen"] = {"request": LISTEN,
                                           "notification": answers.pop(ACKNOWLEDGED)}
        versions[version] = answers
    return {"generated_by": generated_by, "protocol_versions": versions}


def _record(build: Callable[[], MCPServer[Any]],
            script: list[tuple[str, dict[str, Any] | None] | str]) -> dict[str, Any]:
    """The SDK server's answer to each request of SCRIPT (a line as is: not answered), and
    its notifications, by method."""
    methods = [step[0] for step in script if isinstance(step, tuple)]
    lines = [step.encode() + b"\n" if isinstance(step, str) else
             _line(methods.index(step[0]), step[0], step[1]) for step in script]
    answers = _Collected(len(methods))
    serve_server(build(), cast(BinaryIO, _Script(lines, answers)), cast(BinaryIO, answers))
    recorded: dict[str, Any] = {}
    for message in answers.messages:
        if isinstance(message.get("id"), int):
            recorded[methods[message["id"]]] = _without(message, "jsonrpc", "id")
        elif "method" in message and "id" not in message:
            recorded[message["method"]] = message
    return recorded


def _without(message: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {key: value for key, value in message.items() if key not in keys}


def _line(number: int, method: str, params: dict[str, Any] | None = None) -> bytes:
    request: dict[str, Any] = {"jsonrpc": "2.0", "id": number, "method": method}
    if params is not None:
        request["params"] = params
    return json.dumps(request).encode() + b"\n"


if __name__ == "__main__":
    atomic_write_bytes(SNAPSHOT, json.dumps(record_snapshot(), indent=1, sort_keys=True,
                                            ensure_ascii=False).encode() + b"\n", mode=0o644)
