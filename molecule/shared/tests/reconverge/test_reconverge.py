"""Re-converges after the drill, as a household meets them: the first re-run after a switch
repairs a settings.json that lost `hooks` and changes nothing else; a config change recreates the
daemon before doctor judges it, and the same run again changes nothing. Each run is the real
playbook from the control machine, over every household of the scenario."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Any

from conftest import (
    SERVER,
    config_of,
    daemon_of,
    home_of,
    instances,
    read_json,
    run_playbook,
)


def ours(settings: dict[str, Any]) -> list[dict[str, Any]]:
    return [g for g in settings.get("hooks", {}).get("Stop", [])
            if any("kael-hook" in str(h.get("command")) for h in g.get("hooks") or [])]


def test_after_the_switch_a_settings_file_that_lost_hooks_is_all_a_rerun_repairs(
        all_hosts: list[Any]) -> None:
    """The first run after the drill's switch and rollback: it changes exactly the settings of
    each instance with a hook of ours (which lost `hooks`), nothing else on any host (so the
    switch left nothing for the installer to redo)."""
    for host in all_hosts:
        for place in instances(host):
            path = f"{home_of(host, place['user'])}/.claude/settings.json"
            # Claude Code rewrote the file without `hooks`, as the user.
            broken = host.run("runuser -u %s -- python3 -c %s %s", place["user"],
                              "import json, sys; p = sys.argv[1]; d = json.load(open(p)); "
                              "d.pop('hooks'); open(p, 'w').write(json.dumps(d, indent=2))",
                              path)
            assert broken.rc == 0, broken.stderr
    repaired = run_playbook("install.yml")
    for host in all_hosts:
        hooked = [p for p in instances(host) if p["base"] != "pointer"]
        assert repaired.failed(host) == 0, repaired.tail()
        # The advisor's prompt hook went with `hooks` too: its task puts it back.
        advised = {e["user"] for e in host.ansible.get_variables().get("kael_advisor", [])}
        assert repaired.changed(host) == len(hooked) + len(advised), repaired.tail()
        for place in instances(host):
            settings = read_json(host, f"{home_of(host, place['user'])}/.claude/settings.json")
            if place not in hooked:  # no hook of ours to put back: the user's choice stays
                assert "hooks" not in settings, settings
                continue
            (group,) = ours(settings)
            assert len(group["hooks"]) == 1 and list(settings["hooks"]) == \
                ["Stop", *(["UserPromptSubmit"] if place["user"] in advised else [])]


#: The play's config change: every instance gets it unless its own `config` in the inventory
#: names the key (the role's `combine(kael_config, kael_instance.config)`: the instance wins).
CHANGE = {"dirty_budget_bytes": 2097152}


def effective_config(host: Any, instance: str, play: dict[str, Any]) -> dict[str, Any]:
    """The keys of PLAY as INSTANCE on HOST gets them: its inventory entry's own config wins."""
    (entry,) = [i for i in host.ansible.get_variables()["kael_instances"]
                if i["name"] == instance]
    own = entry.get("config") or {}
    return {key: own.get(key, value) for key, value in play.items()}


def test_a_config_change_recreates_the_daemon_before_doctor_judges(all_hosts: list[Any]) -> None:
    """Each instance ends with its effective value; a daemon whose config changed is recreated
    (and reads the new file) before doctor judges, one whose config stayed is left running."""
    before = {(host.backend.get_hostname(), place["instance"]):
              (config_of(host, place["instance"]), daemon_of(host, place["instance"])["State"])
              for host in all_hosts for place in instances(host)}
    changed = run_playbook("install.yml", "-e", json.dumps({"kael_config": CHANGE}))
    recreated: dict[str, int] = {}
    for host in all_hosts:
        recreated[host.backend.get_hostname()] = 0
        assert changed.failed(host) == 0, changed.tail()
        for place in instances(host):
            name, path = place["instance"], f"/etc/kael-thread-rebuild/{place['instance']}.toml"
            wanted = effective_config(host, name, CHANGE)
            config, text = config_of(host, name), host.file(path).content_string
            assert {key: config[key] for key in wanted} == wanted, (name, config)
            old_config, old_state = before[(host.backend.get_hostname(), name)]
            daemon = daemon_of(host, name)
            assert daemon["Config"]["Labels"]["io.kael-thread-rebuild.config-sha256"] == \
                hashlib.sha256(text.encode()).hexdigest(), name
            if config == old_config:  # nothing to apply: the running daemon is left alone
                assert daemon["State"]["StartedAt"] == old_state["StartedAt"], name
                continue
            recreated[host.backend.get_hostname()] += 1
            started = datetime.fromisoformat(daemon["State"]["StartedAt"][:26] + "+00:00")
            assert started >= host.file(path).mtime.astimezone(), (name, daemon["State"])
            # The daemon itself reads the new file (a file mount replaced by rename would not).
            seen = host.run("docker exec %s cat %s", f"{SERVER}-{name}", path)
            assert seen.rc == 0 and seen.stdout == text, seen.stdout + seen.stderr
    assert sum(recreated.values()), "the change reached no instance: nothing was proven"
    judged = changed.out.index("Judge the doctor")
    assert changed.out.rfind("TASK [kael.appliance.kael_appliance : Run the daemon", 0, judged) >= 0
    assert "RUNNING HANDLER" not in changed.out



def test_the_same_change_again_changes_nothing(all_hosts: list[Any]) -> None:
    """After the change above, the same run again: nothing was left for a later run to apply
    (a daemon that kept its old config would be recreated now)."""
    again = run_playbook("install.yml", "-e", json.dumps({"kael_config": CHANGE}))
    for host in all_hosts:
        assert (again.failed(host), again.changed(host)) == (0, 0), again.tail()
        for place in instances(host):
            wanted = effective_config(host, place["instance"], CHANGE)
            config = config_of(host, place["instance"])
            assert {key: config[key] for key in wanted} == wanted, (place["instance"], config)
