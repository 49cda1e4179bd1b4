"""A fake bus with a fake systemd on one unix socket, speaking the real D-Bus wire protocol (built
and parsed by jeepney), for the client's I/O paths that a real systemd will not produce on
demand: a `JobRemoved` that arrives before `RestartUnit`'s reply, a spoofed one from another
sender, a job that never ends, a refused authentication, error replies.

Each accepted connection is served by its own thread until the client closes it.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jeepney import (
    DBusAddress,
    HeaderFields,
    Message,
    MessageType,
    Parser,
    new_error,
    new_method_return,
    new_signal,
)

from kael_thread_rebuild.switching.dbus import MANAGER, MANAGER_PATH, SERVICE, UNIT

SYSTEMD_NAME = ":1.1"
OTHER_NAME = ":1.99"
GUID = b"0123456789abcdef0123456789abcdef"


@dataclass
class FakeUnit:
    load_state: str = "loaded"
    active_state: str = "active"
    sub_state: str = "running"
    main_pid: int = 4242
    invocation_id: bytes = bytes(range(1, 17))
    processes: list[tuple[str, int, str]] = field(default_factory=list)


@dataclass
class FakeSystemd:
    """What the fake answers. `restart` is one of: "signal-first", "reply-first", "spoofed"
    (a "done" from another sender, then the real result), "never" (no signal at all)."""

    units: dict[str, FakeUnit] = field(default_factory=dict)
    restart: str = "reply-first"
    job_result: str = "done"
    errors: dict[str, str] = field(default_factory=dict)  # member -> D-Bus error name
    reject_auth: bool = False
    calls: list[str] = field(default_factory=list)
    restarted: list[str] = field(default_factory=list)
    _jobs: int = 0

    def path(self, unit: str) -> str:
        return f"{MANAGER_PATH}/unit/{unit.replace('-', '_2d').replace('.', '_2e')}"

    def unit_at(self, path: str) -> FakeUnit:
        return next(unit for name, unit in self.units.items() if self.path(name) == path)

    def answer(self, call: Message) -> list[Message]:
        """The messages the bus sends back for CALL, in order."""
        member = str(call.header.fields.get(HeaderFields.member))
        self.calls.append(member)
        if member in self.errors:
            return [new_error(call, self.errors[member], "s", (f"fake {member} refused",))]
        if member == "Hello":
            return [new_method_return(call, "s", (":1.42",))]
        if member in ("AddMatch", "Subscribe"):
            return [new_method_return(call)]
        if member == "GetNameOwner":
            return [new_method_return(call, "s", (SYSTEMD_NAME,))]
        if member == "LoadUnit":
            name = call.body[0]
            self.units.setdefault(name, FakeUnit(load_state="not-found", active_state="inactive",
                                                 sub_state="dead", main_pid=0,
                                                 invocation_id=b""))
            return [new_method_return(call, "o", (self.path(name),))]
        if member == "Get":
            interface, prop = call.body
            return [new_method_return(call, "v", (self._property(call, interface, prop),))]
        if member == "GetUnitProcesses":
            return [new_method_return(call, "a(sus)", (self.units[call.body[0]].processes,))]
        if member == "RestartUnit":
            return self._restart(call)
        return [new_error(call, "org.freedesktop.DBus.Error.UnknownMethod", "s", (member,))]

    def _property(self, call: Message, interface: str, prop: str) -> tuple[str, Any]:
        unit = self.unit_at(str(call.header.fields[HeaderFields.path]))
        table: dict[tuple[str, str], tuple[str, Any]] = {
            (UNIT, "LoadState"): ("s", unit.load_state),
            (UNIT, "ActiveState"): ("s", unit.active_state),
            (UNIT, "SubState"): ("s", unit.sub_state),
            (UNIT, "InvocationID"): ("ay", unit.invocation_id),
            (SERVICE, "MainPID"): ("u", unit.main_pid),
        }
        return table[(interface, prop)]

    def _restart(self, call: Message) -> list[Message]:
        name = call.body[0]
        self._jobs += 1
        job = f"{MANAGER_PATH}/job/{self._jobs}"
        self.restarted.append(name)
        reply = new_method_return(call, "o", (job,))

        def removed(result: str, sender: str) -> Message:
            signal = new_signal(DBusAddress(MANAGER_PATH, interface=MANAGER), "JobRemoved",
                                "uoss", (self._jobs, job, name, result))
            signal.header.fields[HeaderFields.sender] = sender
            return signal

        if self.restart == "never":
            return [reply]
        if self.restart == "signal-first":
            return [removed(self.job_result, SYSTEMD_NAME), reply]
        if self.restart == "spoofed":
            return [reply, removed("done", OTHER_NAME), removed(self.job_result, SYSTEMD_NAME)]
        return [reply, removed(self.job_result, SYSTEMD_NAME)]


class FakeBus:
    """Serves FAKE on a unix socket at PATH; a context manager."""

    def __init__(self, path: Path, fake: FakeSystemd) -> None:
        self.path = path
        self.fake = fake
        self.address = f"unix:path={path}"
        self._server = socket.socket(socket.AF_UNIX)
        self._threads: list[threading.Thread] = []

    def __enter__(self) -> FakeBus:
        self._server.bind(str(self.path))
        self._server.listen()
        accept = threading.Thread(target=self._accept, daemon=True)
        accept.start()
        return self

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(OSError):
            self._server.shutdown(socket.SHUT_RDWR)
        self._server.close()
        for thread in self._threads:
            thread.join(timeout=5)

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            data = self._authenticate(conn)
            if data is None:
                return
            parser, serial = Parser(), 1000
            parser.add_data(data)
            while True:
                message = parser.get_next_message()
                if message is None:
                    chunk = conn.recv(4096)
                    if not chunk:
                        return
                    parser.add_data(chunk)
                    continue
                if message.header.message_type is not MessageType.method_call:
                    continue
                for out in self.fake.answer(message):
                    serial += 1
                    conn.sendall(out.serialise(serial=serial))

    def _authenticate(self, conn: socket.socket) -> bytes | None:
        """The SASL exchange; returns the bytes after BEGIN (messages may follow at once)."""
        buffer = b""
        while b"\r\n" not in buffer:
            chunk = conn.recv(1024)
            if not chunk:
                return None
            buffer += chunk
        _, buffer = buffer.split(b"\r\n", 1)  # "\0AUTH EXTERNAL <uid>"
        if self.fake.reject_auth:
            conn.sendall(b"REJECTED EXTERNAL\r\n")
            return None
        conn.sendall(b"OK " + GUID + b"\r\n")
        while b"BEGIN\r\n" not in buffer:
            chunk = conn.recv(1024)
            if not chunk:
                return None
            buffer += chunk
        return buffer.split(b"BEGIN\r\n", 1)[1]
