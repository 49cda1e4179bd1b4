"""Files and config: the project dir and its transcripts, the workdir it encodes, the state dir
and the operations in it."""

from __future__ import annotations

import os
import stat
from datetime import datetime, timedelta
from pathlib import Path

from ..claude_code.project_dir import encode_project_dir
from ..config import Activation
from ..operations.model import WAITING, Operation, OperationStatus
from ..operations.store import DIR_MODE, OperationStore, UntrustedStateDir
from ..state_layout import STORE_DIRS, StateLayout
from .facts import Facts
from .model import Check, failed, passed, skipped
from .reading import ago, lock_held


def check_project_dir(facts: Facts) -> Check:
    name, project = "project_dir", facts.config.project_dir
    if not project.is_dir():
        return failed(name, f"{project} does not exist or is not a directory",
                      "set project_dir to Claude Code's folder <config dir>/projects/<encoded "
                      "workdir> that holds this instance's session transcripts")
    config_dir = facts.config.claude_config_dir
    if config_dir is not None and (Path(os.path.realpath(project)).parent
                                   != Path(os.path.realpath(config_dir / "projects"))):
        return failed(name, f"{project} is not directly in {config_dir / 'projects'}",
                      "claude_config_dir and project_dir must name the same Claude Code config "
                      "dir")
    found = facts.transcripts
    if not found:
        return failed(name, f"{project} holds no session transcript (*.jsonl)",
                      "point project_dir at the folder the running Claude Code writes to")
    return passed(name, f"{len(found)} transcript(s), newest {found[0].name}")


def check_claude_workdir(facts: Facts) -> Check:
    name, config = "claude_workdir", facts.config
    workdir = config.claude_workdir
    if workdir is None:
        if config.activation is Activation.tmux:
            return failed(name, "not set; tmux switching resumes Claude Code in that directory",
                          "set claude_workdir to the directory Claude Code runs in")
        return skipped(name, "not set (the runner's own directory decides)")
    if not workdir.is_dir():
        return failed(name, f"{workdir} does not exist or is not a directory",
                      "set claude_workdir to the directory Claude Code runs in")
    expected = encode_project_dir(os.path.realpath(workdir))
    if config.project_dir.name != expected:
        return failed(name, f"{workdir} is Claude Code's project folder {expected}, but "
                            f"project_dir is {config.project_dir.name}",
                      f"set project_dir to {config.project_dir.parent / expected}, or "
                      "claude_workdir to the directory Claude Code really runs in")
    return passed(name, f"{workdir} encodes to {expected}")


def check_state_dir(facts: Facts) -> Check:
    name, path = "state_dir", facts.config.state_dir
    if not path.exists():
        ancestor = next(p for p in path.parents if p.exists())
        if ancestor.is_dir() and os.access(ancestor, os.W_OK | os.X_OK):
            return passed(name, f"{path} does not exist yet; the first request creates it (0700)")
        return failed(name, f"{path} cannot be created: {ancestor} is not a writable directory",
                      f"create {path} with mode 0700 as the Claude Code user")
    if not path.is_dir():
        return failed(name, f"{path} is not a directory", "set state_dir to a directory")
    problems = _state_dir_problems(path)
    if problems:
        return failed(name, "; ".join(problems) + "; the engine refuses to use it",
                      "chmod 700 the directories and chown them to the Claude Code user")
    return passed(name, f"{path} writable, mode {DIR_MODE:04o}")


def _state_dir_problems(path: Path) -> list[str]:
    """Why the engine would not trust the existing state dir PATH or its folders."""
    problems = []
    if not os.access(path, os.W_OK | os.X_OK):
        problems.append(f"{path} is not writable by uid {os.getuid()}")
    for directory in (path, *(path / sub for sub in STORE_DIRS)):
        if directory.is_dir():
            problems += _private_dir_problems(directory)
    return problems


def _private_dir_problems(directory: Path) -> list[str]:
    problems = []
    mode = stat.S_IMODE(directory.stat().st_mode)
    if mode != DIR_MODE:
        problems.append(f"{directory} has mode {mode:04o}, not {DIR_MODE:04o}")
    if directory.stat().st_uid != os.geteuid():
        problems.append(f"{directory} belongs to uid {directory.stat().st_uid}, not "
                        f"to uid {os.geteuid()}")
    return problems


def open_store(state_dir: Path) -> OperationStore | None:
    """The operation store, opened only when every directory it would create exists (doctor
    creates nothing); None when there is none yet. Raises UntrustedStateDir."""
    layout = StateLayout(state_dir)
    if not all(d.is_dir() for d in (state_dir, layout.operations, layout.backups)):
        return None
    return OperationStore(state_dir)


def check_operations(facts: Facts) -> Check:
    """Reports only: settling an operation (recovery) can restart the session, so it belongs to
    the daemon's start and the `recover` command, never to doctor. With no daemon serving the
    state dir, an operation the daemon drives is stuck at once (nothing will move it)."""
    name = "operations"
    try:
        store = open_store(facts.config.state_dir)
    except UntrustedStateDir as exc:
        return failed(name, f"{exc}; no operation can run", "see the state_dir check")
    if store is None:
        return passed(name, "no operation store yet")
    scan = store.scan(unsettled_only=True)
    unsettled = scan.operations
    daemon_gone = not lock_held(facts.config.layout.daemon_lock)
    stuck = [op for op in unsettled if facts.now - op.updated_at > _may_wait(op, facts)
             or (daemon_gone and op.status not in WAITING)]
    problems = [_stuck_line(op, facts.now) for op in stuck]
    if stuck and daemon_gone:
        problems[0] += " and no daemon serves the state dir (see the daemon check)"
    problems += [f"{store.operations_dir / stray.name} is not an operation record "
                 f"({stray.problem}); every command skips it" for stray in scan.strays]
    if problems:
        fix = _stuck_fix(stuck[0]) if stuck else (
            f"move the file(s) out of {store.operations_dir}")
        return failed(name, "; ".join(problems), fix)
    current = f"; {unsettled[-1].operation_id} is {unsettled[-1].status.value}" \
        if unsettled else ""
    return passed(name, f"none stuck{current}")


def _may_wait(op: Operation, facts: Facts) -> timedelta:
    """How long OP may stay unchanged: a request awaiting the admin, until the daemon cancels
    it (`admin_confirm_minutes`) and a while after."""
    if op.status is OperationStatus.awaiting_confirmation:
        return timedelta(minutes=facts.config.admin_confirm_minutes) + facts.stuck_after
    return facts.stuck_after


def _stuck_line(op: Operation, now: datetime) -> str:
    return f"{op.operation_id} has been {op.status.value} for {ago(now - op.updated_at)}"


def _stuck_fix(op: Operation) -> str:
    if op.status is OperationStatus.awaiting_confirmation:
        return ("it awaits the admin's confirmation and the daemon, which cancels it once "
                "admin_confirm_minutes have passed, has not: start the daemon; or end it with "
                f"`kael-thread-rebuild cancel --operation {op.operation_id} --confirm CANCEL`")
    if op.status in WAITING:
        return ("no Stop hook has run since it was requested: check stop_hook; or end it with "
                f"`kael-thread-rebuild cancel --operation {op.operation_id} --confirm CANCEL`")
    return ("the daemon is not driving it: run `kael-thread-rebuild recover` (with no daemon "
            "running), or restart the daemon (`kael-thread-rebuild serve`): either takes every "
            "unfinished operation to an end")
