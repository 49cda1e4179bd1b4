"""A run that wrote a changed config and then failed before the daemon took it (here the image
it was told to load is not where it said) leaves the old daemon running on the old config; the
next run must recreate the daemon with the config on disk, not report 0 changed with the stale
config live. Run by the tmux scenario on the installed household, after the re-converge."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Any

from conftest import SERVER, config_of, daemon_of, instances, run_playbook

CHANGE = {"dirty_budget_bytes": 3145728}
#: A run that changes the config, then cannot install the image: the archive it names is missing.
BROKEN = {"kael_config": CHANGE, "kael_image": "kael-thread-rebuild:missing-DO-NOT-CREATE",
          "kael_image_archive": "/nonexistent/kael-thread-rebuild-DO-NOT-CREATE.tar.gz"}


def config_digest(host: Any, instance: str) -> tuple[str, str]:
    text = host.file(f"/etc/kael-thread-rebuild/{instance}.toml").content_string
    return text, hashlib.sha256(text.encode()).hexdigest()


def test_the_run_after_a_failed_config_change_starts_the_daemon_on_the_new_config(
        all_hosts: list[Any]) -> None:
    before = {(host.backend.get_hostname(), place["instance"]):
              daemon_of(host, place["instance"])["State"]["StartedAt"]
              for host in all_hosts for place in instances(host)}
    broken = run_playbook("install.yml", "-e", json.dumps(BROKEN))
    for host in all_hosts:
        assert broken.failed(host) == 1, broken.tail()
        for place in instances(host):
            name = place["instance"]
            # What the failed run left: the new config on disk, the old daemon still running.
            assert config_of(host, name)["dirty_budget_bytes"] == CHANGE["dirty_budget_bytes"]
            daemon = daemon_of(host, name)
            assert daemon["State"]["StartedAt"] == before[(host.backend.get_hostname(), name)]
            assert daemon["Config"]["Labels"]["io.kael-thread-rebuild.config-sha256"] != \
                config_digest(host, name)[1]
    rerun = run_playbook("install.yml", "-e", json.dumps({"kael_config": CHANGE}))
    for host in all_hosts:
        assert rerun.failed(host) == 0 and rerun.changed(host) > 0, rerun.tail()
        for place in instances(host):
            name = place["instance"]
            text, digest = config_digest(host, name)
            daemon = daemon_of(host, name)
            assert daemon["Config"]["Labels"]["io.kael-thread-rebuild.config-sha256"] == digest
            started = datetime.fromisoformat(daemon["State"]["StartedAt"][:26] + "+00:00")
            path = f"/etc/kael-thread-rebuild/{name}.toml"
            assert started >= host.file(path).mtime.astimezone(), daemon["State"]
            seen = host.run("docker exec %s cat %s", f"{SERVER}-{name}", path)
            assert seen.rc == 0 and seen.stdout == text, seen.stdout + seen.stderr
    # The daemon ran on the new config before doctor judged it.
    judged = rerun.out.index("Judge the doctor")
    assert rerun.out.rfind("TASK [kael.appliance.kael_appliance : Run the daemon", 0, judged) >= 0
