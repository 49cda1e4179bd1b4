"""The host's process table, read from /proc (Linux), for finding Claude Code processes."""

from __future__ import annotations

import os
import pwd
from collections.abc import Iterator
from typing import NamedTuple


class Proc(NamedTuple):
    pid: int
    ppid: int
    uid: int
    gid: int
    argv: list[str]


def _read(path: str) -> bytes:
    with open(path, "rb") as handle:
        return handle.read()


def read_cmdline(pid: int) -> list[str]:
    words = _read(f"/proc/{pid}/cmdline").split(b"\0")
    if words and words[-1] == b"":
        words.pop()
    return [os.fsdecode(word) for word in words]


def environ(pid: int) -> dict[str, str]:
    pairs = (os.fsdecode(item).partition("=") for item in _read(f"/proc/{pid}/environ")
             .split(b"\0") if item)
    return {name: value for name, _eq, value in pairs}


def cwd(pid: int) -> str:
    return os.readlink(f"/proc/{pid}/cwd")


def exe(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return None


def _status(pid: int) -> dict[str, str]:
    lines = _read(f"/proc/{pid}/status").decode("utf-8", "replace").splitlines()
    return {key: value.strip() for key, _colon, value in (line.partition(":") for line in lines)}


def processes() -> Iterator[Proc]:
    """Every process whose command line and status can be read (kernel threads have none)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        pid = int(entry)
        try:
            argv = read_cmdline(pid)
            status = _status(pid)
        except OSError:
            continue
        if argv:
            yield Proc(pid, int(status["PPid"]), int(status["Uid"].split()[0]),
                       int(status["Gid"].split()[0]), argv)


def ancestors(pid: int, table: dict[int, Proc]) -> list[int]:
    """PID's parents, nearest first."""
    found: list[int] = []
    while pid in table and table[pid].ppid not in found and table[pid].ppid > 0:
        pid = table[pid].ppid
        found.append(pid)
    return found


def systemd_unit(pid: int) -> tuple[str, str] | None:
    """(unit, bus) of the service whose cgroup holds PID: bus "user" for a unit of a user
    manager (`…/user@UID.service/…/NAME.service`), "system" otherwise."""
    try:
        text = _read(f"/proc/{pid}/cgroup").decode("utf-8", "replace")
    except OSError:
        return None
    for line in text.splitlines():
        fields = line.split(":", 2)
        if len(fields) != 3 or fields[1] not in ("", "name=systemd"):
            continue
        services = [p for p in fields[2].split("/") if p.endswith(".service")]
        if not services or services[-1].startswith("user@"):
            return None
        user = services[0].startswith("user@")
        return services[-1], "user" if user else "system"
    return None


def user_of(uid: int) -> tuple[str, str]:
    """(name, home) of UID; the uid itself when it has no passwd entry."""
    try:
        entry = pwd.getpwuid(uid)
    except KeyError:
        return str(uid), "/"
    return entry.pw_name, entry.pw_dir


def which(word: str, env: dict[str, str], directory: str) -> str:
    """WORD as an absolute path, looked up as the process itself would (PATH, or its cwd)."""
    if "/" in word:
        return os.path.normpath(os.path.join(directory, word))
    for folder in env.get("PATH", "/usr/local/bin:/usr/bin:/bin").split(":"):
        candidate = os.path.join(folder or directory, word)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return word
