"""What one action is: the shape of the table in `actions`.

An action is declared once; the command line (`cli`), the MCP tools (`mcp_tools`) and the
installer's permission list (the collection's generated `kael_mcp_tools.py`) are built from it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from ..config import Config

if TYPE_CHECKING:
    from ..conversation.scan import SecondHalf

In = TypeVar("In", bound=BaseModel)
Out = TypeVar("Out", bound=BaseModel)


@dataclass(frozen=True)
class Cli:
    """How an input field is spelled on the command line (in `Annotated[...]` beside its
    `Field`). FLAG defaults to `--` and the field name with dashes; METAVAR to the name in
    capitals; HELP is what `--help` says (the field's description is what the model reads)."""

    help: str
    flag: str | None = None
    metavar: str | None = None


@dataclass(frozen=True)
class Call:
    """Who calls an action, with what: the loaded config, the `--config` text as given (None:
    from the environment), the interface ("cli" or "mcp") and a transcript read already under
    way (the CLI's `prestart`)."""

    config: Config
    via: str
    config_path: str | None = None
    started: SecondHalf | None = None


class Nothing(BaseModel):
    """The output of an action that reports nothing (it logs instead)."""


@dataclass(frozen=True)
class Tool:
    """An action's MCP face: the tool name, what the model reads about it, and the tool's
    result made from the action's output (OUTPUT None: the action's output as it is)."""

    name: str
    description: str
    output: type[BaseModel] | None = None
    view: Callable[[Any], BaseModel] | None = None


@dataclass(frozen=True)
class Action(Generic[In, Out]):
    """One action: NAME is the CLI subcommand; SUMMARY and DESCRIPTION its help; INPUT and
    OUTPUT its models; CHANGES whether it changes anything (an MCP tool that does is marked
    destructive and keeps asking the human); CONFIRMATION the exact word it needs; RUN the
    service function; SHOW the human formatter (and `--json`), returning the exit code; TOOL
    its MCP face, if any."""

    name: str
    summary: str
    description: str
    input: type[In]
    output: type[Out]
    changes: bool
    run: Callable[[Call, In], Out]
    show: Callable[[Out, bool], int]
    confirmation: str | None = None
    tool: Tool | None = None

    def fields(self) -> Iterator[tuple[str, FieldInfo, Cli]]:
        """The input fields with their command-line spelling, in declaration order."""
        for name, field in self.input.model_fields.items():
            cli = next((m for m in field.metadata if isinstance(m, Cli)), None)
            if cli is None:
                raise TypeError(f"{self.input.__name__}.{name} has no Cli(...) spelling")
            yield name, field, cli

    def tool_output(self) -> type[BaseModel]:
        """The model the MCP tool returns."""
        if self.tool is None:
            raise ValueError(f"{self.name} is not an MCP tool")
        return self.tool.output or self.output

    def answer(self, call: Call, given: dict[str, Any]) -> BaseModel:
        """Run the action for the MCP server: its input checked by the model, its result as
        the tool returns it."""
        out = self.run(call, self.input.model_validate(given))
        view = self.tool.view if self.tool is not None else None
        return view(out) if view is not None else out
