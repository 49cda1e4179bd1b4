"""The admin's confirmation of a rebuild (config `admin_confirm_minutes`): something only root can
have written, which the daemon looks for before a request goes on and the worker again before it
switches.

The engine runs as the Claude user, and so does everything the model's shell can reach: the state
dir, the operation records, the daemon's own files. A confirmation written there would be one the
model could write too. So the admin's `confirm` runs as root (`docker exec -u 0 <daemon> …`, which
the wrapper's sudo rule never allows) and writes a file that is root's in a directory that is
root's and writable by nobody else, in /tmp (the daemon container's own tmpfs; the only place
root can write there, since the container drops every capability and the state dir is the Claude
user's, mode 0700). The daemon and the worker trust a confirmation only with every one of those
owners and modes, so a file the Claude user planted (or a directory it made first) never counts.
A daemon container that restarts starts with an empty /tmp: a confirmation not yet acted on is
gone, and its operation is refused (request and confirm again).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ..config import Config
from ..errors import Refused
from ..fsutil import atomic_write_text
from .model import Operation, OperationStatus, require_operation_id

TMP = Path("/tmp")
#: What a confirmation confirms (the file's content names it with the operation id).
REBUILD = "rebuild"
_NOT_OTHERS = stat.S_IWGRP | stat.S_IWOTH


def confirmations_dir(config: Config) -> Path:
    return TMP / f"kael-thread-rebuild-{config.instance}.confirmed"


def confirm_command(config: Config, operation_id: str) -> str:
    """What the admin runs: in the appliance's daemon container (named as the installer and
    image/run-daemon.sh name it), as root."""
    return (f"docker exec -u 0 kael-thread-rebuild-{config.instance} kael-thread-rebuild "
            f"confirm --operation {operation_id}")


def _text(operation_id: str) -> str:
    return f"{operation_id} {REBUILD}\n"


def _root_only(path: Path, kind: int) -> str:
    """Why PATH is not root's own file or directory of KIND that nobody else may write."""
    try:
        info = path.lstat()
    except FileNotFoundError:
        return f"{path} does not exist"
    except OSError as exc:
        return f"{path} cannot be read: {exc.strerror}"
    if stat.S_IFMT(info.st_mode) != kind:
        return f"{path} is not a {'directory' if kind == stat.S_IFDIR else 'regular file'}"
    if info.st_uid != 0:
        return f"{path} belongs to uid {info.st_uid}, not root"
    if info.st_mode & _NOT_OTHERS:
        return f"{path} may be written by others than root"
    return ""


def confirmation_problem(config: Config, operation_id: str) -> str:
    """Why OPERATION_ID has no confirmation of the admin's, in one line; empty when it has."""
    folder = confirmations_dir(config)
    path = folder / require_operation_id(operation_id)
    problem = _root_only(folder, stat.S_IFDIR) or _root_only(path, stat.S_IFREG)
    if problem:
        return problem
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return f"{path} cannot be read: {exc}"
    return "" if text == _text(operation_id) else f"{path} does not confirm {operation_id}"


def write_confirmation(config: Config, operation_id: str) -> Path:
    """The admin's `confirm`: as root only (anything else could be the model)."""
    operation_id = require_operation_id(operation_id)
    if os.geteuid() != 0:
        raise Refused(f"confirm runs as root only (uid {os.geteuid()} could be the model's "
                      f"shell): {confirm_command(config, operation_id)}")
    folder = confirmations_dir(config)
    try:
        folder.mkdir(mode=0o755)
        folder.chmod(0o755)  # whatever the umask
    except FileExistsError:
        pass
    problem = _root_only(folder, stat.S_IFDIR)
    if problem:
        raise Refused(f"no confirmation written: {problem}; remove it (as root) and confirm "
                      "again")
    path = folder / operation_id
    atomic_write_text(path, _text(operation_id), 0o644)
    return path


def unconfirmed(config: Config, op: Operation) -> str:
    """Why the worker must not run OP: the gate is on and no confirmation of the admin's is
    there (a record the Claude user edited by hand, or a daemon restarted since the confirm).
    Empty when it may run."""
    if not config.admin_confirm_minutes or op.status is not OperationStatus.scheduled:
        return ""
    problem = confirmation_problem(config, op.operation_id)
    return "" if not problem else (f"not confirmed by the admin ({problem}); nothing was "
                                   f"switched: request again and confirm with "
                                   f"{confirm_command(config, '<new operation id>')}")
