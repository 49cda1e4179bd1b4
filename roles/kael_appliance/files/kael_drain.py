"""Wait until an instance's daemon has no operation in flight, as the installer does before it
replaces that daemon (roles/kael_appliance/tasks/drain.yml). Run on the household as root:

    python3 kael_drain.py CONTAINER TIMEOUT POLL

It asks the daemon's own engine (`docker exec CONTAINER kael-thread-rebuild history --json`)
every POLL seconds and prints one JSON object: the seconds it waited, and the operation still in
flight when TIMEOUT passed (null when none was). Standard library only; exit 0 unless it cannot
ask at all.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

#: Nothing is in flight in these (activated is reopened only by a new rollback, which the drain
#: note refuses).
SETTLED = frozenset({"activated", "cancelled", "failed", "rolled_back"})


def running(container: str) -> bool:
    done = subprocess.run(["docker", "container", "inspect", "--format",
                           "{{.State.Running}} {{.State.Restarting}}", container],
                          capture_output=True, text=True, timeout=60, check=False)
    return done.stdout.split() == ["true", "false"]


def in_flight(container: str) -> dict[str, str] | None:
    """The operation in flight, None when there is none. A daemon that does not run (a broken
    one restarting) drives nothing: nothing it could cut is in flight."""
    if not running(container):
        return None
    done = subprocess.run(["docker", "exec", container, "kael-thread-rebuild", "history",
                           "--json"], capture_output=True, text=True, timeout=120, check=False)
    if done.returncode != 0 and not running(container):
        return None  # it stopped meanwhile
    if done.returncode != 0:
        raise RuntimeError(f"{container}: history failed: {done.stderr.strip()[:300]}")
    for op in reversed(json.loads(done.stdout)["operations"]):
        if op["status"] not in SETTLED:
            return {"operation_id": op["operation_id"], "status": op["status"]}
    return None


def main(container: str, timeout: float, poll: float) -> int:
    started = time.monotonic()
    seen: dict[str, str] | None = None
    while True:
        busy = in_flight(container)
        seen = busy or seen
        waited = time.monotonic() - started
        if busy is None or waited >= timeout:
            print(json.dumps({"waited": round(waited, 1), "busy": busy, "seen": seen}))
            return 0
        time.sleep(min(poll, max(timeout - waited, 0.0)))


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1], float(sys.argv[2]), float(sys.argv[3])))
    except (RuntimeError, OSError, ValueError, KeyError, subprocess.TimeoutExpired) as exc:
        print(f"kael_drain: {exc}", file=sys.stderr)
        sys.exit(1)
