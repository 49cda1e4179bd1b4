"""Write docs/architecture.md from the source tree, so the page cannot drift from the code.

`python -m kael_thread_rebuild.docs_architecture` prints the page; `--write PATH` writes it.
The table of modules (each with the first sentence of its docstring), who imports whom (package
level) and the table of actions come from the tree; the prose between `<!-- prose: NAME -->`
and `<!-- /prose -->` is kept from the page as it is (edit it there).
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .docs_config import page_arguments, publish
from .interfaces.actions import ACTIONS

PACKAGE = Path(__file__).resolve().parent
ROOT = PACKAGE.name
# The appliance's second service, a package of its own beside this one.
ADVISOR = PACKAGE.parent / "kael_advisor"
COMMAND = "python -m kael_thread_rebuild.docs_architecture --write docs/architecture.md"

HEADER = f"""\
# Architecture

<!-- Generated from the source tree (module docstrings, imports, the table of actions) by
`{COMMAND}`.
Edit the prose between the `prose` markers here and anything else in the code, then
regenerate. A test fails when this page differs from what the generator writes. -->
"""

_PROSE = re.compile(r"<!-- prose: ([a-z-]+) -->\n(.*?)<!-- /prose -->\n", re.DOTALL)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`(])")


@dataclass(frozen=True)
class Prose:
    """A section a person writes: kept as it is on the page, by NAME."""

    name: str


@dataclass(frozen=True)
class Generated:
    """A section written from the tree: its TITLE (a `##` heading, or none) and its maker."""

    title: str | None
    make: str


# The page, in order.
SECTIONS: tuple[Prose | Generated, ...] = (
    Prose("intro"),
    Generated("Packages and modules", "modules"),
    Generated("Who imports whom", "imports"),
    Prose("outside"),
    Prose("entry-points"),
    Prose("actions"),
    Generated(None, "actions"),
    Prose("data-flow"),
    Generated("The advisor package (`kael_advisor`)", "advisor"),
    Prose("advisor"),
)


@dataclass
class Module:
    """One module of the package: its path under the package, its summary, what it imports."""

    path: Path
    summary: str
    imports: set[str] = field(default_factory=set)
    type_imports: set[str] = field(default_factory=set)

    @property
    def unit(self) -> str:
        """Its package for the import table: the subpackage, or the top-level module."""
        first = self.path.parts[0]
        return first if len(self.path.parts) > 1 else first.removesuffix(".py")


def summary(docstring: str | None, where: Path) -> str:
    """The first sentence of DOCSTRING's first paragraph, on one line."""
    if not docstring:
        raise ValueError(f"{where} has no docstring: say in one sentence what it is for")
    paragraph = " ".join(docstring.split("\n\n", 1)[0].split())
    return _SENTENCE_END.split(paragraph, 1)[0]


def _units(package: Path = PACKAGE) -> set[str]:
    return {path.name if path.is_dir() else path.stem for path in package.iterdir()
            if (path.is_dir() and (path / "__init__.py").is_file())
            or (path.suffix == ".py" and path.name != "__init__.py")}


def _absolute(node: ast.ImportFrom, module: Path, root: str = ROOT) -> list[str]:
    """The dotted names an ImportFrom brings in, relative ones resolved against MODULE."""
    if node.level == 0:
        base = node.module or ""
    else:
        package = [root, *module.parts[:-1]]
        base = ".".join(package[:len(package) - node.level + 1] + ([node.module] if node.module
                                                                     else []))
    return [f"{base}.{alias.name}" for alias in node.names]


def _imported(node: ast.AST, module: Path, root: str = ROOT) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom):
        return _absolute(node, module, root)
    return []


def _unit_of(dotted: str, units: set[str], root: str = ROOT) -> str | None:
    parts = dotted.split(".")
    if parts[0] != root or len(parts) < 2 or parts[1] not in units:
        return None
    return parts[1]


def _type_only_nodes(tree: ast.Module) -> set[int]:
    """The ids of the import nodes under `if TYPE_CHECKING:`."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING"):
            found.update(id(inner) for inner in ast.walk(node))
    return found


def read_module(path: Path, units: set[str], package: Path = PACKAGE) -> Module:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    relative = path.relative_to(package)
    module = Module(relative, summary(ast.get_docstring(tree), relative))
    type_only = _type_only_nodes(tree)
    for node in ast.walk(tree):
        for dotted in _imported(node, relative, package.name):
            unit = _unit_of(dotted, units, package.name)
            if unit is None or unit == module.unit:
                continue
            (module.type_imports if id(node) in type_only else module.imports).add(unit)
    return module


def modules(package: Path = PACKAGE) -> list[Module]:
    """Every module of PACKAGE, packages first by name, each package's modules by name."""
    units = _units(package)
    found = [read_module(path, units, package) for path in package.rglob("*.py")]
    return sorted(found, key=lambda m: (len(m.path.parts) > 1, m.path.parts[:-1],
                                        m.path.name != "__init__.py", m.path.name))


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def modules_table(found: Sequence[Module], root: str = ROOT) -> str:
    rows = ["| module | what it is |", "|---|---|"]
    for module in found:
        if module.path.name == "__init__.py" and len(module.path.parts) > 1:
            name = f"**`{module.path.parent.as_posix()}/`**"
        elif module.path.name == "__init__.py":
            name = f"`{root}`"
        else:
            name = f"`{module.path.as_posix()}`"
        rows.append(f"| {name} | {_cell(module.summary)} |")
    return "\n".join(rows) + "\n"


def _named(units: set[str], folders: set[str]) -> str:
    return ", ".join(f"`{unit}/`" if unit in folders else f"`{unit}`" for unit in sorted(units))


def imports_table(found: Sequence[Module]) -> str:
    folders = {m.path.parts[0] for m in found if len(m.path.parts) > 1}
    imports: dict[str, set[str]] = {}
    types: dict[str, set[str]] = {}
    for module in found:
        if module.path.parts == ("__init__.py",):
            continue  # the package itself: its version only
        imports.setdefault(module.unit, set()).update(module.imports)
        types.setdefault(module.unit, set()).update(module.type_imports)
    rows = ["| package | imports | imported by |", "|---|---|---|"]
    for unit in sorted(imports):
        only_types = types[unit] - imports[unit]
        uses = _named(imports[unit], folders)
        if only_types:
            uses += ("; " if uses else "") + f"for types only: {_named(only_types, folders)}"
        users = {other for other, used in imports.items() if unit in used}
        rows.append(f"| {_named({unit}, folders)} | {uses or '-'} | "
                    f"{_named(users, folders) or '-'} |")
    return ("Inside the package only (the standard library and other packages are not shown); "
            "an import under `TYPE_CHECKING` is for types only.\n\n" + "\n".join(rows) + "\n")


def actions_table() -> str:
    rows = ["| action | changes | word | MCP tool | allowed without asking |",
            "|---|---|---|---|---|"]
    for action in ACTIONS:
        allowed = "" if action.tool is None else "no, asks" if action.changes else "yes"
        rows.append(f"| {action.name} | {'yes' if action.changes else 'no'} | "
                    f"{action.confirmation or ''} | {action.tool.name if action.tool else ''} | "
                    f"{allowed} |")
    return "\n".join(rows) + "\n"


def advisor_tables() -> str:
    found = modules(ADVISOR)
    return modules_table(found, ADVISOR.name) + "\n" + imports_table(found)


def read_prose(page: str) -> dict[str, str]:
    """The prose sections of PAGE by name."""
    return {match.group(1): match.group(2) for match in _PROSE.finditer(page)}


def _sections(prose: dict[str, str]) -> Iterator[str]:
    makers = {"modules": lambda: modules_table(modules()),
              "imports": lambda: imports_table(modules()),
              "actions": actions_table,
              "advisor": advisor_tables}
    for section in SECTIONS:
        if isinstance(section, Prose):
            yield f"<!-- prose: {section.name} -->\n{prose.get(section.name, '')}<!-- /prose -->\n"
            continue
        title = f"## {section.title}\n\n" if section.title else ""
        yield title + makers[section.make]()


def render(prose: dict[str, str]) -> str:
    """The whole page, with PROSE (by section name) kept as it is."""
    return HEADER + "\n" + "\n".join(_sections(prose))


def main(argv: Sequence[str] | None = None) -> int:
    parser = page_arguments(
        "python -m kael_thread_rebuild.docs_architecture",
        "Print docs/architecture.md, generated from the source tree; its prose sections are "
        "kept from the page at --write (or --prose-from).")
    parser.add_argument("--prose-from", metavar="PATH", type=Path,
                        help="take the prose from PATH (default: the page at --write, or "
                             "docs/architecture.md of this checkout)")
    args = parser.parse_args(argv)
    source = args.prose_from or args.write or PACKAGE.parents[1] / "docs" / "architecture.md"
    prose = read_prose(source.read_text(encoding="utf-8")) if source.is_file() else {}
    return publish(render(prose), args.write)


if __name__ == "__main__":
    sys.exit(main())
