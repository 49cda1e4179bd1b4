"""Where an instance keeps its state, and how its config file is found: declared once, here.

Standard library only: the Stop hook's fast path, the container's healthcheck and the image
scripts read it before (or without) importing the engine. The state dir (0700, the Claude user's)
holds:

    operations/<operation id>.json   one record per operation (0600)
    backups/<operation id>/          the source transcript as copied before a rebuild (0700)
    candidates/<operation id>/       the candidate of an operation that was not used (0700)
    coordinator.lock                 the store's cross-process lock
    daemon.lock                      held by `serve` for its whole life (the healthcheck's sign)
    hook.log                         one line per Stop that changed something, or failed
    worker.log                       one line per transition the daemon saw, and its own events
    scan-cache/                      what `dirty` and `plan` read of recent transcripts, so that
                                     the next call reads only appended bytes, and the config
                                     they last validated (`checked_config`) (0700; its files
                                     0600; safe to delete at any time)
    draining                         written by the installer while it waits to replace the
                                     daemon (one line: since when, and why); no new operation
                                     begins while it is there

A config is named by `--config PATH`, or else by the environment variable below. Scripts that
run inside the image get the variable's name from `kael-mounts` (an `env` line); the host's Stop
hook wrapper (`image/kael-hook`), which has no Python package to import, spells `hook.log`
itself, and a test holds that copy equal to this one.
"""

from __future__ import annotations

import argparse
import os
import stat
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CONFIG_ENV = "KAEL_REBUILD_CONFIG"
MAX_CONFIG_BYTES = 1 << 20  # a config is a few hundred bytes; a system prompt in it still fits
_KINDS = {stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device",
          stat.S_IFIFO: "a FIFO", stat.S_IFSOCK: "a socket"}
DEFAULT_STATE_DIR = "~/.local/state/kael-thread-rebuild"

OPERATIONS = "operations"
BACKUPS = "backups"
CANDIDATES = "candidates"
COORDINATOR_LOCK = "coordinator.lock"
DAEMON_LOCK = "daemon.lock"
HOOK_LOG = "hook.log"
WORKER_LOG = "worker.log"
SCAN_CACHE = "scan-cache"
DRAINING = "draining"
MAX_DRAIN_NOTE_BYTES = 512
#: The folders of a state dir (each 0700 like the state dir itself).
STORE_DIRS = (OPERATIONS, BACKUPS, CANDIDATES)

#: StateLayout's attributes and the names they join to the root.
_PATHS = {"operations": OPERATIONS, "backups": BACKUPS, "candidates": CANDIDATES,
          "coordinator_lock": COORDINATOR_LOCK, "daemon_lock": DAEMON_LOCK,
          "hook_log": HOOK_LOG, "worker_log": WORKER_LOG, "scan_cache": SCAN_CACHE}


def scan_cache_in(state_dir: Path) -> Path | None:
    """Where scans are cached: in STATE_DIR, when there is one already (a read-only command
    never makes it)."""
    return state_dir / SCAN_CACHE if state_dir.is_dir() else None


@dataclass(frozen=True)
class StateLayout:
    """The paths of one state dir (ROOT)."""

    root: Path
    operations: Path = field(init=False)
    backups: Path = field(init=False)
    candidates: Path = field(init=False)
    coordinator_lock: Path = field(init=False)
    daemon_lock: Path = field(init=False)
    hook_log: Path = field(init=False)
    worker_log: Path = field(init=False)
    scan_cache: Path = field(init=False)

    def __post_init__(self) -> None:
        for attribute, name in _PATHS.items():
            object.__setattr__(self, attribute, self.root / name)


def drain_note(state_dir: Path) -> str | None:
    """The installer's drain note in STATE_DIR (its first line), None when it is not draining.
    Only a regular file counts: a symlink or a FIFO there is nobody's drain."""
    path = state_dir / DRAINING
    try:
        if not stat.S_ISREG(path.lstat().st_mode):
            return None
        with path.open("rb") as file:
            text = file.read(MAX_DRAIN_NOTE_BYTES).decode("utf-8", "replace")
    except OSError:
        return None
    return (text.splitlines() or [""])[0].strip() or "no reason given"


def config_path(given: str | None) -> str | None:
    """The config file: GIVEN (`--config`), else `$KAEL_REBUILD_CONFIG`; None when neither."""
    return given or os.environ.get(CONFIG_ENV) or None


def config_path_in(argv: Sequence[str]) -> str | None:
    """`config_path` of a command line that has not been parsed yet (fast paths)."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--config")
    try:
        known, _ = parser.parse_known_args(argv)
    except SystemExit:
        return config_path(None)
    return config_path(known.config)


def read_config_file(path: str | os.PathLike[str]) -> bytes:
    """The bytes of the config file PATH: a regular file of at most MAX_CONFIG_BYTES (a device
    such as /dev/zero, a FIFO or a huge file would be read without end). Raises OSError as
    `open` does, or ValueError with one sentence."""
    # O_NONBLOCK: opening a FIFO must not wait for a writer; a regular file ignores it.
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise ValueError("is a directory, not a TOML file")
        if not stat.S_ISREG(mode):
            raise ValueError(f"is {_KINDS.get(stat.S_IFMT(mode), 'not a file')}, not a regular "
                             "file")
        data = bytearray()
        while len(data) <= MAX_CONFIG_BYTES and (chunk := os.read(fd, 1 << 16)):
            data += chunk
    finally:
        os.close(fd)
    if len(data) > MAX_CONFIG_BYTES:
        raise ValueError(f"is over {MAX_CONFIG_BYTES >> 20} MiB; a config file is at most that")
    return bytes(data)


def peek_config(path: str) -> dict[str, Any]:
    """The config file's TOML, unvalidated: for fast paths that must not wait for the model.
    Raises OSError or ValueError; the engine reports a bad config properly later."""
    return tomllib.loads(read_config_file(path).decode("utf-8"))


def peeked_state_dir(data: dict[str, Any]) -> Path:
    """The state dir a peeked config names (RuntimeError for `~user` of no one)."""
    return Path(str(data.get("state_dir", DEFAULT_STATE_DIR))).expanduser()
