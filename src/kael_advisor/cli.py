"""`kael-advisor`: look at the advisor by hand. `doctor` checks what a consultation needs,
`tasks` lists a project's bindings, `pieces` prints what Claude Code is given (settings block,
`claude mcp add` line, with --json the templates too; the docs' table of tools)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from kael_thread_rebuild.errors import one_line

from . import __version__
from .errors import AdvisorError

PROG = "kael-advisor"
DESCRIPTION = """\
The advisor: Claude Code consults a Kimi Code CLI advisor through the MCP server
kael-advisor-mcp (five tools), and kael-advisor-hook tells the server which Claude Code
conversation is speaking. This command looks at it by hand; it changes nothing.

environment:
  KAEL_ADVISOR_KIMI       the Kimi Code CLI program (default: kimi on the PATH)
  KIMI_CODE_HOME          the Kimi Code CLI's home: config.toml, sessions (default ~/.kimi-code)
  KAEL_ADVISOR_SESSIONS   the hook's directory (default: kael-advisor-sessions in
                          $CLAUDE_CONFIG_DIR or ~/.claude)
  KAEL_ADVISOR_IDLE_SECONDS  seconds without output before a run counts as hung (default 30)
"""


def _doctor(project: Path, as_json: bool, host_facts: str | None) -> int:
    if host_facts is None:
        from .doctor import checks

        found = checks(project)
    else:
        from pydantic import ValidationError

        from .host_doctor import AdvisorHost
        from .host_doctor import checks as host_checks

        try:
            host = AdvisorHost.model_validate_json(host_facts)
        except ValidationError as exc:
            raise AdvisorError(f"--host-facts: {exc}") from None
        found = host_checks(host)
    if as_json:
        print(json.dumps([dataclasses.asdict(check) for check in found], indent=2))
    else:
        for check in found:
            print(f"{check.status:4}  {check.name:8}  {one_line(check.detail)}")
    return 1 if any(check.status == "fail" for check in found) else 0


def _tasks(project: Path, as_json: bool) -> int:
    from .table import BindingTable

    table = BindingTable(project).read()
    if as_json:
        print(table.model_dump_json(indent=2))
        return 0
    from .service import Advisor

    print(Advisor(project).list_tasks())
    return 0


def _pieces(as_json: bool, what: str) -> int:
    from . import pieces
    from .places import claude_config_dir

    if what == "docs-table":
        print(pieces.docs_table(), end="")
    elif as_json or what == "settings":
        print(json.dumps(pieces.settings() if what == "settings" else
                         {"settings": pieces.settings(), "mcp_add": pieces.mcp_add_line(),
                          "templates": pieces.templates()}, indent=2, ensure_ascii=False))
    else:
        config = claude_config_dir()
        print(f"# merge into {config / 'settings.json'}:")
        print(json.dumps(pieces.settings(), indent=2))
        print("# register the MCP server:")
        print(pieces.mcp_add_line())
        print("\n".join(pieces.copy_lines(config)))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("--json", action="store_true", help="print JSON")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, text in (("doctor", "check the Kimi CLI, its provider, the agent, the hook's "
                        "directory and the project's binding table"),
                       ("tasks", "list a project's advisor tasks (bindings)")):
        sub = commands.add_parser(name, help=text, description=text)
        sub.add_argument("--project", type=Path, default=Path.cwd(),
                         help="the project (default: the working directory)")
        sub.add_argument("--json", action="store_true", help="print JSON")
        if name == "doctor":
            sub.add_argument("--host-facts", metavar="JSON",
                             help="check a Claude user's advisor as the installer left it on "
                             "the host instead of a project: what root gathered there "
                             "(roles/kael_doctor, advisor.yml), the user's files mounted")
    sub = commands.add_parser("pieces", help="what Claude Code is given: the settings block, "
                              "the claude mcp add line and the slash commands",
                              description="What Claude Code is given, written from the tools' "
                              "declaration.")
    sub.add_argument("what", nargs="?", choices=("all", "settings", "docs-table"),
                     default="all")
    sub.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args(argv)
    try:
        if args.command == "doctor":
            return _doctor(args.project.absolute(), args.json, args.host_facts)
        if args.command == "tasks":
            return _tasks(args.project.absolute(), args.json)
        return _pieces(args.json, args.what)
    except AdvisorError as exc:
        exc.report(PROG)
        return exc.exit_code


if __name__ == "__main__":
    sys.exit(main())
