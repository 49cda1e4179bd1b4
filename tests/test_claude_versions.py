"""The verified Claude Code versions: the list, a fixture folder and surface per version, what the
engine's command-line reading relies on, and doctor's version line on a live Claude Code."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from kael_thread_rebuild.claude_code import live, versions
from kael_thread_rebuild.claude_code.command_line import ALIASES, ARITY, MANY, NONE, ONE, OPTIONAL
from kael_thread_rebuild.claude_code.registry import RegistryEntry
from kael_thread_rebuild.config import Config
from kael_thread_rebuild.doctor.model import Check
from kael_thread_rebuild.doctor.runner import run_doctor
from kael_thread_rebuild.doctor.target import check_claude_version
from kael_thread_rebuild.interfaces.formatters import doctor_lines
from tests.conftest import ConfigFactory
from tests.fixtures import surface
from tests.support.claude_env import (
    ClaudeEnv,
    TmuxClaude,
    claude_available,
    find_claude_binary,
    make_claude_env,
    tmux_available,
)
from tests.support.claude_versions import FIXTURES_ROOT, fixtures_dir, pinned_version
from tests.support.standin_api import StandinAPI
from tests.switching.sandbox import wait_until

VERIFIED = [entry.version for entry in versions.verified()]


def test_the_list_holds_the_pinned_and_the_newest_checked_versions() -> None:
    assert pinned_version() in VERIFIED
    assert "2.1.332" in VERIFIED
    for entry in versions.verified():
        assert {"fixtures", "fidelity", "tmux-drill"} <= set(entry.checked), entry


def test_a_fixture_folder_per_verified_version_and_no_other() -> None:
    folders = {path.name for path in FIXTURES_ROOT.glob("claude-code-*") if path.is_dir()}
    assert folders == {f"claude-code-{version}" for version in VERIFIED}
    for version in VERIFIED:
        assert surface.read(fixtures_dir(version)).version == version


def _help_arity(argument: str) -> str:
    """commander's arity of an option, from its argument as `claude --help` prints it."""
    if not argument:
        return NONE
    if argument.endswith("...>") or argument.endswith("...]"):
        return MANY
    return ONE if argument.startswith("<") else OPTIONAL


@pytest.mark.parametrize("version", VERIFIED)
def test_the_start_command_parser_knows_every_option_of_the_version(version: str) -> None:
    """doctor and the installer read a start command with claude_code.command_line: an option it
    does not know, or knows with another arity, loses a flag's value or takes a prompt for one."""
    options = surface.read(fixtures_dir(version)).help_options
    wrong = {name: (argument, ARITY.get(ALIASES.get(name, name)))
             for name, argument in options.items()
             if ARITY.get(ALIASES.get(name, name)) != _help_arity(argument)}
    assert wrong == {}, f"{version}: options command_line reads with another arity"


@pytest.mark.parametrize("version", VERIFIED)
def test_every_version_writes_what_the_engine_reads(version: str) -> None:
    found = surface.read(fixtures_dir(version))
    stop_keys = {"session_id", "transcript_path", "cwd"}  # StopHookInput
    assert stop_keys <= set(found.stop_hook_input), found.stop_hook_input
    registry_keys = {field.alias or name for name, field in RegistryEntry.model_fields.items()}
    assert registry_keys | {"version"} <= set(found.registry_entry), found.registry_entry
    assert {"type:str", "command:str", "args:list"} <= set(found.mcp_registration)
    for kind in ("user", "assistant"):
        assert {"type", "uuid", "parentUuid", "timestamp", "message.content", "version"} <= \
            set(found.record_keys[kind]), kind


def test_the_surface_diff_names_what_changed_between_versions() -> None:
    old, new = (surface.read(fixtures_dir(version)) for version in ("2.1.328", "2.1.332"))
    assert surface.diff(old, new) == ["+ user record key: rowSource",
                                      "+ user record key: sentAtMs"]
    changed = new.model_copy(update={
        "help_options": {**{k: v for k, v in new.help_options.items() if k != "--resume"},
                         "--verbose": "<level>", "--quiet": ""},
        "attachment_types": [*new.attachment_types, "brand_new"],
        "stop_hook_input": [k for k in new.stop_hook_input if k != "transcript_path"],
        "registry_entry": [*new.registry_entry, "pidNamespace"]})
    assert surface.diff(new, changed) == [
        "+ claude --help option: --quiet",
        "- claude --help option: --resume [value]",
        "~ claude --help option: --verbose: (no value) -> <level>",
        "+ attachment type: brand_new",
        "- Stop hook input key: transcript_path",
        "+ session registry key: pidNamespace",
    ]


@pytest.mark.parametrize("version", VERIFIED)
def test_the_version_stamp_of_a_transcript_names_its_writer(version: str) -> None:
    transcript = fixtures_dir(version) / "plain-chat.jsonl"
    assert live.transcript_version(transcript) == version
    seen, program = live.sightings(Path("/nonexistent"), None, transcript, [])
    assert [s.version for s in seen] == [version] and program is None
    assert seen[0].where == "wrote plain-chat.jsonl"
    # From a container the host's program does not run; the hint still names it.
    host_program = "/opt/absent-DO-NOT-CREATE/bin/claude"
    seen, program = live.sightings(Path("/nonexistent"), None, transcript,
                                   [host_program, "--resume", "{session_id}"])
    assert [s.version for s in seen] == [version] and program == host_program
    assert f"--binary {host_program}`" in live.verify_hint(program)


# -- doctor on a live Claude Code ----------------------------------------------------------------


@pytest.fixture
def interactive(tmp_path: Path) -> Iterator[tuple[ClaudeEnv, TmuxClaude, int]]:
    """The pinned Claude Code, interactive in a private tmux pane, registered in its config dir."""
    if not (claude_available() and tmux_available()):
        pytest.skip("needs the pinned Claude Code and tmux")
    with StandinAPI() as api:
        env = make_claude_env(tmp_path / "claude", api.url)
        with TmuxClaude(env) as tui:
            tui.wait_for("❯", timeout=60)
            entry = wait_until(lambda: next(iter((env.config_dir / "sessions").glob("*.json")),
                                            None), timeout=30, what="the registry entry")
            yield env, tui, int(entry.stem)


def _config(make_config: ConfigFactory, env: ClaudeEnv, tui: TmuxClaude) -> Config:
    return make_config(project_dir=str(env.project_dir), claude_workdir=str(env.cwd),
                       claude_config_dir=str(env.config_dir), tmux_socket=tui.socket,
                       tmux_target=tui.target,
                       resume_command=[str(find_claude_binary()), "--resume", "{session_id}"])


def _version_check(config: Config) -> Check:
    return run_doctor(config, checks=[check_claude_version]).checks[0]


def test_doctor_names_the_live_version_and_that_it_is_verified(
        make_config: ConfigFactory, interactive: tuple[ClaudeEnv, TmuxClaude, int]) -> None:
    env, tui, pid = interactive
    check = _version_check(_config(make_config, env, tui))
    pinned = pinned_version()
    assert check.ok and not check.warning and not check.skipped, check
    assert check.detail.startswith(f"Claude Code {pinned} (live process pid {pid}); {pinned} "
                                   f"({find_claude_binary()} --version): verified "), check.detail
    assert "tmux-drill" in check.detail


def test_doctor_warns_on_a_version_outside_the_list_with_the_command_that_verifies_it(
        make_config: ConfigFactory, interactive: tuple[ClaudeEnv, TmuxClaude, int],
        monkeypatch: pytest.MonkeyPatch) -> None:
    env, tui, pid = interactive
    pinned = pinned_version()
    # A household whose Claude Code updated itself past the list: the list without the pinned
    # version stands for it (the binary is real, only the list is shorter).
    others = tuple(e for e in versions.verified() if e.version != pinned)
    monkeypatch.setattr(versions, "verified", lambda: others)
    config = _config(make_config, env, tui)
    report = run_doctor(config, checks=[check_claude_version])
    check = report.checks[0]
    assert report.ok and check.ok and check.warning, check
    assert f"{pinned} (live process pid {pid})" in check.detail
    assert f"{pinned} not verified by this project" in check.detail
    assert f".ci/check-newest-claude --binary {find_claude_binary()}" in check.fix
    line = doctor_lines(report.checks)[0]
    assert line.startswith("warn  claude_version  Claude Code ") and " — fix: " in line


def test_doctor_skips_the_version_when_nothing_tells_it(
        make_config: ConfigFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A bare `claude` in resume_command is whatever the starter's PATH finds, not doctor's: a
    # claude on doctor's PATH is not asked.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "claude").write_text("#!/bin/sh\necho '9.9.9 (Claude Code)'\n")
    (bin_dir / "claude").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    config = make_config(claude_config_dir=str(tmp_path / "config"),
                         resume_command=["claude", "--resume", "{session_id}"])
    check = _version_check(config)
    assert check.ok and check.skipped and check.detail == live.UNKNOWN
