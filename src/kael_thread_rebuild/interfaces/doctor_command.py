"""The `doctor` command: one line per check, exit 1 when any check fails."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from ..config import Config
from .output import emit

if TYPE_CHECKING:
    from ..doctor import Check


def _status(check: Check) -> str:
    if not check.ok:
        return "FAIL"
    if check.warning:
        return "warn"
    return "skip" if check.skipped else "ok"


def format_lines(checks: list[Check]) -> list[str]:
    width = max((len(check.name) for check in checks), default=0)
    lines = []
    for check in checks:
        line = f"{_status(check):<4}  {check.name:<{width}}  {check.detail}"
        if (not check.ok or check.warning) and check.fix:
            line += f" — fix: {check.fix}"
        lines.append(line)
    return lines


def _doctor(config: Config, args: argparse.Namespace) -> int:
    from ..doctor import run_doctor  # imported on use: it pulls in every base

    report = run_doctor(config)
    if args.json:
        emit(report, True)
    else:
        sys.stdout.write("".join(f"{line}\n" for line in format_lines(report.checks)))
    return 0 if report.ok else 1


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser],
             parent: argparse.ArgumentParser) -> None:
    doctor = commands.add_parser(
        "doctor", parents=[parent], help="check everything a switch needs (read-only)",
        description="Check the project dir and workdir encoding, the state dir, the target and "
                    "the session it runs, that resume_command keeps every flag of the live "
                    "Claude Code, the Stop hook and whether its last calls reached the daemon, "
                    "the MCP registration and containers, image and daemon versions (with the "
                    "host's facts, see image/run-doctor.sh) and that no operation is stuck. One "
                    "line per check; `skip` means it cannot be known from here, `warn` that it "
                    "stops no switch but needs a look (a Claude Code version this project has "
                    "not verified). It changes nothing, ever: a stuck operation is reported with "
                    "its fix (`recover`). Exit 1 when any check fails.")
    doctor.set_defaults(handler=_doctor)
