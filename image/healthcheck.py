"""The daemon container's HEALTHCHECK: healthy while some process holds the daemon's lock.

`kael-thread-rebuild serve` holds an exclusive `flock` on the state dir's daemon lock
(`kael_thread_rebuild.state_layout`) for its whole life. This check reads `/proc/locks` and looks
for a lock on that file's inode; it never opens the lock file for writing nor takes the lock
itself, so it cannot disturb a daemon that is starting. The config comes from `--config PATH`
or the environment, as for the CLI.

Exit 0 healthy, 1 unhealthy (Docker's HEALTHCHECK contract); one line on stdout either way.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from kael_thread_rebuild.config import load_config
from kael_thread_rebuild.errors import KaelError


def lock_is_held(path: Path, locks_text: str) -> bool:
    """Whether /proc/locks (LOCKS_TEXT) lists a lock on PATH's inode."""
    info = path.stat()
    wanted = (os.major(info.st_dev), os.minor(info.st_dev), info.st_ino)
    for line in locks_text.splitlines():
        fields = line.split()
        # "1: FLOCK  ADVISORY  WRITE 1234 fd:01:5678 0 EOF"; blocked waiters start with "->".
        if len(fields) < 6 or fields[1] == "->":
            continue
        try:
            major, minor, inode = fields[5].split(":")
            found = (int(major, 16), int(minor, 16), int(inode))
        except ValueError:
            continue
        if found == wanted:
            return True
    return False


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kael-healthcheck", description=__doc__)
    parser.add_argument("--config", metavar="PATH", default=None)
    args = parser.parse_args(argv)
    try:
        config = load_config(args.config)
    except KaelError as exc:
        print(f"unhealthy: {exc}")
        return 1
    lock = config.layout.daemon_lock
    try:
        held = lock_is_held(lock, Path("/proc/locks").read_text())
    except FileNotFoundError:
        print(f"unhealthy: {lock} does not exist (the daemon has not started)")
        return 1
    except OSError as exc:
        print(f"unhealthy: cannot check {lock}: {exc.strerror}")
        return 1
    if not held:
        print(f"unhealthy: nobody holds {lock} (the daemon is not serving)")
        return 1
    print(f"healthy: the daemon holds {lock}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
