"""The `kael-advisor-mcp` stdio server; its project is its working directory.

Its start-up path is the rebuild's (`kael_thread_rebuild.interfaces.mcp_server`): standard
library only, it answers `initialize` (or Claude Code's `server/discover`) and the list requests
from `mcp_snapshot.json` and hands the connection to the SDK server (`mcp_tools`) at the first
tool call, so Claude Code's few seconds for the handshake are never spent importing the SDK.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO

from kael_thread_rebuild.interfaces.mcp_server import (
    Lines,
    Snapshot,
    _Handshake,
    _private_wire,
    serve_handshake,
)

from . import __version__

PROG = "kael-advisor-mcp"
SNAPSHOT = Path(__file__).with_name("mcp_snapshot.json")


def serve(project: Path, wire_in: Lines, wire_out: BinaryIO, snapshot: Snapshot) -> None:
    def hand_over(handshake: _Handshake, wire: Lines) -> None:
        from .mcp_tools import serve as serve_tools

        serve_tools(project, wire, wire_out, answered=handshake.lines,
                    answered_ids=handshake.answered_ids, acknowledged=handshake.acknowledged)

    serve_handshake(wire_in, wire_out, snapshot, hand_over)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=PROG, description="The advisor's MCP server (stdio): five tools through which "
        "Claude Code consults a Kimi Code advisor. Its project is its working directory.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.parse_args(argv)
    try:
        project = Path.cwd()
    except OSError as exc:
        print(f"{PROG}: the working directory (the project) is gone: {exc.strerror}",
              file=sys.stderr, flush=True)
        return 2
    snapshot: Snapshot = json.loads(SNAPSHOT.read_bytes())["protocol_versions"]
    wire_in, wire_out = _private_wire()
    signal.signal(signal.SIGTERM, lambda number, frame: sys.exit(128 + number))
    try:
        with contextlib.suppress(KeyboardInterrupt):
            serve(project, wire_in, wire_out, snapshot)
    finally:
        if "kael_advisor.runner" in sys.modules:  # a consultation may still be running
            from .runner import stop_all

            stop_all()
    return 0


if __name__ == "__main__":
    sys.exit(main())
