"""A config the engine validated, remembered so that `plan` and `dirty` start without the
validator.

Importing pydantic and building the config's model cost about 0.2 s, most of what `dirty` takes
on a short transcript. When the command line has validated a config for `plan` or `dirty`, it
keeps what reading takes from it (`ReadingSettings`) in the state dir's scan cache
(`scan-cache/config.json`, 0600, written atomically) under a key: the SHA-256 of the config
file's bytes, of the code that validates them, of the engine's version, the user and `$HOME`
(what `~` in a path means). A later `plan` or `dirty` whose config gives the same key takes the
settings from there; any other validates the config as before, and renews the record.

A record is never an error: one that is torn, foreign, not the user's private file or of another
key is no record, and deleting it is always safe. A read-only command never makes the state dir
(as with scan-cache entries). What a record cannot see is a directory key the reading commands do
not use (`claude_workdir`, `claude_config_dir`) that has become a file since it was validated;
`project_dir` and the state dir are looked at by every read.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
from pathlib import Path
from typing import Any

import orjson

from . import __version__
from .errors import KaelError
from .fsutil import atomic_write_json, is_private_file
from .reading_settings import ReadingSettings
from .state_layout import scan_cache_in

RECORD = "config.json"
FORMAT = "kael-checked-config 1"
MAX_RECORD_BYTES = 4 << 20  # the speech patterns alone may take 2 MiB
# The code that decides what a config file means (beside this package's __init__).
_VALIDATORS = ("config.py", "reading_settings.py", "paths.py", "defaults.py", "state_layout.py",
               "checked_config.py")


@functools.cache
def _validators_digest() -> bytes:
    """SHA-256 of the code that validates a config (read once a process, as the scan cache's
    `_engine_digest`)."""
    here = Path(__file__).parent
    digest = hashlib.sha256()
    for name in _VALIDATORS:
        digest.update(hashlib.sha256((here / name).read_bytes()).digest())
    return digest.digest()


def record_key(raw: bytes) -> str:
    """The key of a config file whose bytes are RAW, for this engine, user and $HOME."""
    digest = hashlib.sha256(FORMAT.encode())
    for word in (__version__, str(os.geteuid()), os.environ.get("HOME", "")):
        digest.update(os.fsencode(word) + b"\0")
    digest.update(_validators_digest())
    digest.update(raw)
    return digest.hexdigest()


def remember(settings: ReadingSettings, raw: bytes) -> None:
    """Keep SETTINGS, validated from the config bytes RAW, for the next `recall` (nothing when
    there is no state dir yet; a record that cannot be written is no error)."""
    record = {"format": FORMAT, "key": record_key(raw), "settings": settings.as_values()}
    with contextlib.suppress(OSError, KaelError):
        cache_dir = scan_cache_in(settings.state_dir)
        if cache_dir is not None and _read(cache_dir / RECORD) != record:
            cache_dir.mkdir(mode=0o700, exist_ok=True)
            atomic_write_json(cache_dir / RECORD, record)


def recall(raw: bytes, state_dir: Path) -> ReadingSettings | None:
    """The settings kept for the config bytes RAW in STATE_DIR (the state dir the file names),
    None when there is no such record."""
    try:
        cache_dir = scan_cache_in(state_dir)
    except OSError:  # a name too long, a loop: the validator says what is wrong
        return None
    if cache_dir is None:
        return None
    record = _read(cache_dir / RECORD)
    if (not isinstance(record, dict) or record.get("format") != FORMAT
            or record.get("key") != record_key(raw)):
        return None
    try:
        settings = ReadingSettings.of(record["settings"])
    except (KeyError, TypeError, ValueError):
        return None
    return settings if settings.state_dir == state_dir else None


def _read(path: Path) -> Any:
    """The JSON in PATH when it is the user's private regular file; None otherwise."""
    try:
        handle = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(handle, "rb") as opened:
        try:
            if not is_private_file(os.fstat(handle)):
                return None
            data = opened.read(MAX_RECORD_BYTES + 1)
        except OSError:
            return None
    if len(data) > MAX_RECORD_BYTES:
        return None
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
