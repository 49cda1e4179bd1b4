"""The Claude Code versions the tests run on: every verified version, one binary each under .tools/.

    .venv/bin/python -m tests.support.claude_versions install [VERSION ...]   # default: verified
    .venv/bin/python -m tests.support.claude_versions newest                   # on the registry

The pinned version of `.ci/versions.env` (the one every other test runs) lives in
``.tools/claude-code/``; every other version in ``.tools/claude-code-<version>/``. Each verified
version has its fixtures in ``tests/fixtures/claude-code-<version>/``.

A household's own binary is checked by naming it and a fixtures folder generated with it:
``KAEL_TEST_CLAUDE_BIN=<binary> KAEL_TEST_FIXTURES=<folder>`` makes that the only target
(``.ci/check-newest-claude`` does this).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from kael_thread_rebuild.claude_code.versions import verified

from .claude_env import ci_version, claude_version, repo_root

PACKAGE = "@anthropic-ai/claude-code"
BIN_ENV = "KAEL_TEST_CLAUDE_BIN"
FIXTURES_ENV = "KAEL_TEST_FIXTURES"
FIXTURES_ROOT = repo_root() / "tests" / "fixtures"
TOOLS = repo_root() / ".tools"


def pinned_version() -> str:
    """CLAUDE_CODE_VERSION of `.ci/versions.env`."""
    return ci_version("CLAUDE_CODE_VERSION")


def install_dir(version: str) -> Path:
    name = "claude-code" if version == pinned_version() else f"claude-code-{version}"
    return TOOLS / name


def binary_path(version: str) -> Path:
    return install_dir(version) / "node_modules" / ".bin" / "claude"


def is_installed(version: str) -> bool:
    path = binary_path(version)
    return path.is_file() and os.access(path, os.X_OK)


def install(version: str) -> Path:
    """Installs VERSION from the npm registry when it is not there yet; returns its binary."""
    path = binary_path(version)
    if not (is_installed(version) and claude_version(path) == version):
        print(f"installing Claude Code {version} into {install_dir(version)}", file=sys.stderr)
        install_dir(version).mkdir(parents=True, exist_ok=True)
        subprocess.run(["npm", "install", "--prefix", str(install_dir(version)), "--no-audit",
                        "--no-fund", "--loglevel=error", f"{PACKAGE}@{version}"],
                       check=True, stdout=subprocess.DEVNULL, timeout=600)
    got = claude_version(path)
    if got != version:
        raise RuntimeError(f"{path} says {got}, not {version}")
    return path


def newest_published() -> str:
    """The `latest` version of Claude Code on the npm registry."""
    out = subprocess.run(["npm", "view", PACKAGE, "version"], capture_output=True, text=True,
                         check=True, timeout=120).stdout
    return out.strip().splitlines()[-1]


def fixtures_dir(version: str) -> Path:
    return FIXTURES_ROOT / f"claude-code-{version}"


@dataclass(frozen=True)
class Target:
    """One Claude Code the fidelity tests and the drill run on."""

    label: str
    binary: Path
    fixtures: Path

    def available(self) -> bool:
        return self.binary.is_file() and os.access(self.binary, os.X_OK)

    def use(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Makes this binary the one every helper of `claude_env` runs (skips when missing)."""
        if not self.available():
            pytest.skip(f"Claude Code {self.label} is not installed at {self.binary} "
                        "(run .ci/setup)")
        monkeypatch.setenv(BIN_ENV, str(self.binary))


def targets() -> list[Target]:
    """Every verified version, or only the binary and fixtures named in the environment."""
    named = os.environ.get(FIXTURES_ENV)
    if named:
        binary = Path(os.environ.get(BIN_ENV) or binary_path(pinned_version()))
        return [Target(f"custom-{Path(named).name}", binary, Path(named))]
    return [Target(v.version, binary_path(v.version), fixtures_dir(v.version))
            for v in verified()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Install or look up Claude Code versions.")
    commands = parser.add_subparsers(dest="command", required=True)
    add = commands.add_parser("install", help="install versions (default: every verified one)")
    add.add_argument("versions", nargs="*")
    commands.add_parser("newest", help="print the newest version on the npm registry")
    args = parser.parse_args(argv)
    if args.command == "newest":
        print(newest_published())
        return 0
    for version in dict.fromkeys(args.versions or [v.version for v in verified()]):
        print(f"Claude Code {version}: {install(version)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
