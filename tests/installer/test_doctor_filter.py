"""The installer's doctor filters: failing checks fail the host; checks that pass with a warning
are shown (the play warns and, for mcp_loaded, its last message says what to do), never hidden."""

from __future__ import annotations

from types import ModuleType

import pytest

from kael_thread_rebuild.doctor.model import DoctorReport, failed, passed, skipped, warned
from tests.installer.conftest import load_filters


@pytest.fixture(scope="module")
def filters() -> ModuleType:
    return load_filters("kael")


def report(*checks: object) -> dict[str, object]:
    """A doctor report as the installer reads it: `doctor --json`."""
    built = DoctorReport.model_validate({"ok": True, "checks": checks})
    built.ok = all(c.ok for c in built.checks)
    return built.model_dump(mode="json")


def test_warnings_are_shown_and_do_not_fail(filters: ModuleType) -> None:
    green = report(passed("target", "pane"),
                   warned("mcp_loaded", "not loaded", "restart it with --continue"),
                   skipped("versions", "no host"))
    assert green["ok"]
    assert filters.kael_doctor_failures(green) == []
    assert filters.kael_doctor_warnings(green) == [
        "mcp_loaded: not loaded; fix: restart it with --continue"]
    assert filters.kael_doctor_failures(green, summary=True) == \
        "1 ok, warnings: mcp_loaded, skipped: versions"


def test_failures_still_fail_and_are_no_warnings(filters: ModuleType) -> None:
    red = report(failed("mcp_server", "not registered", "claude mcp add"),
                 warned("claude_version", "2.1.331 not verified", "verify it"))
    assert not red["ok"]
    assert filters.kael_doctor_failures(red) == ["mcp_server: not registered; fix: claude mcp add"]
    assert filters.kael_doctor_warnings(red) == [
        "claude_version: 2.1.331 not verified; fix: verify it"]
    assert filters.kael_doctor_warnings({"no": "report"}) == []
