"""Write each role's README.md from its argument spec, so the page cannot drift from the role.

`python -m kael_thread_rebuild.docs_roles --write roles` writes `roles/<role>/README.md` for every
role; `--check roles` names each README that differs from what would be written and exits 1;
`python -m kael_thread_rebuild.docs_roles roles/<role>` prints one. The purpose and every
variable (suboptions too) come from `meta/argument_specs.yml`, the platforms, the minimum
Ansible and the dependencies from `meta/main.yml`, the example from the collection's playbooks
(the play that runs the role closest to its defaults, up to the role).
"""

from __future__ import annotations

import argparse
import io
import json
import re
import sys
import textwrap
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError
from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from .fsutil import atomic_write_text

NAMESPACE = "kael.appliance"
COMMAND = "python -m kael_thread_rebuild.docs_roles --write roles"
INSTALLER_DOC = "../../docs/installer.md"
# The playbook a user runs first wins a tie between plays that run a role alike.
FIRST_PLAYBOOK = "install"
# What of a play the example keeps besides the roles or tasks up to the role.
PLAY_KEYS = ("name", "hosts", "become", "gather_facts", "gather_subset", "vars", "pre_tasks")
INCLUDES = {f"{prefix}{verb}_role" for prefix in ("", "ansible.builtin.")
            for verb in ("include", "import")}


def _paragraphs(value: Any) -> Any:
    return [value] if isinstance(value, str) else value


Paragraphs = Annotated[tuple[str, ...], BeforeValidator(_paragraphs)]


class _Spec(BaseModel):
    # A key the generator does not know is refused, never dropped from the page unseen.
    model_config = ConfigDict(extra="forbid", frozen=True)


class Option(_Spec):
    """One variable of an entry point (or one key of a dict variable), as Ansible validates it."""

    description: Paragraphs
    type: str = "str"
    elements: str | None = None
    required: bool = False
    default: Any = None
    choices: tuple[Any, ...] | None = None
    options: dict[str, Option] | None = None

    @property
    def has_default(self) -> bool:
        return "default" in self.model_fields_set


class EntryPoint(_Spec):
    short_description: str
    description: Paragraphs = ()
    options: dict[str, Option] = Field(default_factory=dict)


class ArgumentSpecs(_Spec):
    argument_specs: dict[str, EntryPoint]


class Platform(BaseModel):
    name: str
    versions: tuple[str, ...] = ("all",)


class GalaxyInfo(BaseModel):
    description: str
    min_ansible_version: str
    platforms: tuple[Platform, ...] = ()


class RoleMeta(BaseModel):
    galaxy_info: GalaxyInfo
    dependencies: tuple[str | dict[str, Any], ...] = ()

    def dependency_names(self) -> list[str]:
        return [short_name(d if isinstance(d, str) else d.get("role", d.get("name", "")))
                for d in self.dependencies]


class Role(BaseModel):
    """What a role's README is written from."""

    name: str
    meta: RoleMeta
    specs: ArgumentSpecs

    def entry_points(self) -> list[tuple[str, EntryPoint]]:
        """`main` first, then the others by name."""
        specs = self.specs.argument_specs
        return sorted(specs.items(), key=lambda item: (item[0] != "main", item[0]))


def short_name(role: str) -> str:
    return role.removeprefix(f"{NAMESPACE}.")


def fqcn(role: str) -> str:
    return f"{NAMESPACE}.{short_name(role)}"


def _load(path: Path) -> Any:
    return YAML(typ="safe", pure=True).load(path.read_text(encoding="utf-8"))


def read_role(directory: Path) -> Role:
    """The role at DIRECTORY; ValueError naming the file when a meta file is missing or bad."""
    meta = directory / "meta" / "main.yml"
    specs = directory / "meta" / "argument_specs.yml"
    try:
        return Role(name=directory.name, meta=RoleMeta.model_validate(_load(meta)),
                    specs=ArgumentSpecs.model_validate(_load(specs)))
    except (OSError, YAMLError, ValidationError) as exc:
        raise ValueError(f"{directory}/meta: {exc}") from None


# Ansible's markup in descriptions (ansible-doc's C(), O(), V(), I(), B(), U(), L(), ...).
_MARKUP = re.compile(r"(?<![A-Za-z0-9_])(RV|HORIZONTALLINE|[CIBUOVEMLRP])(\()?")
_PLAIN_SPECIAL = re.compile(r"([\\`*<])")


def _escape(text: str) -> str:
    return _PLAIN_SPECIAL.sub(r"\\\1", text)


def code(text: str) -> str:
    """TEXT as a Markdown code span."""
    fence = "``" if "`" in text else "`"
    pad = " " if fence == "``" else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _argument_end(text: str, start: int) -> int:
    """Where the argument that starts at START ends: at its matching `)`, else at the first."""
    depth = 1
    for index in range(start, len(text)):
        depth += {"(": 1, ")": -1}.get(text[index], 0)
        if depth == 0:
            return index
    return text.find(")", start)


def _command(name: str, argument: str) -> str:
    if name == "I":
        return f"*{_escape(argument)}*"
    if name == "B":
        return f"**{_escape(argument)}**"
    if name == "U":
        return f"<{argument}>"
    if name in ("L", "R"):
        label, _, target = argument.rpartition(",")
        return f"[{_escape(label.strip())}]({target.strip()})" if name == "L" else _escape(label)
    return code(argument)


def markdown(text: str) -> str:
    """TEXT with Ansible's markup written as Markdown, everything else escaped."""
    out: list[str] = []
    position = 0
    for match in _MARKUP.finditer(text):
        if match.start() < position or (match.group(2) is None) != (
                match.group(1) == "HORIZONTALLINE"):
            continue
        if match.group(1) == "HORIZONTALLINE":
            out.append(_escape(text[position:match.start()]) + "<hr>")
            position = match.end()
            continue
        end = _argument_end(text, match.end())
        if end < 0:
            break
        out.append(_escape(text[position:match.start()]))
        out.append(_command(match.group(1), text[match.end():end]))
        position = end + 1
    out.append(_escape(text[position:]))
    return "".join(out)


def value(data: Any) -> str:
    """A default or a choice as a code span of JSON, which YAML reads as it is."""
    return code(json.dumps(data, ensure_ascii=False))


def anchor(heading: str) -> str:
    """The anchor GitHub gives the heading HEADING (the first of that text on the page)."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


class Page:
    """A Markdown page, block by block."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def add(self, *blocks: str) -> None:
        self.lines.extend(blocks)

    def heading(self, level: int, text: str) -> None:
        self.add("#" * level + " " + text, "")

    def text(self) -> str:
        return "\n".join(self.lines).rstrip("\n") + "\n"


def _type_cell(option: Option, keys_anchor: str | None) -> str:
    kind = option.type if option.elements is None else f"{option.type} of {option.elements}"
    return kind if keys_anchor is None else f"{kind}, [keys below](#{keys_anchor})"


def _default_cell(option: Option) -> str:
    if option.required:
        return "**required**"
    return value(option.default) if option.has_default else "-"


def _row(name: str, option: Option, keys_anchor: str | None) -> str:
    cells = (code(name), _type_cell(option, keys_anchor), _default_cell(option),
             ", ".join(value(choice) for choice in option.choices or ()) or "-",
             "<br><br>".join(markdown(p) for p in option.description))
    # GitHub splits a row at every `|` not escaped, in a code span too.
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


def _keys_title(entry: str, path: Sequence[tuple[str, Option]]) -> str:
    words = [f"each {code(name)} entry" if option.type == "list" else code(name)
             for name, option in reversed(path)]
    # Titles are unique on the page, so each anchor is its title's first.
    return "Keys of " + " in ".join(words) + ("" if entry == "main" else f" ({code(entry)})")


def _tables(page: Page, entry: str, options: dict[str, Option],
            path: list[tuple[str, Option]]) -> None:
    """One table of OPTIONS, then one of the keys of each option that has them, in order."""
    titles = {name: _keys_title(entry, [*path, (name, option)])
              for name, option in options.items() if option.options}
    head = "key" if path else "variable"
    page.add(f"| {head} | type | required / default | choices | description |",
             "|---|---|---|---|---|",
             *(_row(name, option, anchor(titles[name]) if name in titles else None)
               for name, option in options.items()), "")
    for name, title in titles.items():
        option = options[name]
        page.heading(4, title)
        _tables(page, entry, option.options or {}, [*path, (name, option)])


def _requirements(page: Page, role: Role) -> None:
    info = role.meta.galaxy_info
    page.heading(2, "Requirements")
    page.add(f"- Ansible: ansible-core {info.min_ansible_version} or later.")
    if info.platforms:
        platforms = "; ".join(f"{p.name} ({', '.join(p.versions)})" for p in info.platforms)
        page.add(f"- Platforms: {platforms}.")
    for dependency in role.meta.dependency_names():
        page.add(f"- Depends on [{code(fqcn(dependency))}](../{dependency}/README.md), which "
                 "runs first; its variables apply to this role too.")
    page.add("")


def _purpose(page: Page, role: Role) -> None:
    page.heading(2, "Entry points")
    for name, entry in role.entry_points():
        page.heading(3, code(name))
        if name != "main":
            page.add(f"Run with {code('tasks_from: ' + name)}.", "")
        page.add(f"**{markdown(entry.short_description)}**", "")
        for paragraph in entry.description:
            page.add(markdown(paragraph), "")


def _variables(page: Page, role: Role) -> None:
    page.heading(2, "Variables")
    for name, entry in role.entry_points():
        page.heading(3, f"Variables of {code(name)}")
        if entry.options:
            _tables(page, name, entry.options, [])
        else:
            page.add("None.", "")


# The examples: a play of the collection's playbooks, up to the role.

def _role_of(item: Any) -> tuple[str, dict[str, Any]]:
    """A play's `roles:` item as (short role name, its vars)."""
    if isinstance(item, str):
        return short_name(item), {}
    return short_name(str(item.get("role", item.get("name", "")))), dict(item.get("vars") or {})


def _includes(task: Any, role: str, entry: str) -> bool:
    if not isinstance(task, dict):
        return False
    for key in INCLUDES & task.keys():
        args = task[key] if isinstance(task[key], dict) else {}
        tasks_from = str(args.get("tasks_from", "main")).removesuffix(".yml")
        if short_name(str(args.get("name", ""))) == role and tasks_from == entry:
            return True
    return False


def _role_fqcn(item: Any) -> Any:
    """A `roles:` item with its role spelled as the collection's."""
    if isinstance(item, str):
        return fqcn(item)
    key = "role" if "role" in item else "name"
    return {**item, key: fqcn(str(item[key]))}


def _task_fqcn(task: Any) -> Any:
    """A task with the role it includes (if any) spelled as the collection's."""
    if not isinstance(task, dict):
        return task
    return {**task, **{key: {**task[key], "name": fqcn(str(task[key]["name"]))}
                       for key in INCLUDES & task.keys() if isinstance(task[key], dict)}}


# A play cut after the role: the vars set on the role, how many roles or tasks, the play.
Trimmed = tuple[int, int, dict[str, Any]]


def _roles_up_to(play: dict[str, Any], role: str) -> Trimmed | None:
    names = [_role_of(item) for item in play.get("roles") or []]
    at = next((index for index, (name, _) in enumerate(names) if name == role), None)
    if at is None:
        return None
    roles = [_role_fqcn(item) for item in play["roles"][:at + 1]]
    return len(names[at][1]), at + 1, {**_play_keys(play), "roles": roles}


def _tasks_up_to(play: dict[str, Any], role: str, entry: str) -> Trimmed | None:
    tasks = play.get("tasks") or []
    at = next((index for index, task in enumerate(tasks) if _includes(task, role, entry)), None)
    if at is None:
        return None
    return 0, at + 1, {**_play_keys(play), "tasks": [_task_fqcn(t) for t in tasks[:at + 1]]}


def _play_keys(play: dict[str, Any]) -> dict[str, Any]:
    return {key: play[key] for key in PLAY_KEYS if key in play}


def _trimmed(play: dict[str, Any], role: str, entry: str) -> Trimmed | None:
    """PLAY cut after ROLE's ENTRY, or None when it does not run it."""
    return (entry == "main" and _roles_up_to(play, role)) or _tasks_up_to(play, role, entry)


def _plays(playbooks: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    for path in sorted(playbooks.glob("*.yml"), key=lambda p: (p.stem != FIRST_PLAYBOOK, p.stem)):
        for play in _load(path) or []:
            if isinstance(play, dict) and "hosts" in play:
                yield path.stem, play


def example_play(playbooks: Path, role: str, entry: str,
                 short_description: str) -> tuple[str | None, dict[str, Any]]:
    """The play that runs ROLE's ENTRY with the fewest variables set on it, then the shortest,
    trimmed after it, with its playbook; else a play of that role alone on the households."""
    found = []
    for order, (playbook, play) in enumerate(_plays(playbooks) if playbooks.is_dir() else ()):
        trimmed = _trimmed(play, role, entry)
        if trimmed is not None:
            found.append((trimmed[0], trimmed[1], order, playbook, trimmed[2]))
    if found:
        best = min(found, key=lambda candidate: candidate[:3])
        return best[3], best[4]
    return None, _alone(role, entry, short_description)


def _alone(role: str, entry: str, short_description: str) -> dict[str, Any]:
    """A play of ROLE's ENTRY alone on the households."""
    play: dict[str, Any] = {"name": short_description, "hosts": "households"}
    if entry == "main":
        return {**play, "roles": [{"role": fqcn(role)}]}
    include = {"name": fqcn(role), "tasks_from": entry}
    return {**play, "tasks": [{"name": short_description,
                               "ansible.builtin.include_role": include}]}


def play_yaml(play: dict[str, Any]) -> str:
    out = YAML(typ="rt", pure=True)
    out.indent(mapping=2, sequence=4, offset=2)
    out.width = 100
    out.default_flow_style = False
    stream = io.StringIO()
    out.dump([play], stream)
    return textwrap.dedent(stream.getvalue())


def _examples(page: Page, role: Role, playbooks: Path) -> None:
    page.heading(2, "Example")
    for name, entry in role.entry_points():
        playbook, play = example_play(playbooks, role.name, name, entry.short_description)
        source = (f"the collection's playbook {code(fqcn(playbook))}, up to this role"
                  if playbook else "no playbook of the collection names it")
        page.add(f"{code(name)} ({source}):", "", "```yaml", play_yaml(play).rstrip("\n"), "```",
                 "")
    names = sorted(p.stem for p in playbooks.glob("*.yml")) if playbooks.is_dir() else []
    others = [code(fqcn(name)) for name in names if name != FIRST_PLAYBOOK]
    likewise = f" (likewise {', '.join(others[:-1])} and {others[-1]})" if len(others) > 1 else ""
    command = f"ansible-playbook {fqcn(FIRST_PLAYBOOK)} -i inventory.yml"
    page.add("The collection's playbooks run the roles in order on the inventory group "
             f"{code('households')}: {code(command)}{likewise}. How to write the inventory "
             f"and what a run does: [docs/installer.md]({INSTALLER_DOC}).")


def render(role: Role, playbooks: Path) -> str:
    """The README of ROLE."""
    page = Page()
    page.add(f"<!-- Generated from roles/{role.name}/meta/argument_specs.yml and meta/main.yml,",
             "the example from the collection's playbooks, by",
             f"`{COMMAND}`.",
             "Edit those files, then regenerate: a test fails when this page differs from what",
             "the generator writes. -->", "")
    page.heading(1, fqcn(role.name))
    page.add(markdown(" ".join(role.meta.galaxy_info.description.split())), "")
    _purpose(page, role)
    _requirements(page, role)
    _variables(page, role)
    _examples(page, role, playbooks)
    return page.text()


def readmes(roles: Path) -> dict[Path, str]:
    """Every role's README under ROLES (a collection's roles/), by path."""
    playbooks = roles.parent / "playbooks"
    return {directory / "README.md": render(read_role(directory), playbooks)
            for directory in sorted(roles.iterdir()) if directory.is_dir()}


def stale(roles: Path) -> list[str]:
    """One line for each README under ROLES that is missing or differs from what is written."""
    lines = []
    for path, text in readmes(roles).items():
        if not path.is_file():
            lines.append(f"{path} is missing")
        elif path.read_text(encoding="utf-8") != text:
            lines.append(f"{path} is stale")
    return lines


def _arguments() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m kael_thread_rebuild.docs_roles",
        description="Print a role's README.md, generated from its meta/argument_specs.yml and "
                    "meta/main.yml, or write or check every role's.")
    parser.add_argument("role", nargs="?", type=Path, help="print the README of this role")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--write", metavar="ROLES", type=Path,
                       help="write ROLES/*/README.md (atomically)")
    group.add_argument("--check", metavar="ROLES", type=Path,
                       help="name each ROLES/*/README.md that differs; exit 1 if any does")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = _arguments()
    args = parser.parse_args(argv)
    if (args.role is None) == (args.write is None and args.check is None):
        parser.error("give a role to print, or --write ROLES or --check ROLES")
    try:
        if args.role is not None:
            sys.stdout.write(render(read_role(args.role), args.role.parent.parent / "playbooks"))
            return 0
        if args.check is not None:
            lines = stale(args.check)
            for line in lines:
                print(f"{line}: run `{COMMAND}`")
            return 1 if lines else 0
        for path, text in readmes(args.write).items():
            atomic_write_text(path, text, 0o644)
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
