"""Filters of the fleet report (run on the control machine): a row per instance, the table."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

VERSION_LABEL = "org.opencontainers.image.version"
SETTLED = frozenset({"activated", "cancelled", "failed", "rolled_back"})
#: The doctor's checks that show drift, and how the report names it.
DRIFT_CHECKS = {"claude_version": "Claude Code {version} not verified",
                "stop_hook": "settings lost the Stop hook",
                "daemon": "daemon not running"}
COLUMNS = ("household", "instance", "base", "appliance", "claude code", "dirty", "last operation",
           "doctor", "advisor", "drift")


def _json(result: dict[str, Any]) -> Any:
    if result.get("rc") != 0 or not str(result.get("stdout", "")).startswith(("{", "[")):
        return None
    return json.loads(result["stdout"])


def _checks(report: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    return {check["name"]: check for check in (report or {}).get("checks", [])}


def _claude(checks: dict[str, dict[str, Any]]) -> dict[str, Any]:
    check = checks.get("claude_version")
    if check is None or check.get("skipped"):
        return {"version": None, "verified": None}
    found = re.search(r"Claude Code (\d[\w.+-]*)", check.get("detail", ""))
    return {"version": found.group(1) if found else None,
            "verified": bool(check["ok"] and not check.get("warning"))}


def _last(history: Any) -> dict[str, Any] | None:
    operations = (history or {}).get("operations") or []
    if not operations:
        return None
    op = operations[-1]
    return {"operation_id": op["operation_id"], "status": op["status"],
            "in_flight": op["status"] not in SETTLED, "updated_at": op["updated_at"]}


def _dirty(dirty: Any) -> dict[str, Any] | None:
    if not dirty:
        return None
    budget = dirty.get("dirty_budget_bytes") or 0
    return {"runtime_bytes": dirty["total_bytes"], "budget_bytes": budget,
            "share": round(dirty["total_bytes"] / budget, 4) if budget else None,
            "should_rebuild": dirty.get("should_rebuild", False)}


def kael_status_row(item: dict[str, Any], household: str, daemon: dict[str, Any],
                    engine: list[dict[str, Any]], report: dict[str, Any] | None,
                    advisors: list[dict[str, Any]]) -> dict[str, Any]:
    """One instance's row: only versions, counts, states and the doctor's lines (no secret, no
    conversation text)."""
    inspected = _json(daemon)
    container = inspected[0] if inspected else None
    answers = {result.get("kael_command"): _json(result) for result in engine
               if not result.get("skipped")}
    checks = _checks(report)
    claude = _claude(checks)
    running = bool(container and container["State"]["Running"])
    drift = []
    for name, text in DRIFT_CHECKS.items():
        check = checks.get(name)
        bad = check is not None and not check.get("skipped") and (
            not check["ok"] or bool(check.get("warning")))
        if name == "daemon":
            bad = bad or not running
        if bad:
            drift.append({"what": text.format(version=claude["version"] or "?"),
                          "fix": (check or {}).get("fix") or (
                              f"start it: docker start {item['container']} (or run "
                              "playbooks/install.yml)")})
    failed = [c for c in checks.values() if not c["ok"] and not c.get("skipped")]
    return {
        "household": household, "reachable": True, "problem": None,
        "instance": item["name"], "base": item.get("base"),
        "appliance": {
            "image": container["Config"]["Image"] if container else None,
            "version": ((container["Config"].get("Labels") or {}).get(VERSION_LABEL)
                        if container else None),
            "running": running},
        "claude_code": claude,
        "dirty": _dirty(answers.get("dirty")),
        "last_operation": _last(answers.get("history")),
        "doctor": {"ok": None if report is None else bool(report.get("ok")),
                   "failed": [f"{c['name']}: {c['detail']}"
                              + (f" Fix: {c['fix']}" if c.get("fix") else "")
                              for c in failed],
                   "warnings": [c["name"] for c in checks.values() if c.get("warning")]},
        "advisor": any(entry.get("user") == item.get("claude_user")
                       and entry.get("state", "present") != "absent" for entry in advisors),
        "drift": drift,
    }


def kael_status_rows(households: list[str], hostvars: Any, now: str) -> list[dict[str, Any]]:
    """Every household's rows; a household that did not report is one row saying why. Each
    last operation gets its age in seconds at NOW (ISO 8601)."""
    at = datetime.fromisoformat(now.replace("Z", "+00:00"))
    at = at if at.tzinfo else at.replace(tzinfo=UTC)
    rows: list[dict[str, Any]] = []
    for household in households:
        facts = hostvars[household]
        if "kael_status_rows" not in facts:
            reached = bool(facts.get("kael_status_reached"))
            rows.append({"household": household, "reachable": reached,
                         "problem": ("failed before it reported (see the play's output)"
                                     if reached else "unreachable")})
            continue
        if not facts["kael_status_rows"]:
            rows.append({"household": household, "reachable": True,
                         "problem": "no instance installed"})
        for row in facts["kael_status_rows"]:
            last = row["last_operation"]
            if last is not None:
                updated = datetime.fromisoformat(last["updated_at"].replace("Z", "+00:00"))
                last = {**last, "age_seconds": max(int((at - updated).total_seconds()), 0)}
            rows.append({**row, "last_operation": last})
    return rows


def _age(seconds: int) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds // size} {unit}"
    return f"{seconds} s"


def _cells(row: dict[str, Any]) -> list[str]:
    if row.get("problem") and "instance" not in row:
        return [row["household"], "-", "-", "-", "-", "-", "-", "-", "-",
                row["problem"].upper() if not row["reachable"] else row["problem"]]
    app, claude, dirty = row["appliance"], row["claude_code"], row["dirty"]
    last, doctor = row["last_operation"], row["doctor"]
    return [
        row["household"], row["instance"], row["base"] or "?",
        f"{app['version'] or '?'}" + ("" if app["running"] else " (stopped)"),
        ("?" if claude["version"] is None else
         claude["version"] + (" verified" if claude["verified"] else " NOT VERIFIED")),
        "?" if dirty is None or dirty["share"] is None else
        f"{dirty['share']:.0%} of {dirty['budget_bytes'] // 1024} KiB",
        "none" if last is None else f"{last['status']}, {_age(last['age_seconds'])} ago",
        "?" if doctor["ok"] is None else (
            "green" if doctor["ok"]
            else "RED: " + ", ".join(f.split(":")[0] for f in doctor["failed"])),
        "on" if row["advisor"] else "off",
        "; ".join(d["what"].upper() for d in row["drift"]) or "-",
    ]


def kael_status_table(rows: list[dict[str, Any]]) -> list[str]:
    """The rows as an aligned text table, a header first; drift in capitals, and below the
    table what the doctor says to do about it."""
    cells = [list(COLUMNS)] + [_cells(row) for row in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(COLUMNS))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True))
             .rstrip() for line in cells]
    for row in rows:
        for drift in row.get("drift") or []:
            lines.append(f"{row['household']}/{row['instance']}: {drift['what']}. "
                         f"Fix: {drift['fix']}")
    return lines


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"kael_status_row": kael_status_row, "kael_status_rows": kael_status_rows,
                "kael_status_table": kael_status_table}
