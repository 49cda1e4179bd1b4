"""The verified Claude Code versions: the list, a fixture folder and surface per version, what the
engine's command-line reading relies on."""

from __future__ import annotations

import pytest

from kael_thread_rebuild.claude_cli import ALIASES, NO_VALUE
from kael_thread_rebuild.claude_code import versions
from tests.fixtures import surface
from tests.support.claude_versions import FIXTURES_ROOT, fixtures_dir, pinned_version

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


@pytest.mark.parametrize("version", VERIFIED)
def test_the_start_command_parser_knows_every_option_of_the_version(version: str) -> None:
    """doctor and the installer read a start command with claude_cli: an option that takes no
    value must be in NO_VALUE, or the word after it is taken for its value (and lost)."""
    options = surface.read(fixtures_dir(version)).help_options
    long_options = {ALIASES.get(name, name): argument for name, argument in options.items()
                    if name.startswith("--")}
    flags = {name for name, argument in long_options.items() if not argument}
    assert flags - NO_VALUE == set(), f"{version}: flags claude_cli would read as taking a value"
    valued = {name for name, argument in long_options.items() if argument}
    assert valued & NO_VALUE == set(), f"{version}: options claude_cli would read as flags"
    for alias, name in ALIASES.items():
        if alias in options and name in options:
            assert options[alias] == options[name], f"{version}: {alias} is not {name}"


def test_the_surface_diff_names_what_changed_between_versions() -> None:
    old, new = (surface.read(fixtures_dir(version)) for version in ("2.1.328", "2.1.332"))
    assert surface.diff(old, new) == ["+ user record key: rowSource",
                                      "+ user record key: sentAtMs"]
    changed = new.model_copy(update={
        "help_options": {**{k: v for k, v in new.help_options.items() if k != "--resume"},
                         "--verbose": "<level>", "--quiet": ""},
        "attachment_types": [*new.attachment_types, "brand_new"],
        "stop_hook_input": [k for k in new.stop_hook_input if k != "transcript_path"]})
    assert surface.diff(new, changed) == [
        "+ claude --help option: --quiet",
        "- claude --help option: --resume [value]",
        "~ claude --help option: --verbose: (no value) -> <level>",
        "+ attachment type: brand_new",
        "- Stop hook input key: transcript_path",
    ]
