"""Installs that fail, on the household the uninstall left: an option the installer no longer
supports is refused before anything changes, and an install that failed at a late step (the
appliance up, the user's settings.json unreadable) is taken out by uninstall, which says what it
kept. Run by the tmux scenario after the uninstall's verify."""

from __future__ import annotations

from typing import Any

from conftest import daemon_of, home_of, instances, run_playbook

LEFT_BY_THE_APPLIANCE = ("/usr/local/bin/kael-hook", "/usr/local/lib/kael-thread-rebuild")


def test_the_docker_group_option_is_refused_before_anything_changes(
        all_hosts: list[Any]) -> None:
    refused = run_playbook("install.yml", "-e", "kael_add_to_docker_group=true")
    for host in all_hosts:
        assert (refused.failed(host), refused.changed(host)) == (1, 0), refused.tail()
        assert "kael_add_to_docker_group is no longer supported" in refused.out
        assert "is undefined" not in refused.out, refused.tail()
        assert not host.file("/etc/kael-thread-rebuild").exists


def as_user(host: Any, user: str, script: str, *args: str) -> None:
    done = host.run("runuser -u %s -- sh -c %s sh " + " ".join(["%s"] * len(args)),
                    user, script, *args)
    assert done.rc == 0, done.stderr


def test_uninstall_takes_out_an_install_that_failed_late(all_hosts: list[Any]) -> None:
    for host in all_hosts:
        for place in instances(host):
            path = f"{home_of(host, place['user'])}/.claude/settings.json"
            # The user left a stray brace in their settings (kept aside to put back later).
            as_user(host, place["user"], 'cp -p "$1" "$1.kael-test" && echo "}" >>"$1"', path)
    failed = run_playbook("install.yml")
    for host in all_hosts:
        assert failed.failed(host) == 1, failed.tail()
        for place in instances(host):
            name = place["instance"]
            # Failed after the appliance was up and before the install record was written.
            assert daemon_of(host, name)["State"]["Running"], name
            assert host.file(f"/etc/kael-thread-rebuild/{name}.toml").exists
            assert not host.file(f"/etc/kael-thread-rebuild/{name}.installed.json").exists
            path = f"{home_of(host, place['user'])}/.claude/settings.json"
            as_user(host, place["user"], 'mv "$1.kael-test" "$1"', path)
        for path in LEFT_BY_THE_APPLIANCE:
            assert host.file(path).exists, path
    gone = run_playbook("uninstall.yml")
    for host in all_hosts:
        assert gone.failed(host) == 0 and gone.changed(host) > 0, gone.tail()
        left = host.run("docker ps -a -q --filter label=io.kael-thread-rebuild.role")
        assert left.rc == 0 and left.stdout.strip() == "", left.stdout
        for path in (*LEFT_BY_THE_APPLIANCE, "/etc/kael-thread-rebuild"):
            assert not host.file(path).exists, path
        for place in instances(host):
            state_dir = f"/var/lib/kael-thread-rebuild/{place['instance']}"
            assert host.file(state_dir).is_directory
            assert f"uninstall kept on {host.backend.get_hostname()}: the state dirs " \
                   f"{state_dir} " in gone.out, gone.tail()
