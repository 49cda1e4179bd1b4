"""The verified Claude Code versions (`versions.toml` beside this file).

    python -m kael_thread_rebuild.claude_code.versions [--newest]

prints the verified versions, one a line, oldest first (`--newest`: only the newest), for
scripts such as `.ci/setup`.
"""

from __future__ import annotations

import argparse
import functools
import tomllib
from datetime import date
from importlib import resources
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

VERSION_PATTERN = r"^\d+\.\d+\.\d+$"
Checked = Literal["fixtures", "surface", "fidelity", "tmux-drill"]


class VerifiedVersion(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    version: str = Field(pattern=VERSION_PATTERN)
    verified: date
    checked: tuple[Checked, ...] = Field(min_length=1)
    notes: str = ""

    @property
    def key(self) -> tuple[int, ...]:
        return version_key(self.version)


class VersionList(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    version: tuple[VerifiedVersion, ...] = Field(min_length=1)

    @field_validator("version")
    @classmethod
    def _ascending_and_unique(
            cls, value: tuple[VerifiedVersion, ...]) -> tuple[VerifiedVersion, ...]:
        keys = [entry.key for entry in value]
        if keys != sorted(set(keys)):
            raise ValueError("versions must be unique and listed oldest first")
        return value


def version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


@functools.cache
def verified() -> tuple[VerifiedVersion, ...]:
    """Every verified version, oldest first."""
    text = resources.files(__package__).joinpath("versions.toml").read_text(encoding="utf-8")
    return VersionList.model_validate(tomllib.loads(text)).version


def lookup(version: str) -> VerifiedVersion | None:
    return next((entry for entry in verified() if entry.version == version), None)


def newest() -> VerifiedVersion:
    return verified()[-1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="List the verified Claude Code versions.")
    parser.add_argument("--newest", action="store_true", help="only the newest")
    args = parser.parse_args(argv)
    shown = [newest()] if args.newest else list(verified())
    print("\n".join(entry.version for entry in shown))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
