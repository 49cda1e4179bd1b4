"""The actions' input models: each field with the description the model reads (MCP) and its
command-line spelling (`Cli`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, Field

from ..claude_code.settings import HOOK_TIMEOUT
from ..defaults import MAX_REASON_CHARS
from ..operations.service import CANCEL_WORD, REBUILD_WORD, RELOAD_WORD, ROLLBACK_WORD
from .action_model import Cli
from .reading import Transcript

DEFAULT_WAIT_SECONDS = 600.0

_OPERATION = "the operation_id a request returned"


def _operation(cli_default: str) -> Cli:
    return Cli(f"the operation id a request printed{cli_default}", "--operation", "ID")


RebuildWord = Annotated[str, Field(
    description=f"exactly {REBUILD_WORD}, only after the human agreed"),
    Cli(f"exactly {REBUILD_WORD}", "--confirm", "WORD")]
CancelWord = Annotated[str, Field(description=f"exactly {CANCEL_WORD}"),
                       Cli(f"exactly {CANCEL_WORD}", "--confirm", "WORD")]
RollbackWord = Annotated[str, Field(description=f"exactly {ROLLBACK_WORD}"),
                         Cli(f"exactly {ROLLBACK_WORD}", "--confirm", "WORD")]
ReloadWord = Annotated[str, Field(description=f"exactly {RELOAD_WORD}, only after the human "
                                              "agreed"),
                       Cli(f"exactly {RELOAD_WORD}", "--confirm", "WORD")]


class NoInput(BaseModel):
    pass


class CandidateInput(BaseModel):
    transcript: Transcript = None
    output_dir: Annotated[Path, Cli("an existing directory for the candidate and its manifest",
                                    metavar="DIR")]


class StatusInput(BaseModel):
    operation_id: Annotated[str | None, Field(
        description="default: the operation in flight, else the latest"),
        _operation("; default: the one in flight, else the latest")] = None


class RequestInput(BaseModel):
    reason: Annotated[str, Field(description="why the human wants the rebuild"), Cli(
        f"why the rebuild is wanted (at most {MAX_REASON_CHARS} characters)")]
    confirmation: RebuildWord


class ReloadInput(BaseModel):
    confirmation: ReloadWord


class CancelInput(BaseModel):
    operation_id: Annotated[str, Field(description=_OPERATION), _operation("")]
    confirmation: CancelWord


class ConfirmInput(BaseModel):
    operation_id: Annotated[str, _operation("")]
    rollback: Annotated[bool, Cli("confirm the rollback the operation awaits, not its "
                                  "rebuild")] = False


class RollbackInput(BaseModel):
    operation_id: Annotated[str, Field(description=_OPERATION), _operation("")]
    confirmation: RollbackWord


class WaitInput(BaseModel):
    operation_id: Annotated[str | None, _operation("; default: whatever is in flight")] = None
    timeout: Annotated[float, Cli(
        f"seconds to wait at most (default {DEFAULT_WAIT_SECONDS:g})", metavar="S")] = \
        DEFAULT_WAIT_SECONDS


class StartFailedInput(BaseModel):
    session: Annotated[str, Cli("the session id the failed call resumed", metavar="ID")]
    reason: Annotated[str, Cli("what failed, in one line")]


class ServeInput(BaseModel):
    once: Annotated[bool, Cli("recover and run what is ready once, then exit")] = False


class PiecesInput(BaseModel):
    hook_command: Annotated[str | None, Cli(
        "the Stop hook's command (default: kael-thread-rebuild --config PATH hook-stop; in the "
        "appliance: kael-hook --container NAME --config PATH --state-dir DIR)",
        metavar="TEXT")] = None
    mcp_command: Annotated[str | None, Cli(
        "the MCP server's command line (default: kael-thread-rebuild-mcp --config PATH; in "
        "the appliance: what image/mcp-command.sh prints, joined with spaces)",
        metavar="TEXT")] = None
    claude: Annotated[str, Cli("the Claude Code program in the printed command (default: "
                               "claude)", metavar="PROGRAM")] = "claude"
    hook_timeout: Annotated[int, Cli(f"the hook's timeout (default: {HOOK_TIMEOUT})",
                                     metavar="SECONDS")] = HOOK_TIMEOUT
