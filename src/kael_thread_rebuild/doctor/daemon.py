"""The daemon: whether a process serves the state dir (holds its daemon lock, `reading.lock_held`),
asked the same way from the daemon's container, the MCP server's and doctor's one-off container,
or the host."""

from __future__ import annotations

from ..operations.model import WAITING, Operation
from ..operations.store import UntrustedStateDir
from .facts import Facts
from .files import open_store
from .model import Check, failed, passed, warned
from .reading import ago, lock_held


def start_fix(instance: str) -> str:
    """How the household starts its daemon again; its start settles what was left in flight."""
    return (f"start the daemon, whose start settles what was left in flight: with the appliance "
            f"`docker start kael-thread-rebuild-{instance}` (or image/run-daemon.sh --config "
            "<config>, or re-run the installer); without it `kael-thread-rebuild serve`")


def driven_by_daemon(op: Operation) -> bool:
    """Whether OP waits on the daemon (not on a Stop hook)."""
    return op.status not in WAITING


def check_daemon(facts: Facts) -> Check:
    """A daemon serves the state dir; one that does not is named first when an operation waits on
    it (a killed daemon container stays down: nothing restarts it)."""
    name, lock = "daemon", facts.config.layout.daemon_lock
    held = lock_held(lock)
    if held:
        return passed(name, f"a daemon serves {facts.config.state_dir} (it holds {lock.name})")
    why = (f"no daemon has ever served {facts.config.state_dir} (no {lock.name})" if held is None
           else f"no daemon serves {facts.config.state_dir}: nobody holds {lock}")
    try:
        store = open_store(facts.config.state_dir)
    except UntrustedStateDir:
        store = None  # the state_dir check says why
    left = [op for op in store.unsettled() if driven_by_daemon(op)] if store else []
    if left:
        shown = "; ".join(f"operation {op.operation_id} was left {op.status.value} "
                          f"{ago(facts.now - op.updated_at)} ago and nothing drives it"
                          for op in left)
        return failed(name, f"{why}; {shown}, so every request is refused until it is settled",
                      start_fix(facts.config.instance))
    return warned(name, f"{why}; a request would wait at `scheduled` until one starts",
                  start_fix(facts.config.instance))
