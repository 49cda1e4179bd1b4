"""Uninstall, and its verify: exactly what the install put in goes, the user's own settings and
MCP servers stay as they were, the state dir stays until kael_purge_state (even given as a
string on the command line), and a second uninstall changes nothing."""

from __future__ import annotations

import json
from typing import Any

from conftest import PRISTINE, READ_ONLY, home_of, instances, read_json, run_playbook


def settings_files(host: Any) -> dict[str, str]:
    return {place["instance"]: host.file(
        f"{home_of(host, place['user'])}/.claude/settings.json").content_string
        for place in instances(host)}


def test_uninstall_in_check_mode_says_what_it_would_do_and_changes_nothing(
        all_hosts: list[Any]) -> None:
    before = {host.backend.get_hostname(): settings_files(host) for host in all_hosts}
    dry = run_playbook("uninstall.yml", "--check")
    for host in all_hosts:
        assert dry.failed(host) == 0 and dry.changed(host) > 0, dry.tail()
        assert settings_files(host) == before[host.backend.get_hostname()]
        assert host.file("/etc/kael-thread-rebuild").is_directory


def test_uninstall_takes_out_what_the_install_put_in(all_hosts: list[Any]) -> None:
    gone = run_playbook("uninstall.yml")
    for host in all_hosts:
        assert gone.failed(host) == 0 and gone.changed(host) > 0, gone.tail()
        for place in instances(host):
            home = home_of(host, place["user"])
            settings = read_json(host, f"{home}/.claude/settings.json")
            before = read_json(host, f"{PRISTINE}/.claude/settings.json")
            assert "kael-hook" not in json.dumps(settings.get("hooks", {}))
            assert settings["permissions"] == before["permissions"]
            assert not set(READ_ONLY) & set(settings["permissions"]["allow"])
            assert {k: v for k, v in settings.items() if k != "hooks"} == \
                {k: v for k, v in before.items() if k != "hooks"}
            state = read_json(host, f"{home}/.claude.json")
            assert state.get("mcpServers") == {}, state.get("mcpServers")  # as the user had it
            kept = f"/var/lib/kael-thread-rebuild/{place['instance']}/settings-backups"
            # The backups stay with the state dir; the first is the file as the user had it.
            first = min(n for n in host.file(kept).listdir() if n.endswith(".bak"))
            assert read_json(host, f"{kept}/{first}") == before, first
        left = host.run("docker ps -a -q --filter label=io.kael-thread-rebuild.role")
        assert left.rc == 0 and left.stdout.strip() == "", left.stdout
        for path in ("/usr/local/bin/kael-hook", "/usr/local/lib/kael-thread-rebuild",
                     "/etc/kael-thread-rebuild"):
            assert not host.file(path).exists, path


def test_purging_the_state_with_a_string_flag_leaves_nothing(all_hosts: list[Any]) -> None:
    purged = run_playbook("uninstall.yml", "-e", "kael_purge_state=true")
    again = run_playbook("uninstall.yml")
    for host in all_hosts:
        assert purged.failed(host) == 0, purged.tail()
        assert not host.file("/var/lib/kael-thread-rebuild").exists
        assert (again.failed(host), again.changed(host)) == (0, 0), again.tail()
