"""The worker daemon (`kael-thread-rebuild serve`): runs scheduled operations outside Claude's
process tree.

On start it settles whatever a previous worker left unsettled (`worker.recover`), then polls the
store for scheduled and rollback-scheduled operations and drives each one to a settled state.
One daemon per state dir: a lock file is held for the daemon's lifetime. `recover_once` (the
`recover` command) runs the same recovery without serving, when no daemon runs.

Stopping: the first SIGTERM/SIGINT (or `stop_event`) stops at the next step boundary of the
operation in hand, without finishing it; the second one stops at once. Either way the operation
is left exactly as a kill would leave it, and the next start's recovery settles it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

from filelock import FileLock, Timeout

from .config import Config
from .errors import KaelError, Refused
from .logline import append_line
from .operations import service
from .operations.model import RUNNABLE, IllegalTransition, Operation, OperationStatus
from .operations.store import FILE_MODE, OperationStore, Recovery, StrayFile
from .operations.worker import recover, run_operation
from .state_layout import OPERATIONS
from .switching.base import SwitchBase
from .switching.factory import make_base

#: How long a starting daemon waits for the lock (doctor's look at it takes microseconds).
LOCK_WAIT_SECONDS = 0.5
_WITH_ERROR = frozenset({OperationStatus.failed, OperationStatus.rolled_back})


class DaemonBusy(Refused):
    """Another daemon already serves this state dir."""


class _Stopping(BaseException):
    """Leave the operation in hand where it is (not an Exception: the worker must not catch it
    and settle the operation as failed)."""


class _StopRequest:
    def __init__(self, event: threading.Event) -> None:
        self.event = event
        self.signals = 0

    @property
    def requested(self) -> bool:
        return self.signals > 0 or self.event.is_set()

    def on_signal(self, signum: int, frame: FrameType | None) -> None:
        # Only a counter here: taking the event's lock inside a handler can deadlock.
        self.signals += 1
        if self.signals > 1:
            raise _Stopping


@contextlib.contextmanager
def _signals_handled(stop: _StopRequest) -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers can only be set from the main thread; stop_event still works
        return
    previous = {sig: signal.signal(sig, stop.on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


class _Journal:
    """`worker.log`: one line per transition the daemon sees happen, and its own events.

    Transitions are read back from the records' history (after each worker step), so the log
    shows what the store holds.
    """

    def __init__(self, store: OperationStore, path: Path) -> None:
        self.store = store
        self.path = path
        self.seen: dict[str, int] = {}
        self.last_problem = ""
        self.log_problem = ""

    def note(self, message: str) -> None:
        """Log MESSAGE; when the log cannot be written (disk full, I/O error), say so on stderr
        with the message, once per cause, and go on serving."""
        try:
            append_line(self.path, message)
        except OSError as exc:
            problem = f"cannot write {self.path}: {exc.strerror or exc}"
            if problem != self.log_problem:
                print(f"kael-thread-rebuild serve: {problem}", file=sys.stderr, flush=True)
                self.log_problem = problem
            print(f"kael-thread-rebuild serve: {' / '.join(message.splitlines())}",
                  file=sys.stderr, flush=True)
        else:
            self.log_problem = ""

    def problem(self, message: str) -> None:
        """Log MESSAGE unless it repeats the previous problem (a poll loop must not flood)."""
        if message != self.last_problem:
            self.note(message)
            self.last_problem = message

    def track(self, op: Operation) -> None:
        self.seen.setdefault(op.operation_id, len(op.history))

    def catch_up(self) -> None:
        for operation_id, logged in list(self.seen.items()):
            try:
                op = self.store.load(operation_id)
            except KaelError:
                continue
            for step in op.history[logged:]:
                line = (f"operation {operation_id}: {step.from_status.value} -> "
                        f"{step.to_status.value} ({step.note})")
                if step.to_status in _WITH_ERROR and op.error:
                    line += f": {op.error}"
                self.note(line)
            self.seen[operation_id] = len(op.history)
            if op.settled:
                del self.seen[operation_id]


class _Daemon:
    def __init__(self, config: Config, store: OperationStore, base: SwitchBase,
                 stop: _StopRequest) -> None:
        self.config = config
        self.store = store
        self.base = base
        self.stop = stop
        self.journal = _Journal(store, config.layout.worker_log)

    def on_step(self, name: str) -> None:
        self.journal.catch_up()
        if self.stop.requested:
            raise _Stopping

    def recover(self) -> list[Operation]:
        """Settle what a previous worker left (logged); a failure is logged, then raised."""
        try:
            for op in self.store.unsettled():
                self.journal.track(op)
            settled = recover(self.config, self.store, self.base, self.on_step)
        except KaelError as exc:
            self.journal.problem(f"recovery failed: {exc}")
            raise
        finally:
            self.journal.catch_up()
        if settled:
            self.journal.note(f"recovery settled {len(settled)} operation(s)")
        return settled

    def report_strays(self, strays: list[StrayFile]) -> None:
        if strays:
            self.journal.problem(f"skipped {len(strays)} file(s) in {OPERATIONS}/ that are not "
                                 "operation records: " + "; ".join(
                                     f"{stray.name} ({stray.problem})" for stray in strays))

    def run_pass(self) -> None:
        """Run every operation that is ready, oldest first."""
        try:
            scan = self.store.scan(unsettled_only=True)
        except (KaelError, OSError) as exc:
            self.journal.problem(f"cannot read the operation store: {exc}")
            return
        self.report_strays(scan.strays)
        if self.config.admin_confirm_minutes:
            self.take_confirmations()
        ready = [op for op in scan.operations if op.status in RUNNABLE]
        for op in ready:
            if self.stop.requested:
                return
            self.run_one(op)

    def take_confirmations(self) -> None:
        """Requests the admin confirmed go on to pending; unconfirmed ones expire (logged)."""
        try:
            changed = service.take_confirmations(self.config)
        except (KaelError, OSError) as exc:
            self.journal.problem(f"cannot take the admin's confirmations: {exc}")
            return
        for op in changed:
            self.journal.note(f"operation {op.operation_id}: awaiting_confirmation -> "
                              f"{op.status.value} ({op.history[-1].note})")

    def run_one(self, op: Operation) -> None:
        name = op.operation_id
        self.journal.track(op)
        try:
            run_operation(self.config, self.store, self.base, name, self.on_step)
        except (IllegalTransition, Refused) as exc:
            self.journal.note(f"operation {name}: not run: {exc}")  # claimed or changed meanwhile
        except KaelError as exc:
            self.journal.problem(f"operation {name}: {exc}")
        except Exception as exc:
            self.journal.problem(f"operation {name}: internal error: {type(exc).__name__}: {exc}")
        finally:
            self.journal.catch_up()

    def loop(self, once: bool) -> None:
        with contextlib.suppress(KaelError):  # logged; the daemon still serves
            self.recover()
        self.journal.note(f"daemon ready (pid {os.getpid()}): polling every "
                          f"{self.config.poll_interval_seconds:g} s")
        while not self.stop.requested:
            self.run_pass()
            if once:
                return
            self.stop.event.wait(self.config.poll_interval_seconds)


def worker_lock(config: Config) -> FileLock:
    """Take the lock that makes this process the only worker of the state dir, or raise
    DaemonBusy. Held by the daemon for its lifetime, and by the `recover` command. Waits a
    moment: doctor tries the lock to see whether a daemon serves, and lets it go at once."""
    lock_path = config.layout.daemon_lock
    lock = FileLock(lock_path, mode=FILE_MODE)
    try:
        lock.acquire(timeout=LOCK_WAIT_SECONDS, poll_interval=0.01)
    except Timeout:
        raise DaemonBusy(f"another daemon already serves state dir {config.state_dir} "
                         f"(it holds {lock_path})") from None
    return lock


def recover_once(config: Config) -> Recovery:
    """Run the recovery a daemon start runs, without serving (the `recover` command).

    Refused while a daemon serves the state dir: that daemon recovered on its start, and
    restarting it recovers again. Logs to worker.log like the daemon.
    """
    store = OperationStore(config.state_dir)
    try:
        lock = worker_lock(config)
    except DaemonBusy:
        raise DaemonBusy(f"a daemon serves state dir {config.state_dir}: it recovers on its "
                         "start; restart the daemon instead of running recover") from None
    try:
        daemon = _Daemon(config, store, make_base(config), _StopRequest(threading.Event()))
        daemon.journal.note(f"recover command (pid {os.getpid()}, base {daemon.base.name})")
        settled = daemon.recover()
        strays = store.scan().strays
        daemon.report_strays(strays)
        return Recovery(settled=settled, skipped=strays)
    finally:
        lock.release()


def serve(config: Config, *, once: bool = False,
          stop_event: threading.Event | None = None) -> None:
    """Recover, then run ready operations until stopped (after one pass with ONCE).

    Raises DaemonBusy when another daemon serves the state dir, KaelError when the switching
    base cannot be built.
    """
    store = OperationStore(config.state_dir)
    lock = worker_lock(config)
    stop = _StopRequest(stop_event or threading.Event())
    try:
        daemon = _Daemon(config, store, make_base(config), stop)
        daemon.journal.note(f"daemon started (pid {os.getpid()}, base {daemon.base.name})")
        with _signals_handled(stop), contextlib.suppress(_Stopping):
            daemon.loop(once)
        daemon.journal.catch_up()
        daemon.journal.note("daemon stopped")
    finally:
        lock.release()
