"""Doctor: read-only checks of everything a switch needs (spec: appliance, "Doctor").

Each check is a function of the shared `Facts` returning one `Check`. Nothing here writes: no
file, no directory, no lock (the operation store is opened only when every directory it would
create already exists).
"""

from __future__ import annotations

import os
import stat
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta
from functools import cached_property
from pathlib import Path, PurePath
from typing import Any

import orjson
from pydantic import BaseModel

from .config import Activation, Config
from .errors import KaelError
from .operations.model import WAITING, Operation, utcnow
from .operations.store import DIR_MODE, OperationStore
from .paths import encode_project_dir, transcripts
from .switching import registry
from .switching.base import Identity, SwitchBase
from .switching.factory import make_base

SERVER_NAME = "kael-thread-rebuild"
MCP_COMMAND = "kael-thread-rebuild-mcp"
HOOK_COMMAND = "hook-stop"
#: An unsettled operation that has not changed for this long is reported as stuck.
STUCK_AFTER = timedelta(minutes=10)


class Check(BaseModel):
    name: str
    ok: bool
    detail: str
    fix: str = ""
    skipped: bool = False  # not knowable from here; `ok` stays true


class DoctorReport(BaseModel):
    ok: bool
    checks: list[Check]


def _ok(name: str, detail: str) -> Check:
    return Check(name=name, ok=True, detail=detail)


def _fail(name: str, detail: str, fix: str) -> Check:
    return Check(name=name, ok=False, detail=detail, fix=fix)


def _skip(name: str, detail: str) -> Check:
    return Check(name=name, ok=True, detail=detail, skipped=True)


# -- Claude Code's command line ------------------------------------------------------------------

# Claude Code 2.1.328 (`claude --help`): options that take no value, so a word after them is the
# prompt, not their value. Options not listed (including hidden ones such as `--channels`) take
# the words up to the next option.
_NO_VALUE = frozenset({
    "--allow-dangerously-skip-permissions", "--ax-screen-reader", "--background", "--bare",
    "--brief", "--chrome", "--continue", "--dangerously-skip-permissions", "--desktop",
    "--disable-slash-commands", "--exclude-dynamic-system-prompt-sections", "--fork-session",
    "--forward-subagent-text", "--help", "--ide", "--include-hook-events",
    "--include-partial-messages", "--no-chrome", "--no-session-persistence", "--print",
    "--replay-user-messages", "--restricted", "--safe-mode", "--strict-mcp-config", "--tmux",
    "--verbose", "--version",
})
_ALIASES = {
    "-c": "--continue", "-r": "--resume", "-p": "--print", "-d": "--debug", "-n": "--name",
    "-w": "--worktree", "-h": "--help", "-v": "--version", "--bg": "--background",
    "--allowedTools": "--allowed-tools", "--disallowedTools": "--disallowed-tools",
}
#: Flags that pick the session: the resume command replaces them with its own.
SESSION_FLAGS = frozenset({"--continue", "--resume", "--session-id", "--fork-session"})

FlagGroup = tuple[str, ...]


def is_claude_program(word: str) -> bool:
    name = PurePath(word).name
    return name in ("claude", "claude.exe") or (
        name in ("cli.js", "cli.mjs") and "claude-code" in word)


def claude_arguments(argv: Sequence[str]) -> list[str] | None:
    """The words after the Claude Code program in ARGV (which may start with an interpreter,
    `env` or a wrapper); None when no word names Claude Code."""
    for index, word in enumerate(argv):
        if is_claude_program(word):
            return list(argv[index + 1:])
    return None


def flag_groups(words: Iterable[str]) -> list[FlagGroup]:
    """Each option with its values, spelled canonically; session flags and the prompt (words
    that belong to no option, and everything after `--`) are left out."""
    groups: list[list[str]] = []
    current: list[str] | None = None
    for word in words:
        if word == "--":
            break
        if word.startswith("-") and len(word) > 1:
            name, equals, value = word.partition("=")
            name = _ALIASES.get(name, name)
            current = [name, value] if equals else [name]
            groups.append(current)
            if equals or name in _NO_VALUE:
                current = None
        elif current is not None:
            current.append(word)
    return [tuple(group) for group in groups if group[0] not in SESSION_FLAGS]


def missing_flags(live_argv: Sequence[str], resume_command: Sequence[str]) -> list[FlagGroup]:
    """Options of the live command line that the resume command does not carry (as a multiset:
    an option given twice must be kept twice)."""
    live = flag_groups(claude_arguments(live_argv) or [])
    resume_words = claude_arguments(resume_command)
    kept = Counter(flag_groups(resume_command[1:] if resume_words is None else resume_words))
    missing = []
    for group in live:
        if kept[group] > 0:
            kept[group] -= 1
        else:
            missing.append(group)
    return missing


def read_cmdline(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    words = raw.split(b"\0")
    if words and words[-1] == b"":
        words.pop()
    return [word.decode("utf-8", "surrogateescape") for word in words] or None


# Identity token fields naming the process a target runs (tmux pane, systemd main process).
_PROCESS_TOKENS = ("pane_pid", "main_pid")


# -- shared facts --------------------------------------------------------------------------------


class Facts:
    """What several checks need, computed once and only when asked for."""

    def __init__(self, config: Config, now: datetime, stuck_after: timedelta) -> None:
        self.config = config
        self.now = now
        self.stuck_after = stuck_after

    @cached_property
    def base(self) -> SwitchBase | str:
        try:
            return make_base(self.config)
        except KaelError as exc:
            return str(exc)

    @cached_property
    def identity(self) -> Identity | str:
        base = self.base
        if isinstance(base, str):
            return base
        try:
            return base.identity()
        except KaelError as exc:
            return str(exc)

    @cached_property
    def transcripts(self) -> list[Path]:
        project = self.config.project_dir
        return transcripts(project) if project.is_dir() else []

    @cached_property
    def claude_config_dir(self) -> Path:
        return self.config.claude_config_dir or Path.home() / ".claude"

    @cached_property
    def claude_process(self) -> tuple[int, list[str]] | str:
        """The live Claude Code process the target runs: (pid, argv), or why it is not known."""
        identity = self.identity
        if isinstance(identity, str):
            return f"the target is unreadable: {identity}"
        root = next((identity.token[key] for key in _PROCESS_TOKENS if key in identity.token),
                    None)
        if root is None:
            return f"the {identity.base} base runs no live process to compare with"
        candidates: list[int] = []
        if self.config.claude_config_dir is not None:
            entry = registry.entry_for_tree(self.config.claude_config_dir, int(root))
            if entry is not None:
                candidates.append(entry.pid)
        candidates += registry.process_tree(int(root))
        for pid in candidates:
            argv = read_cmdline(pid)
            if argv is not None and claude_arguments(argv) is not None:
                return pid, argv
        return (f"no Claude Code process is visible at or under pid {root} of the "
                f"{identity.base} target; from another pid namespace (a container) the live "
                "command line cannot be read")


def _read_json(path: Path) -> tuple[Any, str]:
    """(data, "") or (None, the problem); a missing file is (None, "")."""
    try:
        return orjson.loads(path.read_bytes()), ""
    except FileNotFoundError:
        return None, ""
    except OSError as exc:
        return None, f"{path} cannot be read: {exc.strerror or exc}"
    except orjson.JSONDecodeError:
        return None, f"{path} is not valid JSON"


def _dict(value: Any, key: str) -> dict[str, Any]:
    found = value.get(key) if isinstance(value, dict) else None
    return found if isinstance(found, dict) else {}


def _list(value: Any, key: str) -> list[Any]:
    found = value.get(key) if isinstance(value, dict) else None
    return found if isinstance(found, list) else []


def _ago(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    return f"{seconds // 3600} h"


# -- the checks ----------------------------------------------------------------------------------


def check_project_dir(facts: Facts) -> Check:
    name, project = "project_dir", facts.config.project_dir
    if not project.is_dir():
        return _fail(name, f"{project} does not exist or is not a directory",
                     "set project_dir to Claude Code's folder <config dir>/projects/<encoded "
                     "workdir> that holds this instance's session transcripts")
    config_dir = facts.config.claude_config_dir
    if config_dir is not None and (Path(os.path.realpath(project)).parent
                                   != Path(os.path.realpath(config_dir / "projects"))):
        return _fail(name, f"{project} is not directly in {config_dir / 'projects'}",
                     "claude_config_dir and project_dir must name the same Claude Code config "
                     "dir")
    found = facts.transcripts
    if not found:
        return _fail(name, f"{project} holds no session transcript (*.jsonl)",
                     "point project_dir at the folder the running Claude Code writes to")
    return _ok(name, f"{len(found)} transcript(s), newest {found[0].name}")


def check_claude_workdir(facts: Facts) -> Check:
    name, config = "claude_workdir", facts.config
    workdir = config.claude_workdir
    if workdir is None:
        if config.activation is Activation.tmux:
            return _fail(name, "not set; tmux switching resumes Claude Code in that directory",
                         "set claude_workdir to the directory Claude Code runs in")
        return _skip(name, "not set (the runner's own directory decides)")
    if not workdir.is_dir():
        return _fail(name, f"{workdir} does not exist or is not a directory",
                     "set claude_workdir to the directory Claude Code runs in")
    expected = encode_project_dir(os.path.realpath(workdir))
    if config.project_dir.name != expected:
        return _fail(name, f"{workdir} is Claude Code's project folder {expected}, but "
                           f"project_dir is {config.project_dir.name}",
                     f"set project_dir to {config.project_dir.parent / expected}, or "
                     "claude_workdir to the directory Claude Code really runs in")
    return _ok(name, f"{workdir} encodes to {expected}")


def check_state_dir(facts: Facts) -> Check:
    name, path = "state_dir", facts.config.state_dir
    if not path.exists():
        ancestor = next(p for p in path.parents if p.exists())
        if ancestor.is_dir() and os.access(ancestor, os.W_OK | os.X_OK):
            return _ok(name, f"{path} does not exist yet; the first request creates it (0700)")
        return _fail(name, f"{path} cannot be created: {ancestor} is not a writable directory",
                     f"create {path} with mode 0700 as the Claude Code user")
    if not path.is_dir():
        return _fail(name, f"{path} is not a directory", "set state_dir to a directory")
    problems = []
    if not os.access(path, os.W_OK | os.X_OK):
        problems.append(f"{path} is not writable by uid {os.getuid()}")
    for directory in (path, path / "operations", path / "backups"):
        if directory.is_dir():
            mode = stat.S_IMODE(directory.stat().st_mode)
            if mode != DIR_MODE:
                problems.append(f"{directory} has mode {mode:04o}, not {DIR_MODE:04o}")
    if problems:
        return _fail(name, "; ".join(problems),
                     "chmod 700 the directories and chown them to the Claude Code user")
    return _ok(name, f"{path} writable, mode {DIR_MODE:04o}")


def check_target(facts: Facts) -> Check:
    name, base, identity = "target", facts.base, facts.identity
    if isinstance(base, str):
        return _fail(name, base, "choose activation 'tmux' or 'pointer'")
    if isinstance(identity, str):
        return _fail(name, identity, _target_fix(facts.config))
    shown = " ".join(f"{key}={value}" for key, value in sorted(identity.token.items()))
    if identity.running_session_id:
        shown += f" session={identity.running_session_id}"
    if not base.alive():
        return _fail(name, f"{base.name} {shown}: not running a session",
                     _target_fix(facts.config))
    return _ok(name, f"{base.name} {shown}")


def _target_fix(config: Config) -> str:
    if config.activation is Activation.pointer:
        return f"write the running session id to {config.resume_pointer_path}"
    socket = f" on tmux socket {config.tmux_socket}" if config.tmux_socket else ""
    return (f"run Claude Code in tmux pane {config.tmux_target}{socket}, or fix tmux_target "
            "and tmux_socket")


def check_session(facts: Facts) -> Check:
    name, identity = "session", facts.identity
    if isinstance(identity, str):
        return _skip(name, "not checked: the target is unreadable")
    running = identity.running_session_id
    if running is None:
        if identity.base != "tmux":
            why = "the target names no session"
        elif facts.config.claude_config_dir is None:
            why = "set claude_config_dir to read Claude Code's session registry"
        else:
            why = f"no live entry in {registry.registry_dir(facts.config.claude_config_dir)}"
        return _skip(name, f"not checked: which session the target runs is unknown ({why})")
    if not facts.transcripts:
        return _skip(name, f"not checked: the target runs {running}; project_dir holds no "
                           "transcript")
    newest = facts.transcripts[0].stem
    if running == newest:
        return _ok(name, f"the target runs {running}, the newest transcript")
    if not (facts.config.project_dir / f"{running}.jsonl").exists():
        return _fail(name, f"the target runs {running}, which has no transcript in project_dir",
                     "project_dir is not where this Claude Code writes (or it was just "
                     "started and has not written yet: talk to it once)")
    return _fail(name, f"the target runs {running}, but the newest transcript is {newest}",
                 "another session is active in project_dir; a switch would be refused until "
                 "only the target's session is written to")


def check_resume_command(facts: Facts) -> Check:
    name, config = "resume_command", facts.config
    process = facts.claude_process
    if isinstance(process, str):
        return _skip(name, f"not checked: {process}")
    pid, argv = process
    missing = missing_flags(argv, config.resume_command)
    if missing:
        shown = ", ".join(" ".join(group) for group in missing)
        suggested = [*config.resume_command, *(word for group in missing for word in group)]
        return _fail(name, f"lacks flags of the live Claude Code (pid {pid}): {shown}; the "
                           "resumed process would run without them (a channel flag lost makes "
                           "it deaf)",
                     f"resume_command = {orjson.dumps(suggested).decode()}")
    kept = flag_groups(claude_arguments(argv) or [])
    return _ok(name, f"keeps every flag of the live Claude Code (pid {pid})"
                     + (f": {', '.join(group[0] for group in kept)}" if kept else ""))


def _settings_files(facts: Facts) -> list[Path]:
    files = [facts.claude_config_dir / "settings.json"]
    workdir = facts.config.claude_workdir
    if workdir is not None:
        files += [workdir / ".claude" / name for name in ("settings.json", "settings.local.json")]
    return files


def check_stop_hook(facts: Facts) -> Check:
    name = "stop_hook"
    problems = []
    for path in _settings_files(facts):
        data, problem = _read_json(path)
        if problem:
            problems.append(problem)
        for group in _list(_dict(data, "hooks"), "Stop"):
            for hook in _list(group, "hooks"):
                command = hook.get("command") if isinstance(hook, dict) else None
                if isinstance(command, str) and HOOK_COMMAND in command:
                    return _ok(name, f"in {path}")
    where = facts.claude_config_dir / "settings.json"
    detail = f"no Stop hook running `{HOOK_COMMAND}` in {where}"
    if problems:
        detail += f" ({'; '.join(problems)})"
    return _fail(name, detail,
                 f"add {{\"type\": \"command\", \"command\": \"kael-thread-rebuild --config "
                 f"<config> {HOOK_COMMAND}\", \"timeout\": 10}} to hooks.Stop[].hooks in {where} "
                 "(Claude Code has been seen dropping `hooks` when it rewrites the file)")


def _global_state_files(facts: Facts) -> list[Path]:
    # With CLAUDE_CONFIG_DIR set Claude Code keeps its global state in that dir; unset, the
    # config dir is ~/.claude and the state is ~/.claude.json.
    default = Path.home() / ".claude"
    files = [facts.claude_config_dir / ".claude.json"]
    if os.path.realpath(facts.claude_config_dir) == os.path.realpath(default):
        files.append(Path.home() / ".claude.json")
    return files


def _names_our_server(name: str, entry: Any) -> bool:
    if name == SERVER_NAME:
        return True
    if not isinstance(entry, dict):
        return False
    words = [entry.get("command"), *_list(entry, "args")]
    return any(isinstance(word, str) and MCP_COMMAND in word for word in words)


def check_mcp_server(facts: Facts) -> Check:
    name = "mcp_server"
    workdir = facts.config.claude_workdir
    project_keys = {str(workdir), os.path.realpath(workdir)} if workdir else set()
    sources: list[tuple[str, Path, dict[str, Any]]] = []
    problems = []
    for path in _global_state_files(facts):
        data, problem = _read_json(path)
        if problem:
            problems.append(problem)
        sources.append(("user scope", path, _dict(data, "mcpServers")))
        for key in project_keys:
            local = _dict(_dict(_dict(data, "projects"), key), "mcpServers")
            sources.append(("local scope", path, local))
    if workdir is not None:
        data, problem = _read_json(workdir / ".mcp.json")
        if problem:
            problems.append(problem)
        sources.append(("project scope", workdir / ".mcp.json", _dict(data, "mcpServers")))
    for scope, path, servers in sources:
        for server, entry in servers.items():
            if _names_our_server(server, entry):
                return _ok(name, f"{server!r} ({scope}, {path})")
    detail = f"no MCP server {SERVER_NAME!r} in {_global_state_files(facts)[0]}"
    if problems:
        detail += f" ({'; '.join(problems)})"
    return _fail(name, detail,
                 f"claude mcp add --scope user {SERVER_NAME} -- {MCP_COMMAND} --config <config> "
                 f"(with CLAUDE_CONFIG_DIR={facts.claude_config_dir} when that is not ~/.claude)")


def check_operations(facts: Facts) -> Check:
    name, state = "operations", facts.config.state_dir
    if not all(d.is_dir() for d in (state, state / "operations", state / "backups")):
        return _ok(name, "no operation store yet")
    store = OperationStore(state)  # creates nothing: every directory it makes exists
    try:
        unsettled = store.unsettled()
    except KaelError as exc:
        return _fail(name, str(exc), "move the unreadable record out of the operations dir")
    stuck = [op for op in unsettled if facts.now - op.updated_at > facts.stuck_after]
    if not stuck:
        current = f"; {unsettled[-1].operation_id} is {unsettled[-1].status.value}" \
            if unsettled else ""
        return _ok(name, f"none stuck{current}")
    recovered = _recover_without_daemon(facts, store)
    if recovered:
        return _ok(name, "no daemon was running; recovered " + "; ".join(
            f"{op.operation_id} -> {op.status.value}" + (f" ({op.error})" if op.error else "")
            for op in recovered))
    return _fail(name, "; ".join(_stuck_line(op, facts.now) for op in stuck), _stuck_fix(stuck[0]))


def _recover_without_daemon(facts: Facts, store: OperationStore) -> list[Operation]:
    """With no daemon running, do what a daemon start does: settle every unfinished operation,
    recording the truth. The only write doctor ever makes, and only when nothing else can."""
    from .daemon import DaemonBusy, worker_lock
    from .operations.worker import recover

    try:
        lock = worker_lock(facts.config)
    except DaemonBusy:
        return []  # the daemon is alive: it is the one to drive them
    try:
        return recover(facts.config, store, make_base(facts.config))
    except KaelError:
        return []
    finally:
        lock.release()


def _stuck_line(op: Operation, now: datetime) -> str:
    return f"{op.operation_id} has been {op.status.value} for {_ago(now - op.updated_at)}"


def _stuck_fix(op: Operation) -> str:
    if op.status in WAITING:
        return ("no Stop hook has run since it was requested: check stop_hook; or end it with "
                f"`kael-thread-rebuild cancel --operation {op.operation_id} --confirm CANCEL`")
    return ("the daemon is not driving it: start or restart it (`kael-thread-rebuild serve`); "
            "on start it takes every unfinished operation to an end")


CheckFn = Callable[[Facts], Check]

#: The checks, in the order they are shown. Appliance checks (image and daemon versions,
#: orphaned MCP containers) join this tuple as further read-only `Facts -> Check` functions.
CHECKS: tuple[CheckFn, ...] = (
    check_project_dir,
    check_claude_workdir,
    check_state_dir,
    check_target,
    check_session,
    check_resume_command,
    check_stop_hook,
    check_mcp_server,
    check_operations,
)


def run_doctor(config: Config, *, checks: Sequence[CheckFn] = CHECKS,
               now: datetime | None = None,
               stuck_after: timedelta = STUCK_AFTER) -> DoctorReport:
    facts = Facts(config, now or utcnow(), stuck_after)
    results = []
    for check in checks:
        try:
            results.append(check(facts))
        except (KaelError, OSError, ValueError) as exc:
            name = check.__name__.removeprefix("check_")
            results.append(_fail(name, f"the check itself failed: {type(exc).__name__}: {exc}",
                                 "report this; the other checks still ran"))
    return DoctorReport(ok=all(c.ok for c in results), checks=results)
