"""The checks in the order they are shown, and running them all."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta

from ..config import Config
from ..errors import KaelError
from ..operations.model import utcnow
from .daemon import check_daemon
from .engine import check_engine
from .facts import Facts
from .files import check_claude_workdir, check_operations, check_project_dir, check_state_dir
from .hooks import check_hook_delivery, check_stop_hook
from .host import check_claude_access, check_mcp_containers, check_versions
from .mcp import check_mcp_server
from .mcp_live import check_mcp_loaded
from .model import Check, DoctorReport, failed
from .resume import check_resume_command, check_resume_start
from .target import check_activation, check_claude_version, check_session, check_target

#: An unsettled operation that has not changed for this long is reported as stuck.
STUCK_AFTER = timedelta(minutes=10)

CheckFn = Callable[[Facts], Check]

#: The checks, in the order they are shown. The last three need the host's facts.
CHECKS: tuple[CheckFn, ...] = (
    check_project_dir,
    check_claude_workdir,
    check_state_dir,
    check_daemon,
    check_target,
    check_activation,
    check_session,
    check_resume_command,
    check_resume_start,
    check_claude_version,
    check_stop_hook,
    check_hook_delivery,
    check_mcp_server,
    check_mcp_loaded,
    check_operations,
    check_engine,
    check_mcp_containers,
    check_versions,
    check_claude_access,
)


def run_doctor(config: Config, *, checks: Sequence[CheckFn] = CHECKS,
               now: datetime | None = None, stuck_after: timedelta = STUCK_AFTER,
               environ: Mapping[str, str] | None = None) -> DoctorReport:
    """Every check against CONFIG; ENVIRON (default: this process's) may name the config file,
    the host's facts and the paths this container does not mount. Nothing is ever written."""
    facts = Facts(config, now or utcnow(), stuck_after,
                  os.environ if environ is None else environ)
    results = []
    for check in checks:
        try:
            results.append(check(facts))
        except (KaelError, OSError, ValueError) as exc:
            name = check.__name__.removeprefix("check_")
            results.append(failed(name, f"the check itself failed: {type(exc).__name__}: {exc}",
                                  "report this; the other checks still ran"))
    return DoctorReport(ok=all(c.ok for c in results), checks=results)
