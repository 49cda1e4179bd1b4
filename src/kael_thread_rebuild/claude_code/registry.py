"""Claude Code's session registry: `<claude config dir>/sessions/<pid>.json`, one per live process.

Claude Code 2.1.328 writes the file when it starts, updates `sessionId` and `status` while it
runs and removes it on a clean exit. A process killed with SIGKILL leaves its file behind, and its
pid can be reused, so an entry only counts for a pid when its `procStart` (field 22 of
`/proc/<pid>/stat`) still matches. Unreadable, half-written or unknown files are skipped: the
caller asks again on its next poll.
"""

from __future__ import annotations

import functools
import os
from collections import deque
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidatorFunctionWrapHandler,
    WrapValidator,
)


def _none_if_invalid(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    try:
        return handler(value)
    except ValidationError:
        return None


# An optional field whose odd value must not cost the whole entry.
Lenient = WrapValidator(_none_if_invalid)


class RegistryEntry(BaseModel):
    """The fields this project uses; only `pid` and `sessionId` are required, other fields are
    None when missing or of another type, and unknown fields are ignored."""

    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)

    pid: int
    session_id: str = Field(alias="sessionId", min_length=1)
    cwd: Annotated[str | None, Lenient] = None
    status: Annotated[str | None, Lenient] = None
    kind: Annotated[str | None, Lenient] = None
    tmux: Annotated[str | None, Lenient] = None
    proc_start: Annotated[str | None, Lenient] = Field(None, alias="procStart")
    pid_domain: Annotated[str | None, Lenient] = Field(None, alias="pidDomain")
    started_at: Annotated[int | None, Lenient] = Field(None, alias="startedAt")

    @property
    def tmux_pane_id(self) -> str | None:
        """The pane id (`%N`) from `tmux`, which reads `<session>:@<window>.%<pane>`."""
        if not self.tmux:
            return None
        pane = self.tmux.rpartition(".")[2]
        return pane if pane.startswith("%") else None


def process_token(entry: RegistryEntry) -> dict[str, str]:
    """The identity fields of the Claude Code process ENTRY names: its pid and its start time,
    which together tell it from a later process that got the same pid."""
    return {"claude_pid": str(entry.pid), "claude_start": entry.proc_start or ""}


def registry_dir(claude_config_dir: Path) -> Path:
    return claude_config_dir / "sessions"


def read_entries(claude_config_dir: Path) -> list[RegistryEntry]:
    """Every readable `<pid>.json` whose `pid` field agrees with its file name."""
    try:
        files = sorted(registry_dir(claude_config_dir).glob("*.json"))
    except OSError:
        return []
    entries = []
    for file in files:
        if not file.stem.isdigit():
            continue
        try:
            entry = RegistryEntry.model_validate_json(file.read_bytes())
        except (OSError, ValidationError):
            continue
        if entry.pid == int(file.stem):
            entries.append(entry)
    return entries


def entry_for_pid(claude_config_dir: Path, pid: int) -> RegistryEntry | None:
    return _first_for(read_entries(claude_config_dir), [pid])


def entry_for_tree(claude_config_dir: Path, root_pid: int) -> RegistryEntry | None:
    """The entry of ROOT_PID or of its nearest descendant (a pane may run a shell around claude;
    a deeper entry can be a `claude -p` that claude itself started)."""
    return _first_for(read_entries(claude_config_dir), process_tree(root_pid))


def entry_for_pane(claude_config_dir: Path, pane_id: str) -> RegistryEntry | None:
    """The newest entry from another pid namespace that names tmux pane PANE_ID.

    For callers that cannot see the pane's processes (e.g. in a container). Entries this process
    can check are left to `entry_for_tree`: a process that was just replaced in the pane may
    still be exiting with its entry in place. Pane ids are unique per tmux server only, so this
    assumes one server per config dir.
    """
    matches = [e for e in read_entries(claude_config_dir)
               if e.tmux_pane_id == pane_id and _liveness(e) is None]
    return max(matches, key=lambda e: e.started_at or 0, default=None)


def _first_for(entries: Iterable[RegistryEntry], pids: Iterable[int]) -> RegistryEntry | None:
    by_pid = {e.pid: e for e in entries}
    for pid in pids:
        entry = by_pid.get(pid)
        if entry is not None and _liveness(entry) is True:
            return entry
    return None


def _liveness(entry: RegistryEntry) -> bool | None:
    """True/False when this process can tell (same pid namespace), None when it cannot."""
    ours = pid_domain()
    if entry.pid_domain is not None and (ours is None or entry.pid_domain != ours):
        return None
    start = proc_start(entry.pid)
    if start is None:
        return False
    return entry.proc_start is None or entry.proc_start == start


@functools.cache
def pid_domain() -> str | None:
    """This process's pid domain in Claude Code's spelling: `linux:<machine id>:pid:[<inode>]`."""
    try:
        machine = Path("/etc/machine-id").read_text().strip()
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        return None
    return f"linux:{machine}:{namespace}" if machine else None


def _stat_fields(pid: int) -> list[str] | None:
    """Fields 3.. of /proc/<pid>/stat (after the parenthesised command, which may hold spaces)."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return raw.rpartition(")")[2].split()


def proc_start(pid: int) -> str | None:
    """The process start time in clock ticks since boot, as Claude Code records it."""
    fields = _stat_fields(pid)
    return fields[19] if fields is not None and len(fields) > 19 else None


def process_tree(root_pid: int) -> list[int]:
    """ROOT_PID and its live descendants, breadth first (nearest first)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        fields = _stat_fields(int(entry.name))
        if fields is not None and len(fields) > 1:
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    order, queue = [], deque([root_pid])
    seen = {root_pid}
    while queue:
        pid = queue.popleft()
        order.append(pid)
        for child in sorted(children.get(pid, [])):
            if child not in seen:
                seen.add(child)
                queue.append(child)
    return order
