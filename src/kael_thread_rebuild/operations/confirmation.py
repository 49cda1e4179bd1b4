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

from ..config import Activation, Config
from ..errors import Refused
from ..fsutil import atomic_write_text
from .model import Operation, OperationStatus, require_operation_id

TMP = Path("/tmp")
#: What a confirmation confirms (the file's content names it with the operation id): a rebuild,
#: or the rollback of one (a file of its own: the rebuild's confirmation must not confirm it).
REBUILD = "rebuild"
ROLLBACK = "rollback"
_NOT_OTHERS = stat.S_IWGRP | stat.S_IWOTH


def confirmations_dir(config: Config) -> Path:
    return TMP / f"kael-thread-rebuild-{config.instance}.confirmed"


def kind_of(op: Operation) -> str:
    """What OP awaits (or ran after) the admin's confirmation for: a rebuild, or the rollback of
    one that switched."""
    return ROLLBACK if op.switched else REBUILD


def confirm_command(config: Config, operation_id: str, kind: str = REBUILD) -> str:
    """What the admin runs: in the appliance's daemon container (named as the installer and
    image/run-daemon.sh name it), as root."""
    return (f"docker exec -u 0 kael-thread-rebuild-{config.instance} kael-thread-rebuild "
            f"confirm --operation {operation_id}" + (" --rollback" if kind == ROLLBACK else ""))


def _name(operation_id: str, kind: str) -> str:
    return operation_id if kind == REBUILD else f"{operation_id}.{kind}"


def _text(operation_id: str, kind: str) -> str:
    return f"{operation_id} {kind}\n"


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


def confirmation_problem(config: Config, operation_id: str, kind: str = REBUILD) -> str:
    """Why OPERATION_ID has no confirmation of the admin's for KIND, in one line; empty when it
    has."""
    folder = confirmations_dir(config)
    path = folder / _name(require_operation_id(operation_id), kind)
    problem = _root_only(folder, stat.S_IFDIR) or _root_only(path, stat.S_IFREG)
    if problem:
        return problem
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return f"{path} cannot be read: {exc}"
    return "" if text == _text(operation_id, kind) else f"{path} does not confirm {operation_id}"


def write_confirmation(config: Config, operation_id: str, kind: str = REBUILD) -> Path:
    """The admin's `confirm`: as root only (anything else could be the model)."""
    operation_id = require_operation_id(operation_id)
    if os.geteuid() != 0:
        raise Refused(f"confirm runs as root only (uid {os.geteuid()} could be the model's "
                      f"shell): {confirm_command(config, operation_id, kind)}")
    folder = confirmations_dir(config)
    try:
        folder.mkdir(mode=0o755)
        folder.chmod(0o755)  # whatever the umask
    except FileExistsError:
        pass
    problem = _root_only(folder, stat.S_IFDIR)
    if problem:
        raise Refused(f"no confirmation written: {problem} (the Claude user made it?); "
                      "restart the daemon container, which empties its /tmp, and confirm again")
    path = folder / _name(operation_id, kind)
    atomic_write_text(path, _text(operation_id, kind), 0o644)
    return path


def unconfirmed(config: Config, op: Operation) -> str:
    """Why the worker must not run OP: the gate is on and no confirmation of the admin's is
    there (a record the Claude user edited by hand, or a daemon restarted since the confirm).
    Empty when it may run. The pointer runner's `start-failed` needs none: the Claude user
    may report a failed start (docs/security.md), and it owns that base's pointer anyway."""
    if not config.admin_confirm_minutes or op.is_reload:  # a reload changes no conversation
        return ""
    if op.status is OperationStatus.scheduled:
        problem = confirmation_problem(config, op.operation_id)
        return "" if not problem else (f"not confirmed by the admin ({problem}); nothing was "
                                       f"switched: request again and confirm with "
                                       f"{confirm_command(config, '<new operation id>')}")
    if op.status is not OperationStatus.rollback_scheduled or (
            config.activation is Activation.pointer and op.error):
        return ""
    problem = confirmation_problem(config, op.operation_id, ROLLBACK)
    return "" if not problem else (f"rollback not performed: not confirmed by the admin "
                                   f"({problem}); the rebuilt session still runs")
