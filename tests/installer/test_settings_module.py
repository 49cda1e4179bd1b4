"""claude_settings: our Stop hook and read-only permissions merged into real settings.json files
without touching anything else, refused when unparsable, undone exactly."""

from __future__ import annotations

import json
import os
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import settings as examples
from hypothesis import strategies as st

from kael_thread_rebuild.config import parse_config
from kael_thread_rebuild.doctor.facts import Facts
from kael_thread_rebuild.doctor.hooks import check_stop_hook
from kael_thread_rebuild.state_layout import CONFIG_ENV
from tests.installer.conftest import FOREIGN_SETTINGS, RunModule, load_module_utils

HOOK = "/usr/local/bin/kael-hook --container kael-thread-rebuild-x --config /etc/k/x.toml " \
       "--state-dir /var/lib/k/x"
OURS = [f"mcp__kael-thread-rebuild__thread_rebuild_{t}" for t in ("doctor", "dirty", "plan",
                                                                     "status")]
PROMPTING = [f"mcp__kael-thread-rebuild__thread_rebuild_{t}"
             for t in ("request", "cancel", "rollback_request")]
ENTRY = {"type": "command", "command": HOOK, "timeout": 10}
EVERY_EVENT = {
    "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "a"}]},
                   {"matcher": "Edit|Write", "hooks": [{"type": "command", "command": "b"}]}],
    "PostToolUse": [{"matcher": "*", "hooks": [{"type": "command", "command": "c"}]}],
    "Notification": [{"hooks": [{"type": "command", "command": "d"}]}],
    "UserPromptSubmit": [{"hooks": [{"type": "command", "command": "e", "timeout": 3}]}],
    "Stop": [{"hooks": [{"type": "command", "command": "f"}]}],
    "SubagentStop": [{"hooks": [{"type": "command", "command": "g"}]}],
    "PreCompact": [{"matcher": "auto", "hooks": [{"type": "command", "command": "h"}]}],
    "SessionStart": [{"matcher": "startup", "hooks": [{"type": "command", "command": "i"}]}],
    "SessionEnd": [{"hooks": [{"type": "command", "command": "j"}]}],
}


@pytest.fixture
def settings(tmp_path: Path) -> Path:
    return tmp_path / "claude" / "settings.json"


def write(path: Path, content: str | dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content if isinstance(content, str) else json.dumps(content, indent=2))


def merge(run_module: RunModule, path: Path, **extra: Any) -> dict[str, Any]:
    return run_module("claude_settings", {"path": str(path), "hook_command": HOOK,
                                          "backup_dir": str(path.parent.parent / "backups"),
                                          **extra})


def stop_commands(data: dict[str, Any]) -> list[str]:
    return [h["command"] for g in data["hooks"]["Stop"] for h in g["hooks"]]


@pytest.mark.parametrize("content", [None, "", "  \n", "{}", "{}\n"])
def test_missing_empty_or_empty_object_gets_both(run_module: RunModule, settings: Path,
                                                 content: str | None) -> None:
    if content is None:
        settings.parent.mkdir(parents=True)
    else:
        write(settings, content)
    result = merge(run_module, settings)
    assert result["changed"] and result["hook_present"]
    data = json.loads(settings.read_text())
    assert data == {"hooks": {"Stop": [{"hooks": [ENTRY]}]}, "permissions": {"allow": OURS}}
    if content is None:
        assert stat.S_IMODE(settings.stat().st_mode) == 0o600


def test_foreign_hooks_of_every_event_and_matchers_are_kept(run_module: RunModule,
                                                            settings: Path) -> None:
    original = {"model": "opus", "hooks": EVERY_EVENT,
                "permissions": {"allow": ["Bash(git:*)"], "ask": ["WebFetch"],
                                "deny": ["Read(./.env)"], "defaultMode": "acceptEdits"},
                "env": {"A": "1"}, "zzz_unknown": [1, {"x": None}]}
    write(settings, original)
    merge(run_module, settings)
    data = json.loads(settings.read_text())
    assert list(data) == list(original)  # key order kept, nothing added at the top
    expected_hooks = json.loads(json.dumps(EVERY_EVENT))
    expected_hooks["Stop"].append({"hooks": [ENTRY]})  # a group of its own
    assert data["hooks"] == expected_hooks
    assert data["permissions"] == {**original["permissions"],  # type: ignore[dict-item]
                                   "allow": ["Bash(git:*)", *OURS]}
    assert data["env"] == original["env"] and data["zzz_unknown"] == original["zzz_unknown"]


def test_our_hook_already_present_changes_nothing(run_module: RunModule, settings: Path) -> None:
    original = {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": HOOK,
                                               "timeout": 30}]}]},
                "permissions": {"allow": [*OURS, "Bash"]}}
    write(settings, original)
    before = settings.read_bytes()
    merge(run_module, settings, hook_timeout=30)  # keeps the record of what is ours
    result = merge(run_module, settings, hook_timeout=30)
    assert not result["changed"] and result["hook_present"]
    assert settings.read_bytes() == before
    backups = settings.parent.parent / "backups"
    assert [p.name for p in backups.iterdir()] == ["settings.json.added.json"]  # no backup


def test_second_run_changes_nothing(run_module: RunModule, settings: Path) -> None:
    write(settings, FOREIGN_SETTINGS)
    assert merge(run_module, settings)["changed"]
    after_first = settings.read_bytes()
    assert not merge(run_module, settings)["changed"]
    assert settings.read_bytes() == after_first


def test_dropped_hooks_key_is_repaired(run_module: RunModule, settings: Path) -> None:
    write(settings, FOREIGN_SETTINGS)
    merge(run_module, settings)
    data = json.loads(settings.read_text())
    del data["hooks"]  # what Claude Code has been seen doing when it rewrites the file
    write(settings, data)
    result = merge(run_module, settings)
    assert result["added"] == [f"hooks.Stop: {HOOK}"]
    repaired = json.loads(settings.read_text())
    assert stop_commands(repaired) == [HOOK]
    assert repaired["permissions"]["allow"] == ["Bash(ls:*)", *OURS]


def test_never_allows_the_prompting_tools(run_module: RunModule, settings: Path) -> None:
    write(settings, {})
    merge(run_module, settings)
    allow = json.loads(settings.read_text())["permissions"]["allow"]
    assert not set(PROMPTING) & set(allow)


def test_broad_grants_are_kept_with_a_warning(run_module: RunModule, settings: Path) -> None:
    write(settings, {"permissions": {"allow": ["mcp__kael-thread-rebuild"],
                                     "ask": [OURS[2]]}})
    result = merge(run_module, settings)
    warnings = json.dumps(result.get("warnings", []))
    assert "may run without asking" in warnings and "overrides the allow rule" in warnings
    assert json.loads(settings.read_text())["permissions"]["allow"][0] == \
        "mcp__kael-thread-rebuild"


@pytest.mark.parametrize("content", [
    '{"hooks": {"Stop": []},',  # truncated
    "{'single': 'quotes'}",
    '{"a": NaN}',
    '{"a": 1, "a": 2}',
    "[]",
    '"settings"',
    '{"hooks": []}',
    '{"hooks": {"Stop": {}}}',
    '{"permissions": {"allow": "Bash"}}',
    b"\xff\xfe{}".decode("latin-1"),
])
def test_unparsable_is_refused_and_left_untouched(run_module: RunModule, settings: Path,
                                                  content: str) -> None:
    write(settings, content)
    os.chmod(settings, 0o640)
    before = settings.read_bytes()
    mtime = settings.stat().st_mtime_ns
    result = merge(run_module, settings)
    assert result["failed"] and "left untouched" in result["msg"]
    assert settings.read_bytes() == before and settings.stat().st_mtime_ns == mtime
    assert sorted(p.name for p in settings.parent.iterdir()) == ["settings.json"]


def test_owner_group_and_mode_are_kept(run_module: RunModule, settings: Path) -> None:
    """Run as the settings' owner (the role's become_user; here the test's user), the file keeps
    its group and mode; the backup is that user's, mode 0600."""
    if os.geteuid() != 0:
        pytest.skip("changing a file's group to one the user is not in needs root")
    write(settings, FOREIGN_SETTINGS)
    os.chown(settings, 0, 23456)
    os.chmod(settings, 0o640)
    result = merge(run_module, settings)
    info = settings.stat()
    assert (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)) == (0, 23456, 0o640)
    backup = Path(result["backup_file"])
    assert json.loads(backup.read_text()) == FOREIGN_SETTINGS
    assert (backup.stat().st_uid, stat.S_IMODE(backup.stat().st_mode)) == (0, 0o600)


def test_symlink_target_is_written_and_link_kept(run_module: RunModule, settings: Path,
                                                 tmp_path: Path) -> None:
    real = tmp_path / "dotfiles" / "settings.json"
    write(real, FOREIGN_SETTINGS)
    settings.parent.mkdir(parents=True)
    settings.symlink_to(real)
    merge(run_module, settings)
    assert settings.is_symlink()
    assert stop_commands(json.loads(real.read_text())) == ["notify-done", HOOK]


def test_check_mode_changes_nothing_and_diff_shows_the_change(run_module: RunModule,
                                                              settings: Path) -> None:
    write(settings, FOREIGN_SETTINGS)
    before = settings.read_bytes()
    result = run_module("claude_settings", {"path": str(settings), "hook_command": HOOK},
                        check=True, diff=True)
    assert result["changed"] and "backup_file" not in result
    assert settings.read_bytes() == before
    assert sorted(p.name for p in settings.parent.iterdir()) == ["settings.json"]
    assert result["diff"]["before"] == before.decode()
    after = json.loads(result["diff"]["after"])
    assert stop_commands(after) == ["notify-done", HOOK]
    assert after["permissions"]["allow"] == ["Bash(ls:*)", *OURS]


def test_absent_removes_only_what_present_added(run_module: RunModule, settings: Path) -> None:
    original = {"hooks": EVERY_EVENT, "permissions": {"allow": ["Bash(git:*)"]}, "x": 1}
    write(settings, original)
    merge(run_module, settings)
    result = merge(run_module, settings, state="absent")
    assert result["removed"] == [f"hooks.Stop: {HOOK}", *(f"permissions.allow: {p}"
                                                           for p in OURS)]
    assert json.loads(settings.read_text()) == original
    assert not merge(run_module, settings, state="absent")["changed"]


def test_absent_drops_only_the_containers_it_emptied(run_module: RunModule,
                                                     settings: Path) -> None:
    write(settings, {"model": "opus"})
    merge(run_module, settings)
    merge(run_module, settings, state="absent")
    assert json.loads(settings.read_text()) == {"model": "opus"}
    write(settings, {"hooks": {"Stop": []}, "permissions": {"allow": []}})
    assert not merge(run_module, settings, state="absent")["changed"]


def test_pointer_instances_get_no_hook(run_module: RunModule, settings: Path) -> None:
    write(settings, {})
    result = run_module("claude_settings", {"path": str(settings)})
    assert result["changed"] and not result["hook_present"]
    assert json.loads(settings.read_text()) == {"permissions": {"allow": OURS}}


def test_indentation_and_final_newline_follow_the_file(run_module: RunModule,
                                                       settings: Path) -> None:
    write(settings, json.dumps({"model": "opus", "nested": {"k": "ü"}}, indent=4,
                               ensure_ascii=False))
    merge(run_module, settings)
    text = settings.read_text()
    assert '\n    "model": "opus"' in text and "ü" in text and not text.endswith("\n")


def test_missing_config_dir_fails(run_module: RunModule, tmp_path: Path) -> None:
    result = run_module("claude_settings", {"path": str(tmp_path / "nope" / "settings.json"),
                                            "hook_command": HOOK})
    assert result["failed"] and "does not exist" in result["msg"]


# -- our hook in a group of its own; null, changed and recorded entries ------------------------

OLD_HOOK = HOOK.replace("kael-thread-rebuild-x", "kael-old-container")


def test_hook_gets_a_group_of_its_own_beside_foreign_groups(run_module: RunModule,
                                                            settings: Path) -> None:
    foreign = [{"hooks": [{"type": "command", "command": "notify-done"}]},
               {"matcher": "", "hooks": [{"type": "command", "command": "say done"}]}]
    write(settings, {"hooks": {"Stop": foreign}})
    merge(run_module, settings)
    assert json.loads(settings.read_text())["hooks"]["Stop"] == [*foreign, {"hooks": [ENTRY]}]


@pytest.mark.parametrize("content", [
    '{"hooks": null, "permissions": null}',
    '{"hooks": {"Stop": null}, "permissions": {"allow": null}}',
    '{\n  "hooks": {\n    "Stop": null\n  },\n  "permissions": null\n}\n',
])
def test_null_containers_are_filled_and_put_back(run_module: RunModule, settings: Path,
                                                 content: str) -> None:
    write(settings, content)
    assert not merge(run_module, settings).get("failed")
    data = json.loads(settings.read_text())
    assert stop_commands(data) == [HOOK] and data["permissions"]["allow"] == OURS
    merge(run_module, settings, state="absent")
    assert settings.read_text() == content


def test_a_changed_hook_command_replaces_ours(run_module: RunModule, settings: Path) -> None:
    write(settings, FOREIGN_SETTINGS)
    merge(run_module, settings, hook_command=OLD_HOOK)
    result = merge(run_module, settings)  # the container was renamed; same --config
    assert result["added"] == [f"hooks.Stop: {HOOK}"]
    assert result["removed"] == [f"hooks.Stop: {OLD_HOOK}"]
    assert stop_commands(json.loads(settings.read_text())) == ["notify-done", HOOK]


def test_an_entry_of_ours_inside_a_foreign_group_moves_out(run_module: RunModule,
                                                           settings: Path) -> None:
    """What earlier installers did: our entry appended into the user's group."""
    mixed = {"hooks": [{"type": "command", "command": "notify-done"},
                       {"type": "command", "command": OLD_HOOK, "timeout": 10}]}
    write(settings, {"hooks": {"Stop": [mixed]}})
    merge(run_module, settings)
    assert json.loads(settings.read_text())["hooks"]["Stop"] == [
        {"hooks": [{"type": "command", "command": "notify-done"}]}, {"hooks": [ENTRY]}]


def test_a_changed_timeout_is_applied(run_module: RunModule, settings: Path) -> None:
    write(settings, FOREIGN_SETTINGS)
    merge(run_module, settings)
    assert merge(run_module, settings, hook_timeout=45)["changed"]
    data = json.loads(settings.read_text())
    assert data["hooks"]["Stop"][-1] == {"hooks": [{**ENTRY, "timeout": 45}]}
    assert stop_commands(data) == ["notify-done", HOOK]


def test_uninstall_keeps_what_the_user_had_before(run_module: RunModule, settings: Path) -> None:
    content = ('{"hooks": {"Stop": [], "PreToolUse": []}, "permissions": {"allow": ["'
               + OURS[0] + '"], "deny": []}, "env": {}}')
    write(settings, content)
    result = merge(run_module, settings)
    assert result["record"]["permissions"] == OURS[1:]
    merge(run_module, settings, state="absent")
    assert settings.read_text() == content
    assert not (settings.parent.parent / "backups" / "settings.json.added.json").exists()


def test_the_users_bytes_are_kept(run_module: RunModule, settings: Path) -> None:
    content = ('{\n    "model" : "caf\\u00e9",  "cost": 1.50, "big": 1E+2,\n'
               '    "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "\\/bin\\/x"}]}]},'
               '\n    "permissions": {"allow": ["Bash(ls:*)"]}, "t": [ 1,2 ]\n}')
    write(settings, content)
    merge(run_module, settings)
    after = settings.read_text()
    for kept in ('"model" : "caf\\u00e9",  "cost": 1.50, "big": 1E+2,',
                 '"command": "\\/bin\\/x"}]}', '"t": [ 1,2 ]\n}'):
        assert kept in after
    merge(run_module, settings, state="absent")
    assert settings.read_text() == content


# -- the splicer, property-tested over many documents and spellings --------------------------

settings_utils = load_module_utils("kael_settings")
JSON_LEAF = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6),
                      st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=8))
JSON_VALUE = st.recursive(JSON_LEAF, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)),
    max_leaves=8)
GROUP = st.fixed_dictionaries({"hooks": st.lists(st.fixed_dictionaries(
    {"type": st.just("command"), "command": st.text(min_size=1, max_size=10)}), max_size=2)},
    optional={"matcher": st.sampled_from(["", "x"])})
SETTINGS = st.fixed_dictionaries({}, optional={
    "hooks": st.one_of(st.none(), st.fixed_dictionaries({}, optional={
        "Stop": st.one_of(st.none(), st.lists(GROUP, max_size=3)),
        "PreToolUse": st.lists(GROUP, max_size=1)})),
    "permissions": st.one_of(st.none(), st.fixed_dictionaries({}, optional={
        "allow": st.one_of(st.none(), st.lists(st.sampled_from(
            ["Bash", "Read(*)", OURS[0], OURS[3]]), max_size=3, unique=True)),
        "deny": st.lists(st.text(max_size=5), max_size=2)})),
    "model": st.text(max_size=8), "extra": JSON_VALUE})
SPELLING = st.fixed_dictionaries({"indent": st.sampled_from([None, 2, 4, "\t"]),
                                  "ensure_ascii": st.booleans(),
                                  "separators": st.sampled_from([None, (",", ":")])})


def expected_merge(data: dict[str, Any]) -> dict[str, Any]:
    """The merge computed on plain data, independently of the splicer."""
    out = json.loads(json.dumps(data))
    hooks = out["hooks"] = out.get("hooks") or {}
    hooks["Stop"] = [*(hooks.get("Stop") or []), {"hooks": [ENTRY]}]
    permissions = out["permissions"] = out.get("permissions") or {}
    allow = permissions.get("allow") or []
    permissions["allow"] = allow + [rule for rule in OURS if rule not in allow]
    return out


@examples(max_examples=300, deadline=None)
@given(data=SETTINGS, spelling=SPELLING)
def test_install_splices_and_uninstall_gives_back_every_byte(data: dict[str, Any],
                                                             spelling: dict[str, Any]) -> None:
    assume(data)  # {} is written as a new file would be
    text = json.dumps(data, **spelling)
    change = settings_utils.install(text, HOOK, 10)
    assert json.loads(change.text) == expected_merge(data)
    assert list(json.loads(change.text))[:len(data)] == list(data)  # key order kept
    again = settings_utils.install(change.text, HOOK, 10, record=change.record)
    assert again.text == change.text and not again.added and not again.removed
    back = settings_utils.uninstall(change.text, HOOK, record=change.record)
    assert back.text == text


# -- which Stop hook is ours: one definition for the installer and the doctor ----------------

#: (command, doctor counts it as this instance's, the installer replaces it with ours). CONFIG is
#: this instance's config file, LINK a symlink to it, OTHER another instance's config, NONE a
#: config file that does not exist, STATE this instance's state dir.
HOOK_CASES = [
    ("kael-hook --container kael-thread-rebuild-x --config CONFIG --state-dir STATE", True, True),
    ("/opt/kael-hook --container kael-old-container --config CONFIG --state-dir STATE", True, True),
    ("sh -c 'exec /opt/bin/kael-hook --container c --config CONFIG --state-dir STATE'", True,
     True),
    ("kael-hook --container kael-thread-rebuild-x --config LINK --state-dir STATE", True, True),
    ("kael-thread-rebuild --config CONFIG hook-stop", True, True),
    ("docker exec -i x kael-thread-rebuild --config=CONFIG hook-stop", True, True),
    ("kael-hook --container c --config CONFIG --state-dir STATE-moved", True, True),
    ("notify-send hook-stopped --config CONFIG", False, False),  # a word, not a substring
    ("kael-thread-rebuild --config OTHER hook-stop", False, False),
    ("kael-hook --container c --config NONE --state-dir STATE-other", False, False),
    ("kael-thread-rebuild hook-stop", True, False),  # $KAEL_REBUILD_CONFIG: not known from here
    ("kael-thread-rebuild --config NONE hook-stop", True, False),
]


@pytest.mark.parametrize(("command", "doctor_ours", "installer_ours"), HOOK_CASES)
def test_one_definition_of_our_hook_for_the_installer_and_doctor(
        tmp_path: Path, command: str, doctor_ours: bool, installer_ours: bool) -> None:
    """The doctor's stop_hook check and the installer's merge (the role's copy of the module)
    read the same settings.json alike: a hook the installer would replace as ours, the doctor
    accepts; the doctor also accepts a hook nothing in which names another instance, which the
    installer leaves alone (it never removes a user's entry on a guess)."""
    etc, state, claude = tmp_path / "etc", tmp_path / "state", tmp_path / "claude"
    for folder in (etc, state, claude):
        folder.mkdir()
    config = etc / "x.toml"
    config.write_text(f'instance = "x"\nproject_dir = "{tmp_path}"\nstate_dir = "{state}"\n')
    (etc / "link.toml").symlink_to(config)
    (etc / "other.toml").write_text(f'instance = "y"\nproject_dir = "{tmp_path}"\n'
                                    f'state_dir = "{tmp_path / "state-y"}"\n')
    names = {"CONFIG": str(config), "LINK": str(etc / "link.toml"),
             "OTHER": str(etc / "other.toml"), "NONE": str(etc / "none.toml"), "STATE": str(state)}
    for name, value in names.items():
        command = command.replace(name, value)
    ours = HOOK.replace("/etc/k/x.toml", str(config)).replace("/var/lib/k/x", str(state))

    settings = {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": command}]}]}}
    (claude / "settings.json").write_text(json.dumps(settings))
    facts = Facts(parse_config({"instance": "x", "project_dir": str(tmp_path),
                                "state_dir": str(state), "claude_config_dir": str(claude)}),
                  datetime.now(UTC), timedelta(minutes=5), {CONFIG_ENV: str(config)})
    check = check_stop_hook(facts)
    assert check.ok is doctor_ours, check.detail

    change = settings_utils.install(json.dumps(settings), ours, 10)
    assert stop_commands(change.data) == ([ours] if installer_ours else [command, ours])
    assert settings_utils.hook_present(settings, ours) is installer_ours
    back = settings_utils.uninstall(json.dumps(settings), ours)
    assert stop_commands(back.data) == ([] if installer_ours else [command])


def test_an_unreadable_record_stops_and_leaves_the_file(run_module: RunModule,
                                                        settings: Path) -> None:
    write(settings, FOREIGN_SETTINGS)
    merge(run_module, settings)
    installed = settings.read_bytes()
    record = settings.parent.parent / "backups" / "settings.json.added.json"
    record.write_text("{ not json")
    result = merge(run_module, settings, state="absent")
    assert result["failed"] and "record of what install added" in result["msg"]
    assert settings.read_bytes() == installed
    record.write_text('{"created": [1], "permissions": "x", "hook_command": 3}')  # odd shapes
    assert not merge(run_module, settings, state="absent").get("failed")
