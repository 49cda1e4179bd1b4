"""The instance configuration: one TOML file, validated by one pydantic model."""

from __future__ import annotations

import os
import re
import tomllib
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .defaults import CONFIG_ENV, DEFAULT_SPEECH_TOOLS, DEFAULT_STATE_DIR
from .errors import ConfigError

DEFAULT_POISON_PATTERN = (
    r"(AUP|Acceptable Use|policy violation|policy blocked|refusal loop|毒上下文|中毒|拒绝循环)"
)


class Activation(StrEnum):
    tmux = "tmux"
    systemd = "systemd"
    pointer = "pointer"


class CarryOverflow(StrEnum):
    drop_oldest = "drop_oldest"
    block = "block"


class SystemdBus(StrEnum):
    system = "system"
    user = "user"


PositiveSeconds = Annotated[float, Field(gt=0)]


class Config(BaseModel):
    """Every key of an instance's config file. Unknown keys are an error (typos must not pass)."""

    # validate_default: defaults such as state_dir go through the same validators (~ expanded).
    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)

    instance: str = Field("default", pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
    project_dir: Path
    claude_workdir: Path | None = None
    claude_config_dir: Path | None = None
    state_dir: Path = Path(DEFAULT_STATE_DIR)

    activation: Activation = Activation.tmux
    tmux_target: str = "cc:0.0"
    tmux_socket: str | None = None
    resume_command: list[str] = Field(
        default_factory=lambda: ["claude", "--resume", "{session_id}"], min_length=1
    )
    systemd_unit: str | None = None
    systemd_bus: SystemdBus = SystemdBus.system
    resume_pointer_path: Path | None = None

    dirty_budget_bytes: int = Field(512 * 1024, ge=1)
    rebuild_on_original_image_view: bool = True
    include_open_tail: bool = True
    freeze_startup_snapshot: bool = True
    stamp_turns: bool = False
    carry_max_tokens: int = Field(0, ge=0)
    carry_overflow: CarryOverflow = CarryOverflow.drop_oldest
    token_divisor: float = Field(1.5, gt=0)
    max_event_chars: int = Field(0, ge=0)
    block_on_unreadable_lines: bool = True
    poison_pattern: str = DEFAULT_POISON_PATTERN
    poison_threshold: int = Field(2, ge=1)
    poison_window_turns: int = Field(10, ge=1)
    speech_tool_pattern: list[str] = Field(default_factory=lambda: list(DEFAULT_SPEECH_TOOLS))

    stability_samples: int = Field(2, ge=2)
    stability_interval_seconds: PositiveSeconds = 0.5
    stability_timeout_seconds: PositiveSeconds = 60.0
    health_window_seconds: PositiveSeconds = 2.0
    health_timeout_seconds: PositiveSeconds = 30.0
    poll_interval_seconds: PositiveSeconds = 0.2

    @field_validator("project_dir", "state_dir", "claude_workdir", "claude_config_dir",
                     "resume_pointer_path")
    @classmethod
    def _absolute(cls, value: Path | None) -> Path | None:
        if value is None:
            return None
        value = value.expanduser()
        if not value.is_absolute():
            raise ValueError(f"must be an absolute path, got {str(value)!r}")
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
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"is not a valid regular expression: {exc}") from exc
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
    def poison_regex(self) -> re.Pattern[str]:
        return re.compile(self.poison_pattern, re.IGNORECASE)

    def resume_argv(self, session_id: str) -> list[str]:
        return [word.replace("{session_id}", session_id) for word in self.resume_command]


def _problems(exc: ValidationError) -> list[str]:
    lines = []
    for err in exc.errors():
        key = ".".join(str(part) for part in err["loc"]) or "(file)"
        message = str(err["msg"]).removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            message = "unknown key"
        lines.append(f"{key}: {message}")
    return lines


def parse_config(data: dict[str, Any], source: str = "config") -> Config:
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(source, _problems(exc)) from None


def load_config(path: str | os.PathLike[str] | None) -> Config:
    """Load from PATH, or from $KAEL_REBUILD_CONFIG when PATH is None."""
    if path is None:
        path = os.environ.get(CONFIG_ENV)
        if not path:
            problem = f"no config given: pass --config PATH or set {CONFIG_ENV}"
            raise ConfigError("config", [problem])
    file = Path(path)
    try:
        raw = file.read_bytes()
    except FileNotFoundError:
        raise ConfigError(str(file), ["file not found"]) from None
    except IsADirectoryError:
        raise ConfigError(str(file), ["is a directory, not a TOML file"]) from None
    except PermissionError:
        raise ConfigError(str(file), ["permission denied"]) from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(str(file), ["not UTF-8 text"]) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(str(file), [f"not valid TOML: {exc}"]) from None
    return parse_config(data, str(file))
