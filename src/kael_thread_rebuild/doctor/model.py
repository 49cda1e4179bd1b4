"""What a check returns, and the report of them all."""

from __future__ import annotations

from pydantic import BaseModel


class Check(BaseModel):
    name: str
    ok: bool
    detail: str
    fix: str = ""
    skipped: bool = False  # not knowable from here; `ok` stays true
    warning: bool = False  # worth acting on, but no reason to refuse a switch; `ok` stays true


class DoctorReport(BaseModel):
    ok: bool
    checks: list[Check]


def passed(name: str, detail: str) -> Check:
    return Check(name=name, ok=True, detail=detail)


def failed(name: str, detail: str, fix: str) -> Check:
    return Check(name=name, ok=False, detail=detail, fix=fix)


def skipped(name: str, detail: str) -> Check:
    return Check(name=name, ok=True, detail=detail, skipped=True)


def warned(name: str, detail: str, fix: str) -> Check:
    return Check(name=name, ok=True, detail=detail, fix=fix, warning=True)
