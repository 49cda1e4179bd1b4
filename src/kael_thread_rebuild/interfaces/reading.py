"""The actions that read a transcript, `plan` and `dirty`, in a module of their own: the command
line imports only this one for them (not the whole table, `actions`), so that they start
reading sooner."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, Field

from ..plan_report import DirtyReport, PlanReport
from .action_model import Action, Call, Cli, Tool
from .checked_reading import plan_of
from .output import emit

Transcript = Annotated[str | None, Field(
    description="a transcript inside project_dir; default: the newest session transcript"), Cli(
    "the transcript to read (inside project_dir); default: the newest transcript in "
    "project_dir that is not a candidate")]


class TranscriptInput(BaseModel):
    transcript: Transcript = None


def _plan(call: Call, given: TranscriptInput) -> PlanReport:
    return plan_of(call.config, given.transcript, call.started).report


def _dirty(call: Call, given: TranscriptInput) -> DirtyReport:
    return _plan(call, given).dirty


def show_report(report: BaseModel, as_json: bool) -> int:
    """`plan`, `dirty`: the report as aligned lines, or JSON."""
    emit(report, as_json)
    return 0


DIRTY: Action[Any, Any] = Action(
    "dirty", "runtime bytes by category and whether to rebuild",
    "Report the runtime bytes (tool results, tool calls, thinking, images, injections, "
    "attachments, sidechains, system) against dirty_budget_bytes, and whether a rebuild is "
    "advised. It only advises; it never requests.",
    TranscriptInput, DirtyReport, changes=False, run=_dirty, show=show_report,
    tool=Tool("thread_rebuild_dirty", "Runtime bytes by category and whether a rebuild is "
              "advised (read-only; it never requests)."))
PLAN: Action[Any, Any] = Action(
    "plan", "show what a rebuild would carry (read-only)",
    "Read a transcript and report what a rebuild would carry: turns, speech by origin, the "
    "startup snapshot, budget, poison score, the dirty ledger and why it would be blocked. "
    "Changes nothing.",
    TranscriptInput, PlanReport, changes=False, run=_plan, show=show_report,
    tool=Tool("thread_rebuild_plan", "What a rebuild would carry and whether it is blocked "
              "(read-only). Show it to the human before any request."))

# The actions of this module (`cli` finds a command's action in the module the subcommands'
# snapshot names).
ACTIONS: tuple[Action[Any, Any], ...] = (DIRTY, PLAN)
