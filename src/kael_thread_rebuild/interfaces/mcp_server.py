"""The `kael-thread-rebuild-mcp` stdio server: the eight tools the model uses (spec §8).

Claude Code gives an MCP server about 3 s to answer `initialize`, and importing the MCP SDK and
the engine takes longer than that on a loaded machine. So this start-up path needs only the
standard library: it answers `initialize` and the list requests from `mcp_snapshot.json` (the
SDK server's own answers, recorded by `mcp_tools` and checked by a test) and hands the
connection to the SDK server (`mcp_tools.serve`) at the first other message, a tool call,
replaying the client's lines so far with the answers already sent held back. The config (and
with it pydantic) is loaded on a thread meanwhile; a config error still ends the server with its
one line and exit code 2.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys
import threading
from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Protocol

from .. import __version__
from ..errors import ConfigError
from ..state_layout import CONFIG_ENV

if TYPE_CHECKING:
    from ..config import Config

PROG = "kael-thread-rebuild-mcp"
SNAPSHOT = Path(__file__).with_name("mcp_snapshot.json")
# Requests answered from the snapshot; any other request goes to the SDK server.
SNAPSHOT_METHODS = ("tools/list", "prompts/list", "resources/list", "resources/templates/list",
                    "ping")

PROTOCOL_VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
SUBSCRIPTION_ID_KEY = "io.modelcontextprotocol/subscriptionId"

Snapshot = dict[str, dict[str, dict[str, Any]]]

# The deepest a client's message may nest. The SDK's parser gives up near 200 levels and drops
# such a line unanswered; Python's `json` raises RecursionError near 1000.
MAX_NESTING = 100
PARSE_ERROR = -32700
# A string (to its end when it has none: never a second pass over the line), or a bracket.
_STRING = rb'"[^"\\]*(?:\\.[^"\\]*)*'
_TOKEN = re.compile(_STRING + rb'"?|[\[\]{}]', re.DOTALL)
_ID_VALUE = re.compile(rb"\s*:\s*(-?[0-9]+|" + _STRING + rb'")', re.DOTALL)


class Lines(Protocol):
    def readline(self) -> bytes: ...


def too_deep(line: bytes) -> bytes | None:
    """The answer to LINE when it nests deeper than MAX_NESTING: a JSON-RPC parse error, with
    the id LINE gives at its top level (else null). None for any other line."""
    if line.count(b"[") + line.count(b"{") <= MAX_NESTING:
        return None
    depth = deepest = 0
    request_id: object = None
    for token in _TOKEN.finditer(line):
        mark = token.group()
        if mark in (b"[", b"{"):
            depth += 1
            deepest = max(deepest, depth)
        elif mark in (b"]", b"}"):
            depth -= 1
        elif depth == 1 and mark == b'"id"' and (value := _ID_VALUE.match(line, token.end())):
            with contextlib.suppress(ValueError):
                request_id = json.loads(value.group(1))
    if deepest <= MAX_NESTING:
        return None
    return _line({"jsonrpc": "2.0", "id": request_id, "error": {
        "code": PARSE_ERROR,
        "message": f"Parse error: the message nests deeper than {MAX_NESTING} levels"}})


class _Wire:
    """The client's lines as the server reads them: a line nested too deeply to parse is
    answered here (`too_deep`) and read no further, so one such line cannot end the server or
    leave its request unanswered."""

    def __init__(self, wire_in: Lines, wire_out: BinaryIO) -> None:
        self._in = wire_in
        self._out = wire_out

    def readline(self) -> bytes:
        while line := self._in.readline():
            refusal = too_deep(line)
            if refusal is None:
                return line
            self._out.write(refusal)
            self._out.flush()
        return b""


class _Handshake:
    """The client's lines so far, the ids of the requests answered from the snapshot and the
    subscriptions acknowledged from it.

    Two eras of the protocol: `initialize` first (the version it names holds for the
    connection), or, as Claude Code 2.1.328 speaks, every request naming its version in
    `_meta` (`server/discover`, `subscriptions/listen`, the lists).

    A server slower to start than Claude Code's `server/discover` probe (under load, a few
    seconds) reads the probe and then `initialize`: the client gave up on the probe and goes on
    in the handshake era. The connection is then that era's, from `initialize` on: the lines
    before it are not replayed to the SDK server, which would otherwise take the probe for the
    opening, serve the new era, and refuse every later request for its missing `_meta`."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self.answers: dict[str, dict[str, Any]] | None = None  # after `initialize`
        self.lines: list[bytes] = []
        self.answered_ids: set[Hashable] = set()
        self.acknowledged: set[Hashable] = set()

    def answer(self, line: bytes) -> bytes | None:
        """What to send for LINE (b"" for nothing), or None: hand over to the SDK."""
        self.lines.append(line)
        try:
            message = json.loads(line)
        except ValueError:
            return None
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            return None
        method, params = message.get("method"), message.get("params")
        if method == "initialize" and self.answers is None:
            self._forget_before(line)
        if "id" not in message:
            return b"" if self.answers is not None and isinstance(method, str) else None
        request_id = message["id"]
        if isinstance(request_id, bool) or not isinstance(request_id, int | str):
            return None
        if method == "subscriptions/listen":
            return self._listen(request_id, params)
        entry = self._entry(method, params)
        if entry is None:
            return None
        self.answered_ids.add(request_id)
        return _line({"jsonrpc": "2.0", "id": request_id, **entry})

    def _forget_before(self, line: bytes) -> None:
        """LINE opens the connection: what came before it was abandoned by the client."""
        self.lines = [line]
        self.answered_ids.clear()
        self.acknowledged.clear()

    def _entry(self, method: object, params: object) -> dict[str, Any] | None:
        if method == "initialize" and self.answers is None and isinstance(params, dict):
            self.answers = self.snapshot.get(str(params.get("protocolVersion")))
            return None if self.answers is None else self.answers["initialize"]
        plain = params is None or (isinstance(params, dict) and set(params) <= {"_meta"})
        answers = self.answers or self._per_request(params)
        if answers is None or method not in (*SNAPSHOT_METHODS, "server/discover") or not plain:
            return None
        return answers.get(str(method))

    def _per_request(self, params: object) -> dict[str, dict[str, Any]] | None:
        meta = params.get("_meta") if isinstance(params, dict) else None
        version = meta.get(PROTOCOL_VERSION_KEY) if isinstance(meta, dict) else None
        return self.snapshot.get(version) if isinstance(version, str) else None

    def _listen(self, request_id: int | str, params: object) -> bytes | None:
        """The acknowledgement the SDK sends for the same subscription; the request stays
        open (the SDK takes it over with the connection)."""
        answers = self._per_request(params)
        listen = answers.get("subscriptions/listen") if answers else None
        asked = {key: value for key, value in params.items() if key != "_meta"} \
            if isinstance(params, dict) else None
        if listen is None or asked != listen["request"]:
            return None
        self.acknowledged.add(request_id)
        notice = json.loads(json.dumps(listen["notification"]))
        notice["params"]["_meta"][SUBSCRIPTION_ID_KEY] = request_id
        return _line(notice)


def _line(message: dict[str, Any]) -> bytes:
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def _private_wire() -> tuple[BinaryIO, BinaryIO]:
    """The client's pipes on descriptors of our own; fd 0 then reads the null device and fd 1
    goes to stderr, so no child of the engine can read or write the wire (as the SDK's own
    stdio transport does)."""
    wire_in = os.fdopen(os.dup(0), "rb")
    wire_out = os.fdopen(os.dup(1), "wb")
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    return wire_in, wire_out


class _ConfigLoader(threading.Thread):
    """Loads the config beside the handshake; on a config error it prints the one line and
    ends the process with the error's exit code, whatever the handshake is doing."""

    def __init__(self, path: str | None) -> None:
        super().__init__(name="config", daemon=True)
        self._path = path
        self._config: Config | None = None

    def run(self) -> None:
        from ..config import load_config

        try:
            self._config = load_config(self._path)
        except ConfigError as exc:
            print(f"{PROG}: {exc}", file=sys.stderr, flush=True)  # one line: the problems joined
            os._exit(exc.exit_code)

    def config(self) -> Config:
        self.join()
        if self._config is None:
            raise RuntimeError("the config could not be loaded (see above)")
        return self._config


class HandOver(Protocol):
    """Serves the connection from the first message the snapshot cannot answer: the client's
    lines so far are HANDSHAKE's, the rest come from WIRE."""

    def __call__(self, handshake: _Handshake, wire: Lines) -> None: ...


def serve_handshake(wire_in: Lines, wire_out: BinaryIO, snapshot: Snapshot,
                    hand_over: HandOver) -> None:
    """Answer the opening from SNAPSHOT, then HAND_OVER the connection (any server's)."""
    handshake = _Handshake(snapshot)
    wire = _Wire(wire_in, wire_out)
    while line := wire.readline():
        reply = handshake.answer(line)
        if reply is None:
            hand_over(handshake, wire)
            return
        if reply:
            wire_out.write(reply)
            wire_out.flush()


def serve(loader: _ConfigLoader, wire_in: Lines, wire_out: BinaryIO,
          snapshot: Snapshot) -> None:
    def hand_over(handshake: _Handshake, wire: Lines) -> None:
        from .mcp_tools import serve as serve_tools

        serve_tools(loader.config(), wire, wire_out, answered=handshake.lines,
                    answered_ids=handshake.answered_ids, acknowledged=handshake.acknowledged)

    serve_handshake(wire_in, wire_out, snapshot, hand_over)


def load_snapshot() -> Snapshot:
    snapshot: Snapshot = json.loads(SNAPSHOT.read_bytes())["protocol_versions"]
    return snapshot


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=PROG, description="The kael-thread-rebuild MCP server (stdio).")
    parser.add_argument("--config", metavar="PATH",
                        help=f"the instance's TOML config (default: ${CONFIG_ENV})")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    args = parser.parse_args(argv)
    snapshot = load_snapshot()
    loader = _ConfigLoader(args.config)
    loader.start()
    wire_in, wire_out = _private_wire()
    with contextlib.suppress(KeyboardInterrupt):
        serve(loader, wire_in, wire_out, snapshot)
        loader.config()  # the client closed early: a config error still ends with exit 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
