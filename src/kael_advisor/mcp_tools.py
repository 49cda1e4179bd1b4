"""The five tools on the MCP SDK, built from `tools.TOOLS`, and the snapshot of the server's
answers before a tool call (`mcp_snapshot.json`, recorded by `python -m
kael_advisor.mcp_tools`), which the start-up path (`mcp_server`) answers from."""

from __future__ import annotations

import json
from collections.abc import Hashable, Sequence
from functools import partial
from pathlib import Path
from typing import Any, BinaryIO

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

from kael_thread_rebuild.fsutil import atomic_write_bytes
from kael_thread_rebuild.interfaces.mcp_server import Lines
from kael_thread_rebuild.interfaces.mcp_tools import record_snapshot, serve_server, tool_function

from . import __version__
from .pieces import SERVER_NAME
from .service import Advisor
from .tools import TOOLS, AdvisorTool

SNAPSHOT = Path(__file__).with_name("mcp_snapshot.json")
GENERATED_BY = "python -m kael_advisor.mcp_tools"

INSTRUCTIONS = """\
This server lets you consult an expensive advisor (the Kimi Code CLI) that remembers this
conversation: one advisor session per Claude Code conversation, continued by every consultation.

Consult at three wake points only: blueprint (before building something non-trivial), unstick
(when stuck after real attempts) and review (before calling work done). advisor_consult returns a
number at once; then call advisor_poll with it until the answer is there, and meanwhile only
watch and wait: do not start other work on what you asked about. Show the human the advisor's
answer when it matters. Keep consultations few and precise: each one costs money.
"""


def tool_annotations(found: AdvisorTool) -> ToolAnnotations:
    return ToolAnnotations(read_only_hint=found.read_only,
                           destructive_hint=False if found.read_only else None,
                           idempotent_hint=found.read_only, open_world_hint=found.open_world)


def build_server(advisor: Advisor) -> MCPServer[Any]:
    server: MCPServer[Any] = MCPServer(SERVER_NAME, instructions=INSTRUCTIONS,
                                       version=__version__, log_level="WARNING")
    for found in TOOLS:
        server.add_tool(tool_function(found.name, found.input.model_fields.items(), str,
                                      partial(found.call, advisor)), name=found.name,
                        description=found.description, annotations=tool_annotations(found))
    return server


def serve(project: Path, wire_in: Lines, wire_out: BinaryIO, *,
          answered: Sequence[bytes] = (), answered_ids: set[Hashable] | None = None,
          acknowledged: set[Hashable] | None = None) -> None:
    """Serve the five tools for PROJECT (see the rebuild's `serve_server`)."""
    serve_server(build_server(Advisor(project)), wire_in, wire_out, answered=answered,
                 answered_ids=answered_ids, acknowledged=acknowledged)


def snapshot() -> dict[str, Any]:
    return record_snapshot(lambda: build_server(Advisor(Path("/nonexistent"))), GENERATED_BY)


if __name__ == "__main__":
    atomic_write_bytes(SNAPSHOT, json.dumps(snapshot(), indent=1, sort_keys=True,
                                            ensure_ascii=False).encode() + b"\n", mode=0o644)
