"""A stand-in HTTP server on 127.0.0.1: the machinery the provider stand-ins share
(:mod:`tests.support.standin_api` for Claude Code, :mod:`tests.support.standin_openai` for the
advisor's Kimi Code CLI)."""

from __future__ import annotations

import contextlib
import json
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

__all__ = ["LoopbackHandler", "LoopbackServer", "QuietServer"]


class QuietServer(ThreadingHTTPServer):
    """A threading server whose handlers reach their stand-in as ``self.server.api``."""

    daemon_threads = True
    allow_reuse_address = True
    api: Any

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._open: set[socket.socket] = set()
        self._open_lock = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._open_lock:
            self._open.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._open_lock:
            self._open.discard(request)
        super().shutdown_request(request)

    def close_connections(self, timeout: float = 5.0) -> None:
        """End the keep-alive connections a client left open, and wait for their handlers: a
        handler thread left waiting for a next request outlives the test that started it (and
        a process with other threads running does not fork its scanner)."""
        with self._open_lock:
            open_now = list(self._open)
        for request in open_now:
            with contextlib.suppress(OSError):
                request.shutdown(socket.SHUT_RDWR)
        deadline = time.monotonic() + timeout
        while self._open and time.monotonic() < deadline:
            time.sleep(0.01)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A CLI drops keep-alive connections when it exits, or is killed mid-request.
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class LoopbackHandler(BaseHTTPRequestHandler):
    """What both stand-ins' handlers do alike: keep-alive, no logging, a JSON body read leniently
    (``None`` when empty or not JSON), and whole answers with a content length."""

    protocol_version = "HTTP/1.1"
    server: QuietServer

    def log_message(self, format: str, *args: Any) -> None:
        return

    def extra_headers(self) -> dict[str, str]:
        """Headers the provider adds to every answer."""
        return {}

    def _send(self, status: int, content_type: str, data: bytes) -> None:
        self.send_response(status)
        self.send_header("content-type", content_type)
        if content_type.startswith("text/event-stream"):
            self.send_header("cache-control", "no-cache")
        self.send_header("content-length", str(len(data)))
        for name, value in self.extra_headers().items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _send_json(self, status: int, payload: Any) -> None:
        self._send(status, "application/json", json.dumps(payload, ensure_ascii=False).encode())

    def _send_stream(self, data: bytes) -> None:
        self._send(200, "text/event-stream; charset=utf-8", data)

    def _read_body(self) -> Any:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            return None


class LoopbackServer:
    """Serves ``handler`` on 127.0.0.1 (``port`` 0: a free one) in a daemon thread; a context
    manager."""

    handler: type[BaseHTTPRequestHandler]
    thread_name = "standin"

    def __init__(self, port: int = 0) -> None:
        self._port = port
        self._server: QuietServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> Self:
        server = QuietServer(("127.0.0.1", self._port), self.handler)
        server.api = self
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, name=self.thread_name,
                                        daemon=True)
        self._thread.start()
        return self

    def _stopping(self) -> None:
        """Called before the server shuts down (to end requests that would never end)."""

    def stop(self) -> None:
        self._stopping()
        if self._server is not None:
            self._server.shutdown()
            self._server.close_connections()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError(f"{type(self).__name__} is not running")
        return int(self._server.server_address[1])

    @property
    def origin(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return f"http://127.0.0.1:{self.port}"
