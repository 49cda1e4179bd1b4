"""The instance configuration: one TOML file, validated by one pydantic model."""

from __future__ import annotations

import os
import tomllib
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    Strict,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from .defaults import DEFAULT_ANSWER_TOOLS, DEFAULT_SPEECH_TOOLS
from .errors import ConfigError
from .paths import require_path_text, shown
from .reading_settings import CarryOverflow, ReadingSettings, poison_matcher
from .state_layout import (
    BACKUPS,
    CONFIG_ENV,
    DEFAULT_STATE_DIR,
    OPERATIONS,
    StateLayout,
    config_path,
    read_config_file,
)

DEFAULT_POISON_PATTERN = (
    r"(AUP|Acceptable Use|policy violation|policy blocked|refusal loop|毒上下文|中毒|拒绝循环)"
)


class Activation(StrEnum):
    tmux = "tmux"
    systemd = "systemd"
    pointer = "pointer"


class SystemdBus(StrEnum):
    system = "system"
    user = "user"


# Numbers are what TOML wrote, never coerced ("yes", "1" or true is not a number or a
# bool), and bounded: a value outside these bounds is a typo, or would overflow a sleep.
MAX_COUNT = 1 << 40
MAX_WORD = 4096  # a name or a pattern
MAX_ARG = 131072  # one word of a command line (Linux MAX_ARG_STRLEN): a system prompt fits
Flag = Annotated[bool, Strict()]
Count = Annotated[int, Strict()]
Seconds = Annotated[float, Strict(), Field(ge=0.01, le=3600)]
Timeout = Annotated[float, Strict(), Field(ge=0.01, le=86400)]
Word = Annotated[str, Field(min_length=1, max_length=MAX_WORD)]
Arg = Annotated[str, Field(max_length=MAX_ARG)]  # an empty argument is a real one
DIRECTORIES = ("project_dir", "state_dir", "claude_workdir", "claude_config_dir")


class Config(BaseModel):
    """Every key of an instance's config file. Unknown keys are an error (typos must not pass)."""

    # validate_default: defaults such as state_dir go through the same validators (~ expanded).
    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True,
                              allow_inf_nan=False)

    instance: str = Field(
        "default", pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$",
        description="name of this Claude Code instance (letters, digits, `._-`)")
    project_dir: Path = Field(
        description="Claude Code's project folder holding the session transcripts (`<config "
                    "dir>/projects/<encoded workdir>`); only transcripts inside it are ever read")
    claude_workdir: Path | None = Field(
        None, description="the real working directory of the Claude process (its encoding must "
                          "name `project_dir`); the resumed process starts there")
    claude_config_dir: Path | None = Field(
        None, description="Claude Code's config dir (`CLAUDE_CONFIG_DIR`, default `~/.claude`), "
                          "for its `sessions/` registry")
    state_dir: Path = Field(
        Path(DEFAULT_STATE_DIR),
        description="operations, backups, failed candidates, lock and log; must belong to the "
                    "user the engine runs as with mode 0700 (created so when missing), else "
                    "refused")

    activation: Activation = Field(
        Activation.tmux, description="switching base: `tmux`, `systemd` or `pointer`")
    tmux_target: str = Field("cc:0.0", min_length=1, max_length=256,
                             description="the pane running Claude Code")
    tmux_socket: str | None = Field(
        None, min_length=1, max_length=MAX_WORD,
        description="tmux socket: a name (`-L`) or, when it holds a `/`, a path (`-S`)")
    resume_command: list[Arg] = Field(
        default_factory=lambda: ["claude", "--resume", "{session_id}"], min_length=1,
        max_length=1024,
        description="argv that resumes a session (one word must hold `{session_id}`); must keep "
                    "every flag of the real start command (channels, plugins, model…), or the "
                    "resumed process no longer hears its channel. Its program must start where "
                    "the base starts it: with tmux it is looked up on the tmux server's host with "
                    "the PATH of the tmux environment (a shell's login PATH, e.g. `~/.local/bin`, "
                    "does not count), so give it as an absolute path; a switch is refused "
                    "otherwise (doctor: `resume_start`)")
    systemd_unit: str | None = Field(
        None, min_length=1, max_length=256,
        description="unit running Claude Code (needed by `activation = \"systemd\"`)")
    systemd_bus: SystemdBus = Field(SystemdBus.system, description="`system` or `user` bus")
    resume_pointer_path: Path | None = Field(
        None, description="file holding the session id the runner or unit resumes (needed by "
                          "`systemd` and `pointer`)")

    dirty_budget_bytes: Count = Field(
        512 * 1024, ge=1, le=MAX_COUNT,
        description="runtime bytes that make `dirty` advise a rebuild")
    rebuild_on_original_image_view: Flag = Field(
        True, description="advise a rebuild once the model viewed an original image")
    include_open_tail: Flag = Field(
        True, description="carry a last user message that has no reply yet")
    freeze_startup_snapshot: Flag = Field(
        True, description="carry the session-start context once, frozen, as the first item")
    stamp_turns: Flag = Field(
        False, description="prefix the first user item of each turn with its source time "
                           "(`[2026-11-30 08:48 UTC] `)")
    carry_max_tokens: Count = Field(
        0, ge=0, le=MAX_COUNT,
        description="estimated-token cap on what is carried; 0 = unlimited, else at least 5000")
    carry_overflow: CarryOverflow = Field(
        CarryOverflow.drop_oldest,
        description="over the cap: `drop_oldest` (whole oldest turns, counted) or `block` "
                    "(refuse)")
    token_divisor: Annotated[float, Strict(), Field(ge=0.01, le=100)] = Field(
        1.5, description="estimate = `int(cjk * 1.1 + other / token_divisor)`")
    max_event_chars: Count = Field(
        0, ge=0, le=MAX_COUNT,
        description="block the plan when one speech item is longer (0 = no limit); never "
                    "truncates")
    block_on_unreadable_lines: Flag = Field(
        True, description="block when a line cannot be parsed, or a user/assistant record has a "
                          "shape Claude Code does not write (it may hold a user's words); they "
                          "are reported either way (`unreadable_lines`, `impossible_lines`)")
    poison_pattern: str = Field(
        DEFAULT_POISON_PATTERN, max_length=MAX_ARG,
        description="case-insensitive regex counted over the last turns' speech; RE2 syntax "
                    "(matching takes time linear in the text: no lookaround, no backreferences)")
    poison_threshold: Count = Field(2, ge=1, le=1_000_000,
                                    description="matches that block a rebuild")
    poison_window_turns: Count = Field(10, ge=1, le=1_000_000,
                                       description="how many last turns are scanned")
    speech_tool_pattern: list[Word] = Field(
        default_factory=lambda: list(DEFAULT_SPEECH_TOOLS), max_length=256,
        description="tool names (globs) whose `text` argument is the assistant speaking to the "
                    "user")
    answer_tool_pattern: list[Word] = Field(
        default_factory=lambda: list(DEFAULT_ANSWER_TOOLS), max_length=256,
        description="tool names (globs) whose finished answer (a result starting `✅ "
                    "consultation #`: the advisor's poll) is carried as words said in the "
                    "assistant's turn; their calls and other results stay runtime")

    stability_samples: Count = Field(
        2, ge=2, le=100,
        description="equal samples (size, mtime, digest) before a transcript counts as stable")
    stability_interval_seconds: Seconds = Field(0.5, description="time between samples")
    stability_timeout_seconds: Timeout = Field(
        60.0, description="give up waiting for a stable transcript")
    stop_settle_timeout_seconds: Timeout = Field(
        30.0, description="after the Stop, wait this long for the transcript to exist and for "
        "Claude Code to record the Stop (`stop_hook_summary`, written once every Stop hook "
        "returned) before the stability samples")
    health_window_seconds: Seconds = Field(
        2.0, description="the new process must stay alive this long")
    health_timeout_seconds: Timeout = Field(
        30.0, description="and report the new session id within this time")
    poll_interval_seconds: Seconds = Field(
        0.2, description="how often the daemon and `wait` look at the store")
    admin_confirm_minutes: Count = Field(
        0, ge=0, le=10080,
        description="0: a request confirmed with its word (the MCP tool, behind Claude Code's "
                    "permission prompt, or the command line) switches at the next Stop. N: it "
                    "also waits for the household's admin, who confirms it as root in the "
                    "daemon's container (`docker exec -u 0 <daemon> kael-thread-rebuild confirm "
                    "--operation ID`, `--rollback` for a rollback), something the model cannot "
                    "do; unconfirmed after N minutes it is cancelled (docs/security.md)")

    @field_validator(*DIRECTORIES, "resume_pointer_path")
    @classmethod
    def _absolute(cls, value: Path | None, info: ValidationInfo) -> Path | None:
        if value is None:
            return None
        try:
            require_path_text(str(value))
        except ValueError as exc:
            raise ValueError(f"{shown(value)} {exc}") from None
        try:
            value = value.expanduser()
        except RuntimeError:
            raise ValueError(f"'{shown(value)}': the home directory it names is unknown") from None
        if not value.is_absolute():
            raise ValueError(f"must be an absolute path, got '{shown(value)}'")
        if info.field_name in DIRECTORIES:
            _not_a_file(value)
        elif _is_dir(value):
            raise ValueError(f"{value} is a directory, not a file")
        if info.field_name == "state_dir" and os.path.normpath(value) == "/":
            raise ValueError(f"must not be the root directory: it gets {OPERATIONS}/ and "
                             f"{BACKUPS}/")
        return value

    @field_validator("tmux_target", "tmux_socket", "systemd_unit", "resume_command",
                     "speech_tool_pattern", "answer_tool_pattern", "poison_pattern")
    @classmethod
    def _no_nul(cls, value: str | list[str] | None) -> str | list[str] | None:
        words = [value] if isinstance(value, str) else value or []
        if any("\0" in word for word in words):
            raise ValueError("contains a NUL character")
        return value

    @field_validator("carry_max_tokens")
    @classmethod
    def _budget_floor(cls, value: int) -> int:
        if 0 < value < 5000:
            raise ValueError("must be 0 (unlimited) or at least 5000")
        return value

    @field_validator("poison_pattern")
    @classmethod
    def _regex(cls, value: str) -> str:
        poison_matcher(value)
        return value

    @field_validator("resume_command")
    @classmethod
    def _resume_has_placeholder(cls, value: list[str]) -> list[str]:
        if not any("{session_id}" in word for word in value):
            raise ValueError("must contain the placeholder {session_id} in one of its words")
        return value

    @model_validator(mode="after")
    def _base_needs(self) -> Config:
        if self.activation is Activation.systemd and not self.systemd_unit:
            raise ValueError("activation 'systemd' needs systemd_unit")
        if self.activation in (Activation.systemd, Activation.pointer) and (
            self.resume_pointer_path is None
        ):
            raise ValueError(f"activation {self.activation.value!r} needs resume_pointer_path")
        return self

    @property
    def layout(self) -> StateLayout:
        """The paths of the state dir."""
        return StateLayout(self.state_dir)

    @property
    def reading(self) -> ReadingSettings:
        """What reading a transcript takes from this config."""
        names = set(ReadingSettings.names())
        return ReadingSettings.of(self.model_dump(mode="json", include=names))

    def resume_argv(self, session_id: str) -> list[str]:
        return [word.replace("{session_id}", session_id) for word in self.resume_command]


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except (OSError, ValueError):
        return False


def _not_a_file(path: Path) -> None:
    """A directory key must not name something that exists and is not a directory."""
    try:
        exists = path.exists()
    except (OSError, ValueError):
        return  # cannot tell (e.g. no permission): the command that uses it says so
    if exists and not _is_dir(path):
        raise ValueError(f"{path} is a file, not a directory")


def _problems(exc: ValidationError) -> list[str]:
    """One line per key: its first problem (a union type reports one per member)."""
    lines: dict[str, str] = {}
    for err in exc.errors():
        loc = err["loc"]
        key = str(loc[0]) if loc else "(file)"
        message = str(err["msg"]).removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            message = "unknown key"
        elif len(loc) > 1 and isinstance(loc[1], int):
            message = f"word {loc[1] + 1}: {message}"
        lines.setdefault(key, f"{key}: {message}")
    return list(lines.values())


def parse_config(data: dict[str, Any], source: str = "config") -> Config:
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(source, _problems(exc)) from None


def load_config(path: str | os.PathLike[str] | None) -> Config:
    """Load from PATH, or from $KAEL_REBUILD_CONFIG when PATH is None."""
    return load_config_and_bytes(path)[0]


def load_config_and_bytes(path: str | os.PathLike[str] | None) -> tuple[Config, bytes]:
    """`load_config`, and the file's bytes it validated."""
    if path is None:
        path = config_path(None)
        if path is None:
            problem = f"no config given: pass --config PATH or set {CONFIG_ENV}"
            raise ConfigError("config", [problem])
    source = os.fspath(path)
    try:
        require_path_text(source)
    except ValueError as exc:
        raise ConfigError(shown(source), [str(exc)]) from None
    try:
        raw = read_config_file(source)
    except ValueError as exc:  # not a regular file, too large
        raise ConfigError(source, [str(exc)]) from None
    except FileNotFoundError:
        raise ConfigError(source, ["file not found"]) from None
    except PermissionError:
        raise ConfigError(source, ["permission denied"]) from None
    except OSError as exc:
        raise ConfigError(source, [exc.strerror or str(exc)]) from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(source, ["not UTF-8 text"]) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(source, [f"not valid TOML: {exc}"]) from None
    return parse_config(data, source), raw
