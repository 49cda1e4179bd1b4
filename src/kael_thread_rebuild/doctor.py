"""Doctor: read-only checks of everything a switch needs (spec: appliance, "Doctor").

Each check is a function of the shared `Facts` returning one `Check`. Nothing here writes: no
file, no directory, no lock (the operation store is opened only when every directory it would
create already exists).

Three checks need the host (orphaned MCP containers, image and daemon versions from the Docker
engine, which no appliance container can reach; the Claude user's access to Docker and to the
wrapper): the host gathers those facts (`image/run-doctor.sh`, the installer's doctor role) and
hands them in as JSON in `$KAEL_HOST_FACTS`; without it the three are skipped. Paths a
long-running container deliberately does not mount are named in `$KAEL_UNMOUNTED`, so that their
absence is not mistaken for a missing file.
"""

from __future__ import annotations

import os
import re
import shlex
import stat
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from functools import cached_property
from pathlib import Path
from typing import Any

import orjson
from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError, field_validator

from . import __version__
from .claude_code import live as claude_live
from .claude_code import registry
from .claude_code.command_line import (
    NoClaude,
    StartCommandError,
    claude_arguments,
    flag_groups,
    missing_flags,
    prompt_words,
)
from .claude_code.project_dir import encode_project_dir
from .claude_code.settings import HOOK_STOP as HOOK_COMMAND
from .claude_code.settings import (
    HOOK_WRAPPER,
    OTHER,
    Instance,
    hook_instance,
    stop_hook_commands,
)
from .claude_code.start_command import resume_from_argv
from .config import Activation, Config
from .errors import KaelError
from .operations.model import WAITING, Operation, utcnow
from .operations.store import DIR_MODE, OperationStore, UntrustedStateDir
from .paths import transcripts
from .state_layout import (
    CONFIG_ENV,
    STORE_DIRS,
    StateLayout,
    peek_config,
    peeked_state_dir,
)
from .switching.base import Identity, SwitchBase
from .switching.factory import make_base

SERVER_NAME = "kael-thread-rebuild"
MCP_COMMAND = "kael-thread-rebuild-mcp"
#: How the wrapper's lines in hook.log start; the one that follows failures once it gets through.
HOOK_WRAPPER_LINE = "hook-wrapper:"
HOOK_WRAPPER_RECOVERED = "hook-wrapper: reached "
#: An unsettled operation that has not changed for this long is reported as stuck.
STUCK_AFTER = timedelta(minutes=10)
#: JSON facts only the host can gather (Docker); see `HostFacts`.
HOST_FACTS_ENV = "KAEL_HOST_FACTS"
#: Host paths doctor reads that this container does not mount (os.pathsep-separated).
UNMOUNTED_ENV = "KAEL_UNMOUNTED"
LABEL_PREFIX = "io.kael-thread-rebuild"
VERSION_LABEL = "org.opencontainers.image.version"
REVISION_LABEL = "org.opencontainers.image.revision"
#: How much of the end of hook.log doctor reads.
HOOK_LOG_TAIL_BYTES = 64 * 1024


class Check(BaseModel):
    name: str
    ok: bool
    detail: str
    fix: str = ""
    skipped: bool = False  # not knowable from here; `ok` stays true
    warning: bool = False  # worth acting on, but no reason to refuse a switch; `ok` stays true


class DoctorReport(BaseModel):
    ok: bool
    checks: list[Check]


def _ok(name: str, detail: str) -> Check:
    return Check(name=name, ok=True, detail=detail)


def _fail(name: str, detail: str, fix: str) -> Check:
    return Check(name=name, ok=False, detail=detail, fix=fix)


def _skip(name: str, detail: str) -> Check:
    return Check(name=name, ok=True, detail=detail, skipped=True)


def _warn(name: str, detail: str, fix: str) -> Check:
    return Check(name=name, ok=True, detail=detail, fix=fix, warning=True)


# -- the live process ------------------------------------------------------------------------


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


class HostContainer(BaseModel):
    """A container as the host's Docker engine lists it: in our spelling, or as the Engine API
    lists it (`Id`, `Names`, `State`, `Status`, which the installer passes on as it got them)."""

    model_config = ConfigDict(extra="ignore")

    id: str = Field("", validation_alias=AliasChoices("id", "Id", "ID"))
    name: str = Field("", validation_alias=AliasChoices("name", "Names", "Name"))
    state: str = Field("", validation_alias=AliasChoices("state", "State"))
    status: str = Field("", validation_alias=AliasChoices("status", "Status"))

    @field_validator("name", mode="before")
    @classmethod
    def _plain_name(cls, value: Any) -> Any:
        if isinstance(value, list):  # the API's Names: ["/NAME"]
            value = value[0] if value else ""
        return value.lstrip("/") if isinstance(value, str) else value  # inspect's /NAME


class HostImage(BaseModel):
    model_config = ConfigDict(extra="ignore")

    ref: str = ""  # what was asked for, e.g. kael-thread-rebuild:latest
    id: str = ""
    labels: dict[str, str] | None = None  # Docker gives null for none


class HostDaemon(HostContainer):
    image_id: str = ""
    image_labels: dict[str, str] | None = None
    engine: str = ""  # `kael-thread-rebuild --version` in the container, when it runs


class ClaudeAccess(BaseModel):
    """How the Claude user reaches the appliance, tried on the host as that user: its groups,
    whether it can use the Docker socket, and which of the wrapper's lines of this instance
    (`mcp NAME`, `hook NAME`) sudo allows it (`sudo -l -U`, which runs nothing)."""

    model_config = ConfigDict(extra="ignore")

    user: str = ""
    uid: int | None = None
    groups: list[str] = []
    socket: str = ""
    socket_reachable: bool | None = None  # None: it could not be tried
    socket_detail: str = ""
    wrapper: str = ""
    allowed: list[str] = []


class HostFacts(BaseModel):
    """What only the host can see (the Docker engine, the Claude user's access), gathered by
    image/run-doctor.sh or the installer's doctor role and passed in as JSON in
    $KAEL_HOST_FACTS."""

    model_config = ConfigDict(extra="ignore")

    collected_by: str = ""
    installed_image: HostImage | None = None  # None: not on the host
    daemons: list[HostDaemon] = []  # containers labelled role=daemon for this instance
    mcp_containers: list[HostContainer] = []  # containers labelled role=mcp for this instance
    claude_access: ClaudeAccess | None = None  # None: not gathered


class Facts:
    """What several checks need, computed once and only when asked for."""

    def __init__(self, config: Config, now: datetime, stuck_after: timedelta,
                 environ: Mapping[str, str]) -> None:
        self.config = config
        self.now = now
        self.stuck_after = stuck_after
        self.environ = environ

    @cached_property
    def config_path(self) -> Path | None:
        """The config file, when the environment names it (as every appliance container's does)."""
        named = self.environ.get(CONFIG_ENV)
        return Path(named) if named else None

    @cached_property
    def unmounted(self) -> frozenset[str]:
        named = self.environ.get(UNMOUNTED_ENV, "")
        return frozenset(part for part in named.split(os.pathsep) if part)

    @cached_property
    def host(self) -> HostFacts | str | None:
        """The host's facts; None when none were given, a string when they do not parse."""
        raw = self.environ.get(HOST_FACTS_ENV)
        if not raw:
            return None
        try:
            return HostFacts.model_validate_json(raw)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or "(the document)"
            return f"${HOST_FACTS_ENV} does not hold the host's facts: {where}: {first['msg']}"

    @cached_property
    def live_claude_pids(self) -> list[int]:
        """Claude Code processes alive now that registered in this config dir's session registry
        (pid and start time agree; the caller must see the host's pids)."""
        live = []
        for entry in registry.read_entries(self.claude_config_dir):
            started = registry.proc_start(entry.pid)
            if started is not None and entry.proc_start in (None, started):
                live.append(entry.pid)
        return live

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
    for directory in (path, *(path / sub for sub in STORE_DIRS)):
        if directory.is_dir():
            mode = stat.S_IMODE(directory.stat().st_mode)
            if mode != DIR_MODE:
                problems.append(f"{directory} has mode {mode:04o}, not {DIR_MODE:04o}")
            if directory.stat().st_uid != os.geteuid():
                problems.append(f"{directory} belongs to uid {directory.stat().st_uid}, not "
                                f"to uid {os.geteuid()}")
    if problems:
        return _fail(name, "; ".join(problems) + "; the engine refuses to use it",
                     "chmod 700 the directories and chown them to the Claude Code user")
    return _ok(name, f"{path} writable, mode {DIR_MODE:04o}")


def check_target(facts: Facts) -> Check:
    name = "target"
    pointer = facts.config.resume_pointer_path
    if pointer is not None and str(pointer.parent) in facts.unmounted:
        return _skip(name, f"not checked here: {pointer.parent} is not mounted in this container "
                           "(the MCP server only reads); image/run-doctor.sh and the installer's "
                           "doctor check it")
    base, identity = facts.base, facts.identity
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


def resume_claude_args(resume_command: Sequence[str]) -> tuple[list[str], list[str]]:
    """The Claude Code arguments of a resume command and the wrappers it was seen through: the
    wrappers the installer understands (`bash -lc "… claude …"`, `script -qfc`, `su -c`; `env`
    and `sudo -u` prefixes); a program that names no Claude Code (a start script of the
    household's own) takes the words after it. Raises StartCommandError for a shell command
    whose Claude Code words are only known when it runs."""
    try:
        resume = resume_from_argv(resume_command)
    except NoClaude:
        return list(resume_command[1:]), []
    return resume.claude_args, resume.wrappers


def _carried_prompt(resume_command: Sequence[str]) -> list[str]:
    """The words Claude Code would take as a prompt in a resume command that names it."""
    try:
        return prompt_words(resume_from_argv(resume_command).claude_args)
    except StartCommandError:
        return []


def check_resume_command(facts: Facts) -> Check:
    name, config = "resume_command", facts.config
    process = facts.claude_process
    if isinstance(process, str):
        return _skip(name, f"not checked: {process}")
    pid, argv = process
    live_args = claude_arguments(argv) or []
    try:
        kept_args, wrappers = resume_claude_args(config.resume_command)
    except StartCommandError as exc:
        return _fail(name, f"the flags it gives Claude Code cannot be read: {exc}",
                     "spell resume_command as an argv, or as a wrapper whose Claude Code words "
                     "are plain (bash -lc \"cd DIR && exec claude --resume {session_id} …\")")
    prompt = _carried_prompt(config.resume_command)
    if prompt:
        return _fail(name, f"carries a prompt, which every switch would send again: "
                           f"{shlex.join(prompt)}", "remove those words from resume_command")
    missing = missing_flags(live_args, kept_args)
    if missing:
        shown = ", ".join(" ".join(group) for group in missing)
        detail = (f"lacks flags of the live Claude Code (pid {pid}): {shown}; the resumed "
                  "process would run without them (a channel flag lost makes it deaf)")
        current = orjson.dumps(config.resume_command).decode()
        if wrappers:  # the flags belong inside the wrapper's command string
            return _fail(name, detail, f"add {shown} to the Claude Code command inside "
                                       f"{wrappers[-1]} of resume_command = {current}")
        suggested = [*config.resume_command, *(word for group in missing for word in group)]
        return _fail(name, detail, f"resume_command = {orjson.dumps(suggested).decode()}")
    kept = flag_groups(live_args)
    through = f" through {' / '.join(wrappers)}" if wrappers else ""
    return _ok(name, f"keeps every flag of the live Claude Code (pid {pid}){through}"
                     + (f": {', '.join(group[0] for group in kept)}" if kept else ""))


#: The session id the start check fills in when the target names none (only the words count).
SAMPLE_SESSION = "00000000-0000-4000-8000-000000000000"


def check_resume_start(facts: Facts) -> Check:
    """The program of resume_command starts where the base would start it (the switch refuses
    otherwise): for tmux, looked up on the tmux server's host with the PATH a respawned pane
    gets; for systemd, the unit's ExecStart program ran its main process."""
    name, config, base = "resume_start", facts.config, facts.base
    if isinstance(base, str):
        return _skip(name, f"not checked: {base}")
    if config.activation is Activation.pointer:
        return _skip(name, "not checked: with activation 'pointer' the runner starts Claude Code "
                           "with its own command")
    identity = facts.identity
    session = (identity.running_session_id if not isinstance(identity, str) else None) \
        or SAMPLE_SESSION
    try:
        problem = base.start_problem(session)
    except KaelError as exc:
        return _fail(name, f"cannot check that resume_command starts: {exc}",
                     _target_fix(config))
    if problem:
        return _fail(name, problem, _start_fix(config))
    if config.activation is Activation.systemd:
        return _ok(name, f"unit {config.systemd_unit} runs its ExecStart program")
    return _ok(name, f"{config.resume_command[0]!r} starts in the tmux pane's environment "
                     "(looked up on the tmux server's host)")


def _start_fix(config: Config) -> str:
    if config.activation is Activation.systemd:
        return (f"start the unit (systemctl start {config.systemd_unit}) and check its ExecStart "
                f"(systemctl cat {config.systemd_unit})")
    return ("give resume_command's program as an absolute path (what `command -v claude` prints "
            "in the shell Claude Code runs in), or add its directory to the tmux environment's "
            "PATH (tmux set-environment -g PATH ...); claude_workdir must exist on that host")


def check_claude_version(facts: Facts) -> Check:
    """The live Claude Code (and the program a switch starts) is a version this project has
    verified; an unverified one is a warning with the command that verifies it here."""
    name, process = "claude_version", facts.claude_process
    pid = None if isinstance(process, str) else process[0]
    newest = facts.transcripts[0] if facts.transcripts else None
    seen, program = claude_live.sightings(facts.claude_config_dir, pid, newest,
                                          facts.config.resume_command)
    if not seen:
        return _skip(name, claude_live.UNKNOWN)
    detail, all_verified = claude_live.describe(seen)
    if all_verified:
        return _ok(name, detail)
    return _warn(name, detail, claude_live.verify_hint(program))


def _settings_files(facts: Facts) -> list[Path]:
    files = [facts.claude_config_dir / "settings.json"]
    workdir = facts.config.claude_workdir
    if workdir is not None:
        files += [workdir / ".claude" / name for name in ("settings.json", "settings.local.json")]
    return files


def _peek_config(path: str) -> Instance | None:
    """Another config file's instance and state dir, read the way the hook's fast path reads
    it; None when it cannot be read from here."""
    try:
        data = peek_config(path)
        return Instance(path, str(peeked_state_dir(data)), str(data.get("instance", "default")))
    except (OSError, ValueError, RuntimeError):  # RuntimeError: `~user` of no one
        return None


def check_stop_hook(facts: Facts) -> Check:
    name = "stop_hook"
    ours: list[tuple[Path, str]] = []
    others: list[str] = []
    problems = []
    config = facts.config
    this = Instance(None if facts.config_path is None else str(facts.config_path),
                    str(config.state_dir), config.instance)
    for path in _settings_files(facts):
        data, problem = _read_json(path)
        if problem:
            problems.append(problem)
        for _, _, command in stop_hook_commands(data):
            served = hook_instance(command, this, _peek_config)
            if served is None:
                continue
            if served.verdict == OTHER:
                others.append(f"{command!r} in {path} ({served.why})")
            else:  # this instance's, or nothing in it says otherwise
                ours.append((path, command))
    if facts.config.activation is Activation.pointer:
        if ours:
            path, command = ours[0]
            return _fail(name, f"{path} has a Stop hook for this instance ({command}), but with "
                               "activation 'pointer' the runner passes every Stop to hook-stop "
                               "itself: each Stop would reach the engine twice "
                               "(docs/pointer-runner.md)",
                         f"remove that entry from hooks.Stop in {path}")
        return _skip(name, "not used with activation 'pointer': the runner passes every Stop to "
                           "hook-stop itself (docs/pointer-runner.md); no settings file has one "
                           "for this instance, as it should be")
    if ours:
        path, command = ours[0]
        return _ok(name, f"in {path}: {command}")
    where = facts.claude_config_dir / "settings.json"
    detail = (f"no Stop hook running `{HOOK_WRAPPER}` or `{HOOK_COMMAND}` for this instance "
              f"in {where}")
    if others:
        detail += f"; only hooks of another instance: {'; '.join(others)}"
    if problems:
        detail += f" ({'; '.join(problems)})"
    return _fail(name, detail,
                 f"add {{\"type\": \"command\", \"command\": \"{HOOK_WRAPPER} --container "
                 "<daemon container> --config <config> --state-dir <state dir>\", \"timeout\": "
                 f"10}} (the appliance; `kael-thread-rebuild --config <config> {HOOK_COMMAND}` "
                 f"where the engine runs on the host) to hooks.Stop[].hooks in {where}, or re-run "
                 "the installer (Claude Code has been seen dropping `hooks` when it rewrites the "
                 "file)")


def _tail(path: Path, size: int) -> str:
    with path.open("rb") as file:
        file.seek(0, os.SEEK_END)
        length = file.tell()
        file.seek(max(0, length - size))
        data = file.read()
    if length > size:
        data = data.partition(b"\n")[2]  # a cut first line is no line
    return data.decode("utf-8", "replace")


def _message(line: str) -> str:
    return line.partition(" ")[2]  # after the timestamp


def check_hook_delivery(facts: Facts) -> Check:
    """The last Stop that left a trace in hook.log reached the engine. The wrapper logs
    `hook-wrapper: …` when it could not reach the daemon, and `hook-wrapper: reached … again`
    at the first Stop that does after that; hook-stop logs `hook-stop…` for the Stops it
    records. A Stop that reached the engine and found nothing waiting leaves no line."""
    name = "hook_delivery"
    path = facts.config.layout.hook_log
    try:
        tail = _tail(path, HOOK_LOG_TAIL_BYTES)
    except FileNotFoundError:
        return _ok(name, f"no {path} yet: no Stop has failed to reach the engine")
    except OSError as exc:
        return _fail(name, f"{path} cannot be read: {exc.strerror or exc}",
                     f"chown {path} to the Claude Code user, mode 0600")
    last = None
    for line in tail.splitlines():
        if _message(line).startswith((HOOK_WRAPPER_LINE, HOOK_COMMAND)):
            last = line
    if last is None:
        return _ok(name, f"no Stop has failed to reach the engine ({path})")
    message = _message(last)
    if message.startswith(HOOK_COMMAND):
        return _ok(name, f"the last logged Stop reached the engine: {last}")
    if message.startswith(HOOK_WRAPPER_RECOVERED):
        return _ok(name, f"the hook reaches the daemon again: {last}")
    container = re.search(r"docker exec into (\S+) failed", message)
    start = f"docker start {container.group(1)}" if container else "docker start <daemon>"
    return _fail(name, f"the last Stop did not reach the engine: {last}",
                 f"start the daemon container ({start}, or image/run-daemon.sh, or re-run the "
                 "installer); if it runs, fix what the line says (e.g. the Claude Code user may "
                 "not use the Docker socket). The check clears with the next Stop that gets "
                 "through")


def global_state_files(config_dir: Path, home: Path | None = None) -> list[Path]:
    """Where Claude Code may keep its global state (user-scope MCP servers) for CONFIG_DIR: in
    it (CLAUDE_CONFIG_DIR set), or with CLAUDE_CONFIG_DIR unset, where the config dir is
    ~/.claude, beside it as ~/.claude.json."""
    home = Path.home() if home is None else home
    files = [config_dir / ".claude.json"]
    if config_dir.name == ".claude":
        files.append(config_dir.parent / ".claude.json")
    if os.path.realpath(config_dir) == os.path.realpath(home / ".claude"):
        files.append(home / ".claude.json")
    unique: list[Path] = []
    for file in files:
        if file not in unique:
            unique.append(file)
    return unique


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
    unseen = []
    state_files = global_state_files(facts.claude_config_dir)
    for path in state_files:
        if str(path) in facts.unmounted and not path.exists():
            unseen.append(path)
            continue
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
    if unseen:
        shown = ", ".join(str(path) for path in unseen)
        return _skip(name, f"not checked here: {shown} is not mounted in this container (Claude "
                           "Code replaces it by rename, so only a one-off container can show "
                           "it); image/run-doctor.sh and the installer's doctor check it")
    detail = f"no MCP server {SERVER_NAME!r} in {state_files[0]}"
    if problems:
        detail += f" ({'; '.join(problems)})"
    return _fail(name, detail,
                 f"claude mcp add --scope user {SERVER_NAME} -- {MCP_COMMAND} --config <config> "
                 "(the appliance: -- followed by the lines of image/mcp-command.sh) as the Claude "
                 f"Code user, with CLAUDE_CONFIG_DIR={facts.claude_config_dir} when that is not "
                 "~/.claude")


_NEEDS_THE_HOST = ("not checked here: it needs the Docker engine, which no appliance container "
                   "reaches; image/run-doctor.sh and the installer's doctor (playbooks/doctor.yml) "
                   "check it on the host")


def check_mcp_containers(facts: Facts) -> Check:
    """No MCP server container left behind: every one of the instance runs, and no more run
    than there are live Claude Code processes (each starts one)."""
    name, host = "mcp_containers", facts.host
    if host is None:
        return _skip(name, _NEEDS_THE_HOST)
    if isinstance(host, str):
        return _fail(name, host, "report this; it is how the host passes what it saw")
    # One that is "removing" is on its way out (--rm after its Claude Code exited).
    containers = [c for c in host.mcp_containers if c.state != "removing"]
    stopped = [c for c in containers if c.state != "running"]
    running = [c for c in containers if c.state == "running"]
    live = facts.live_claude_pids
    registry_dir = registry.registry_dir(facts.claude_config_dir)
    problems = []
    if stopped:
        problems.append(f"{len(stopped)} not running: " + ", ".join(
            f"{c.name or c.id[:12]} ({c.status or c.state})" for c in stopped))
    if len(running) > len(live):
        problems.append(f"{len(running)} running for {len(live)} live Claude Code process(es) "
                        f"in {registry_dir}: " + ", ".join(c.name or c.id[:12] for c in running))
    if problems:
        leftovers = stopped + (running if len(running) > len(live) else [])
        names = " ".join(c.name or c.id[:12] for c in leftovers)
        return _fail(name, f"MCP server containers of instance {facts.config.instance!r} left "
                           f"behind: {'; '.join(problems)}",
                     f"docker rm -f the ones no live Claude Code uses (of: {names}); a Claude "
                     "Code restarted later starts its own")
    return _ok(name, f"{len(running)} running for {len(live)} live Claude Code process(es), "
                     "none left behind")


def _access_problems(access: ClaudeAccess, instance: str) -> list[tuple[str, str]]:
    """(problem, fix) for each way the Claude user's access is off."""
    who = f"the Claude user {access.user or '?'} (uid {access.uid})"
    problems = []
    if "docker" in access.groups:
        problems.append((f"{who} is in the docker group, which is root on this host",
                         f"gpasswd --delete {access.user} docker (or the installer with "
                         "kael_remove_from_docker_group: true), then restart its Claude Code"))
    if access.socket_reachable is None:
        problems.append((f"whether {who} can use the Docker socket {access.socket} was not "
                         f"tried: {access.socket_detail}", "run image/run-doctor.sh as root"))
    elif access.socket_reachable:
        problems.append((f"{who} can use the Docker socket {access.socket} "
                         f"({access.socket_detail}), which is root on this host",
                         f"leave {access.socket} to root and the docker group only"))
    missing = [line for line in (f"mcp {instance}", f"hook {instance}")
               if line not in access.allowed]
    if missing:
        shown = " and ".join(f"`{access.wrapper} {line}`" for line in missing)
        problems.append((f"sudo does not let {who} run {shown}, so its MCP server or Stop hook "
                         "cannot reach the appliance",
                         "re-run the installer (or image/allow-user.sh --config <config> --user "
                         f"{access.user or '<user>'} as root)"))
    return problems


def check_claude_access(facts: Facts) -> Check:
    """The Claude user, whose Claude Code runs a model with a shell, has no Docker (root on the
    host) and reaches the appliance only through the wrapper, which sudo allows it for this
    instance's MCP server and Stop hook (docs/security.md)."""
    name, host = "claude_access", facts.host
    if host is None:
        return _skip(name, _NEEDS_THE_HOST)
    if isinstance(host, str):
        return _fail(name, host, "report this; it is how the host passes what it saw")
    access = host.claude_access
    if access is None:
        return _skip(name, "not checked: the host's facts say nothing of the Claude user's "
                           "access")
    if access.uid == 0:
        return _ok(name, "Claude Code runs as root: its hook and MCP server use Docker "
                         "themselves; there is nothing to withhold")
    problems = _access_problems(access, facts.config.instance)
    if problems:
        return _fail(name, "; ".join(problem for problem, _ in problems),
                     "; ".join(fix for _, fix in problems))
    return _ok(name, f"the Claude user {access.user} is in no docker group, cannot use "
                     f"{access.socket} ({access.socket_detail}); sudo lets it run "
                     f"{access.wrapper} mcp|hook {facts.config.instance}")


def _short(image_id: str) -> str:
    return image_id.removeprefix("sha256:")[:12] or "?"


def check_versions(facts: Facts) -> Check:
    """The daemon runs the installed image, and the engine inside it is that image's version."""
    name, host, instance = "versions", facts.host, facts.config.instance
    if host is None:
        return _skip(name, _NEEDS_THE_HOST)
    if isinstance(host, str):
        return _fail(name, host, "report this; it is how the host passes what it saw")
    restart = ("restart the daemon on the installed image: image/run-daemon.sh --config <config> "
               "--image <image>, or re-run the installer")
    if not host.daemons:
        return _fail(name, f"no daemon container of instance {instance!r} "
                           f"(label {LABEL_PREFIX}.instance={instance})",
                     "start it: image/run-daemon.sh --config <config>, or re-run the installer")
    if len(host.daemons) > 1:
        return _fail(name, f"{len(host.daemons)} daemon containers of instance {instance!r}: "
                           + ", ".join(d.name for d in host.daemons),
                     "docker rm -f all but the one the installer or run-daemon.sh named")
    daemon, image = host.daemons[0], host.installed_image
    if image is None:
        return _fail(name, "the installed image is not on this host",
                     "load it (gunzip -c kael-thread-rebuild-<version>.tar.gz | docker load) or "
                     "pull it, then " + restart)
    daemon_version = (daemon.image_labels or {}).get(VERSION_LABEL, "unknown")
    image_version = (image.labels or {}).get(VERSION_LABEL, "unknown")
    engine = daemon.engine.split()[-1] if daemon.engine.split() else ""
    problems = []
    if daemon.state != "running":
        problems.append(f"the daemon container {daemon.name} is {daemon.status or daemon.state}")
    if daemon_version != image_version:
        problems.append(f"the daemon {daemon.name} runs version {daemon_version} "
                        f"({_short(daemon.image_id)}) but {image.ref} is {image_version} "
                        f"({_short(image.id)})")
    elif daemon.image_id != image.id:
        problems.append(
            f"the daemon {daemon.name} runs another build of {daemon_version} than {image.ref}: "
            f"{_short(daemon.image_id)} (revision "
            f"{(daemon.image_labels or {}).get(REVISION_LABEL, 'unknown')}) instead of "
            f"{_short(image.id)} (revision {(image.labels or {}).get(REVISION_LABEL, 'unknown')})")
    if daemon.state == "running" and engine != daemon_version:
        problems.append(f"the engine in the daemon says {engine or 'nothing'} for image version "
                        f"{daemon_version}")
    if problems:
        fix = restart if daemon.state == "running" else f"docker start {daemon.name}; {restart}"
        return _fail(name, "; ".join(problems), fix)
    return _ok(name, f"the daemon {daemon.name} runs {image.ref} {image_version} "
                     f"({_short(image.id)}), engine {engine}; this doctor {__version__}")


def check_operations(facts: Facts) -> Check:
    """Reports only: settling an operation (recovery) can restart the session, so it belongs to
    the daemon's start and the `recover` command, never to doctor."""
    name, state = "operations", facts.config.state_dir
    layout = StateLayout(state)
    if not all(d.is_dir() for d in (state, layout.operations, layout.backups)):
        return _ok(name, "no operation store yet")
    try:
        store = OperationStore(state)  # creates nothing: every directory it makes exists
    except UntrustedStateDir as exc:
        return _fail(name, f"{exc}; no operation can run", "see the state_dir check")
    scan = store.scan(unsettled_only=True)
    unsettled = scan.operations
    stuck = [op for op in unsettled if facts.now - op.updated_at > facts.stuck_after]
    problems = [_stuck_line(op, facts.now) for op in stuck]
    problems += [f"{store.operations_dir / stray.name} is not an operation record "
                 f"({stray.problem}); every command skips it" for stray in scan.strays]
    if problems:
        fix = _stuck_fix(stuck[0]) if stuck else (
            f"move the file(s) out of {store.operations_dir}")
        return _fail(name, "; ".join(problems), fix)
    current = f"; {unsettled[-1].operation_id} is {unsettled[-1].status.value}" \
        if unsettled else ""
    return _ok(name, f"none stuck{current}")


def _stuck_line(op: Operation, now: datetime) -> str:
    return f"{op.operation_id} has been {op.status.value} for {_ago(now - op.updated_at)}"


def _stuck_fix(op: Operation) -> str:
    if op.status in WAITING:
        return ("no Stop hook has run since it was requested: check stop_hook; or end it with "
                f"`kael-thread-rebuild cancel --operation {op.operation_id} --confirm CANCEL`")
    return ("the daemon is not driving it: run `kael-thread-rebuild recover` (with no daemon "
            "running), or restart the daemon (`kael-thread-rebuild serve`): either takes every "
            "unfinished operation to an end")


CheckFn = Callable[[Facts], Check]

#: The checks, in the order they are shown. The last three need the host's facts.
CHECKS: tuple[CheckFn, ...] = (
    check_project_dir,
    check_claude_workdir,
    check_state_dir,
    check_target,
    check_session,
    check_resume_command,
    check_resume_start,
    check_claude_version,
    check_stop_hook,
    check_hook_delivery,
    check_mcp_server,
    check_operations,
    check_mcp_containers,
    check_versions,
    check_claude_access,
)


def run_doctor(config: Config, *, checks: Sequence[CheckFn] = CHECKS,
               now: datetime | None = None, stuck_after: timedelta = STUCK_AFTER,
               environ: Mapping[str, str] | None = None) -> DoctorReport:
    """Every check against CONFIG; ENVIRON (default: this process's) may name the config file,
    the host's facts and the paths this container does not mount. Nothing is ever written."""
    facts = Facts(config, now or utcnow(), stuck_after,
                  os.environ if environ is None else environ)
    results = []
    for check in checks:
        try:
            results.append(check(facts))
        except (KaelError, OSError, ValueError) as exc:
            name = check.__name__.removeprefix("check_")
            results.append(_fail(name, f"the check itself failed: {type(exc).__name__}: {exc}",
                                 "report this; the other checks still ran"))
    return DoctorReport(ok=all(c.ok for c in results), checks=results)
