"""The five tools, declared once: names, inputs, descriptions, MCP hints and the permission
each gets in Claude Code. The MCP server (`mcp_tools`), the settings the installer merges
(`pieces`) and the docs' table are written from `TOOLS`; tests/advisor/test_tools.py checks
that they agree."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .errors import AdvisorError
from .modes import MODES
from .service import Advisor

# In UTF-8 bytes. The message goes to the Kimi Code CLI as one argument, which Linux caps at
# 128 KiB: the message, the goal and the mode's instruction stay below that together.
MAX_MESSAGE = 100_000
MAX_NAME = 200
MAX_GOAL = 20_000


class _Input(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _text(value: str, what: str, limit: int) -> str:
    if not value.strip():
        raise ValueError(f"the {what} is empty")
    size = len(value.encode("utf-8", "surrogatepass"))
    if size > limit:
        raise ValueError(f"the {what} is {size} bytes, more than {limit}")
    return value


class ConsultInput(_Input):
    message: str = Field(description="What to ask the advisor: the situation, the question, "
                         "and what you already know or tried.")
    mode: str | None = Field(
        default=None, json_schema_extra={"enum": [*sorted(MODES), None]},
        description="Optional wake point: blueprint (before building: a work order), unstick "
                    "(when stuck) or review (before calling work done).")
    task_id: str | None = Field(
        default=None, description="Optional: another task (its name or conversation id, see "
                                  "advisor_list_tasks) instead of this conversation's.")

    @field_validator("message")
    @classmethod
    def _message(cls, value: str) -> str:
        return _text(value, "message", MAX_MESSAGE)

    @field_validator("mode")
    @classmethod
    def _mode(cls, value: str | None) -> str | None:
        if value is not None and value not in MODES:
            raise ValueError(f"unknown mode {value!r}: use one of {', '.join(MODES)}")
        return value


class PollInput(_Input):
    task: str = Field(description="The consultation number advisor_consult returned, like t1.")


class CreateInput(_Input):
    name: str = Field(description="A short name for this conversation's advisor task.")
    goal: str | None = Field(default=None, description="Optional: the task's goal, given to "
                             "the advisor when its session starts (or is rebuilt).")
    force_new: bool = Field(default=False, description="Start a new Kimi session instead of "
                            "renaming and reusing this conversation's.")

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if "\n" in value:
            raise ValueError("the name must be one line")
        return _text(value, "name", MAX_NAME)

    @field_validator("goal")
    @classmethod
    def _goal(cls, value: str | None) -> str | None:
        return None if value is None else _text(value, "goal", MAX_GOAL)


class ListInput(_Input):
    pass


class CloseInput(_Input):
    task_id: str | None = Field(default=None, description="Optional: the task to close (its "
                                "name or conversation id); default: this conversation's.")


@dataclass(frozen=True)
class AdvisorTool:
    """One tool: PERMISSION is what Claude Code's settings give it (allow: no question asked);
    READ_ONLY and OPEN_WORLD are the MCP hints (a consultation reaches the advisor's
    provider)."""

    name: str
    summary: str
    description: str
    input: type[BaseModel]
    permission: Literal["allow", "ask"]
    read_only: bool
    open_world: bool
    run: Callable[[Advisor, Any], str]

    def call(self, advisor: Advisor, given: dict[str, Any]) -> str:
        """Check GIVEN and run the tool; bad input is one line (`AdvisorError`)."""
        try:
            checked = self.input.model_validate(given)
        except ValidationError as exc:
            raise AdvisorError(input_problem(exc)) from None
        return self.run(advisor, checked)


def input_problem(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first["loc"])
    message = str(first["msg"]).removeprefix("Value error, ")
    return f"{where}: {message}" if where else message


TOOLS: tuple[AdvisorTool, ...] = (
    AdvisorTool(
        "advisor_consult", "ask the advisor (returns at once; poll for the answer)",
        "Consult the expensive advisor (Kimi Code) at a wake point: blueprint before building, "
        "unstick when stuck, review before calling work done. It continues this conversation's "
        "advisor session (one is created by the first consultation), starts in the background "
        "and returns a number at once: then call advisor_poll with it until the answer is "
        "there, doing nothing else meanwhile.",
        ConsultInput, "ask", read_only=False, open_world=True,
        run=lambda advisor, given: advisor.consult(given.message, given.mode, given.task_id)),
    AdvisorTool(
        "advisor_poll", "a consultation's state or answer",
        "The state of a consultation: still running (with the seconds so far), the advisor's "
        "whole answer (with its tool actions and any note), failed (why) or interrupted.",
        PollInput, "allow", read_only=True, open_world=False,
        run=lambda advisor, given: advisor.poll(given.task)),
    AdvisorTool(
        "advisor_create_task", "name this conversation's advisor task",
        "Optional: name (or rename) this conversation's advisor task and preset its goal. A "
        "second create renames the task and keeps its advisor session unless force_new.",
        CreateInput, "ask", read_only=False, open_world=False,
        run=lambda advisor, given: advisor.create_task(given.name, given.goal,
                                                       given.force_new)),
    AdvisorTool(
        "advisor_list_tasks", "this project's advisor tasks",
        "This project's advisor tasks: name, status, advisor session, last used, "
        "consultations and their cost where known.",
        ListInput, "allow", read_only=True, open_world=False,
        run=lambda advisor, given: advisor.list_tasks()),
    AdvisorTool(
        "advisor_close_task", "close an advisor task",
        "Close this conversation's advisor task (or task_id's). Its advisor session is kept "
        "and can be read later; the next consultation here opens a new task.",
        CloseInput, "ask", read_only=False, open_world=False,
        run=lambda advisor, given: advisor.close_task(given.task_id)),
)


def tool(name: str) -> AdvisorTool:
    return next(found for found in TOOLS if found.name == name)
