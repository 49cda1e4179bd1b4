"""Claude Code's settings.json: add or remove exactly our Stop hook entry and our permissions.

The file is the user's: every byte the merge does not touch is kept (escapes such as
`caf\\u00e9`, number spellings such as `1.50`, spacing, key order). So the JSON is never
re-serialised: the text is parsed into spans and the few changes are spliced into it.

- Our Stop hook goes into a group of its own (`{"hooks": [ENTRY]}`) at the end of `hooks.Stop`,
  never into someone else's group. An earlier spelling of it (a hook of the same instance: its
  --config the same file, see `hook_instance` in kael_claude_code.settings, the doctor's
  definition too) is replaced, so there is always exactly one.
- What install added is kept in a record (`Record`): uninstall removes only that, and puts
  back a container (`hooks`, `hooks.Stop`, `permissions`, `permissions.allow`) only if install
  created it (from nothing or from `null`). Empty `{}`/`[]` the user had stay.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any, NamedTuple

# One definition of what we add, shared with the engine's `claude-pieces` command.
from ansible_collections.kael.appliance.plugins.module_utils.kael_claude_code.settings import (
    MCP_SERVER,
    permission,
    same_hook,
    stop_hook_commands,
    stop_hook_entry,
)
from ansible_collections.kael.appliance.plugins.module_utils.kael_mcp_tools import (
    PROMPTING_TOOLS,
    READ_ONLY_TOOLS,
)

SERVER = MCP_SERVER

#: The containers install may create, outermost first: (path, kind).
CONTAINERS = ((("hooks",), dict), (("hooks", "Stop"), list), (("permissions",), dict),
              (("permissions", "allow"), list))


class SettingsError(ValueError):
    """The file is not something this module may change; it is left untouched."""


# -- the record of what install added ---------------------------------------------------------


class Record(NamedTuple):
    """What install added to one settings file (kept by the module beside its backups)."""

    hook_command: str | None = None
    permissions: tuple[str, ...] = ()
    #: container path ("hooks.Stop") -> what was there before install: "absent" or "null"
    created: tuple[tuple[str, str], ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"hook_command": self.hook_command, "permissions": list(self.permissions),
                "created": dict(self.created)}

    @classmethod
    def from_json(cls, data: Any) -> Record:
        if not isinstance(data, dict):
            raise SettingsError("the record of what install added is not a JSON object")
        hook, rules, created = (data.get(k) for k in ("hook_command", "permissions", "created"))
        return cls(hook if isinstance(hook, str) else None,
                   tuple(p for p in rules if isinstance(p, str)) if isinstance(rules, list)
                   else (),
                   tuple((k, v) for k, v in created.items() if v in ("absent", "null"))
                   if isinstance(created, dict) else ())


# -- JSON text with spans ---------------------------------------------------------------------


class Node(NamedTuple):
    start: int
    end: int
    kind: str  # "object", "array" or "scalar"
    #: object: (key, key start, value); array: (None, start, value)
    children: list[tuple[str | None, int, Node]]


_SPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


def _skip(text: str, index: int) -> int:
    found = _SPACE.match(text, index)
    return found.end() if found else index


def _node(text: str, index: int) -> Node:
    """The value at INDEX of TEXT, which is valid JSON (checked by `load` first)."""
    index = _skip(text, index)
    opening = text[index]
    if opening not in "{[":
        _value, end = _DECODER.raw_decode(text, index)
        return Node(index, end, "scalar", [])
    closing = "}" if opening == "{" else "]"
    children: list[tuple[str | None, int, Node]] = []
    at = _skip(text, index + 1)
    while text[at] != closing:
        key: str | None = None
        start = at
        if opening == "{":
            key, at = _DECODER.raw_decode(text, at)
            at = _skip(text, at) + 1  # the colon
        value = _node(text, at)
        children.append((key, start, value))
        at = _skip(text, value.end)
        if text[at] == ",":
            at = _skip(text, at + 1)
    return Node(index, at + 1, "object" if opening == "{" else "array", children)


def _at(root: Node, path: tuple[str | int, ...]) -> Node:
    node = root
    for step in path:
        node = (node.children[step][2] if isinstance(step, int)
                else next(child for key, _at, child in node.children if key == step))
    return node


class Style(NamedTuple):
    indent: str  # one level; "" for a file on one line
    colon: str  # ": " or ":"
    comma: str  # after a comma on one line: " " or ""


def _style(text: str) -> Style:
    """How TEXT is written: its first indented line gives the level (a file on one line has
    none), its first colon and commas the spacing."""
    found = re.search(r"\n([ \t]+)\S", text)
    colon = re.search(r'"[ \t]*:([ \t]*)', text)
    tight = re.search(r",\S", text) and not re.search(r", ", text)
    return Style(found.group(1) if found else "", ":" + (colon.group(1) if colon else " "),
                 "" if tight else " ")


def _line_indent(text: str, index: int) -> str:
    line = text.rfind("\n", 0, index) + 1
    return text[line:_skip(text, line)].replace("\n", "").replace("\r", "")


def _render(value: Any, style: Style, indent: str) -> str:
    """VALUE as JSON for a place whose line is indented by INDENT."""
    if not style.indent:
        return json.dumps(value, ensure_ascii=False, separators=("," + style.comma, style.colon))
    text = json.dumps(value, ensure_ascii=False, indent=style.indent,
                      separators=(",", style.colon))
    return text.replace("\n", "\n" + indent)


def _member(key: str | None, value: Any, style: Style, indent: str) -> str:
    rendered = _render(value, style, indent)
    return rendered if key is None else json.dumps(key, ensure_ascii=False) + style.colon + rendered


def _append(text: str, container: Node, key: str | None, value: Any) -> str:
    """TEXT with VALUE added as the last member (KEY) or element of CONTAINER."""
    style = _style(text)
    if container.children:
        _key, start, last = container.children[-1]
        before = text.rfind(",", 0, start) if len(container.children) > 1 else container.start
        gap = text[before + 1:start]
        indent = gap.rpartition("\n")[2] if "\n" in gap else _line_indent(text, start)
        if "\n" not in gap:
            gap = style.comma if len(container.children) == 1 else gap
        addition = "," + gap + _member(key, value, style, indent)
        return text[:last.end] + addition + text[last.end:]
    outer = _line_indent(text, container.start)
    if style.indent:
        inner = outer + style.indent
        body = "\n" + inner + _member(key, value, style, inner) + "\n" + outer
    else:
        body = _member(key, value, style, "")
    return text[:container.start + 1] + body + text[container.end - 1:]


def _remove(text: str, container: Node, index: int) -> str:
    """TEXT without the member or element INDEX of CONTAINER (with its comma)."""
    children = container.children
    if len(children) == 1:
        return text[:container.start + 1] + text[container.end - 1:]
    if index > 0:
        return text[:children[index - 1][2].end] + text[children[index][2].end:]
    return text[:children[0][1]] + text[children[1][1]:]


def _replace(text: str, node: Node, value: Any) -> str:
    rendered = _render(value, _style(text), _line_indent(text, node.start))
    return text[:node.start] + rendered + text[node.end:]


# -- reading ----------------------------------------------------------------------------------


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise SettingsError(f"the key {key!r} appears twice in one object")
        found[key] = value
    return found


def _no_constant(name: str) -> Any:
    raise SettingsError(f"{name} is not JSON")


def load(text: str) -> dict[str, Any]:
    """The settings object of TEXT; empty text is an empty object. Refuses what Claude Code
    could not read and every shape this module would have to guess about."""
    if not text.strip():
        return {}
    try:
        data = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise SettingsError(f"not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise SettingsError(f"the top level is a JSON {type(data).__name__}, not an object")
    for path, kind in CONTAINERS:
        value = _get(data, path)
        if value is not None and not isinstance(value, kind):
            expected = "an object" if kind is dict else "a list"
            raise SettingsError(f"{'.'.join(path)} is a JSON {type(value).__name__}, not "
                                f"{expected}")
    return data


def _get(data: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        data = data.get(key) if isinstance(data, dict) else None
    return data


# -- the change -------------------------------------------------------------------------------


class Change(NamedTuple):
    text: str
    data: dict[str, Any]
    added: list[str]
    removed: list[str]
    warnings: list[str]
    record: Record


class _Edit:
    """The settings text being changed, re-read after every splice."""

    def __init__(self, text: str) -> None:
        self.blank = not text.strip()
        self.text = "{}" if self.blank else text
        self.created: dict[str, str] = {}

    @property
    def data(self) -> dict[str, Any]:
        return load(self.text)

    def root(self) -> Node:
        return _node(self.text, 0)

    def ensure(self, path: tuple[str, ...], value: Any) -> bool:
        """Put VALUE at PATH when nothing (or null) is there; whether it did. Records what
        was there before for uninstall."""
        data = self.data
        parent_path, key = path[:-1], path[-1]
        current = _get(data, path)
        if current is not None:
            return False
        self.created[".".join(path)] = "absent" if key not in _get(data, parent_path) else "null"
        parent = _at(self.root(), parent_path)
        if key in _get(data, parent_path):
            self.text = _replace(self.text, _at(parent, (key,)), value)
        else:
            self.text = _append(self.text, parent, key, value)
        return True

    def append(self, path: tuple[str | int, ...], value: Any) -> None:
        self.text = _append(self.text, _at(self.root(), path), None, value)

    def remove(self, path: tuple[str | int, ...], index: int) -> None:
        self.text = _remove(self.text, _at(self.root(), path), index)

    def replace(self, path: tuple[str | int, ...], value: Any) -> None:
        self.text = _replace(self.text, _at(self.root(), path), value)

    def rendered(self) -> str:
        if self.blank:  # a new file: written the way Claude Code writes it
            return json.dumps(self.data, indent=2, ensure_ascii=False) + "\n"
        return self.text


def _stop_entries(data: dict[str, Any], ours: list[str]) -> list[tuple[int, int]]:
    """(group, entry) of every Stop hook entry that is one of OURS or an earlier spelling."""
    return [(g, e) for g, e, command in stop_hook_commands(data)
            if any(same_hook(command, o) for o in ours)]


def _own_group(group: Any) -> bool:
    return isinstance(group, dict) and set(group) == {"hooks"} and len(group["hooks"]) == 1


def _remove_hooks(edit: _Edit, found: list[tuple[int, int]]) -> list[str]:
    """Remove the entries FOUND (and a group left empty with nothing else in it)."""
    removed = []
    for g, e in sorted(found, reverse=True):
        group = edit.data["hooks"]["Stop"][g]
        removed.append(f"hooks.Stop: {group['hooks'][e]['command']}")
        if len(group["hooks"]) == 1 and set(group) == {"hooks"}:
            edit.remove(("hooks", "Stop"), g)
        else:
            edit.remove(("hooks", "Stop", g, "hooks"), e)
    return removed[::-1]


def _install_hook(edit: _Edit, command: str, timeout: int, previous: str | None
                  ) -> tuple[list[str], list[str]]:
    entry = stop_hook_entry(command, timeout)
    data = edit.data
    found = _stop_entries(data, [command] + ([previous] if previous else []))
    if len(found) == 1:
        g, _rest = found[0]
        group = data["hooks"]["Stop"][g]
        if _own_group(group):
            if group["hooks"][0] == entry:
                return [], []
            old = group["hooks"][0].get("command")
            edit.replace(("hooks", "Stop", g, "hooks", 0), entry)
            return [f"hooks.Stop: {command}"], ([f"hooks.Stop: {old}"] if old != command else [])
    removed = _remove_hooks(edit, found)
    group = {"hooks": [entry]}
    if edit.ensure(("hooks",), {"Stop": [group]}):
        edit.created["hooks.Stop"] = "absent"
    elif not edit.ensure(("hooks", "Stop"), [group]):
        edit.append(("hooks", "Stop"), group)
    return [f"hooks.Stop: {command}"], removed


def install(text: str, hook_command: str | None, hook_timeout: int, server: str = SERVER,
            manage_permissions: bool = True, record: Record | None = None) -> Change:
    """TEXT with our Stop hook and read-only permissions; RECORD is what an earlier install
    added (None when there is no record)."""
    original = load(text)
    edit = _Edit(text)
    previous = record or Record()
    added: list[str] = []
    removed: list[str] = []
    if hook_command:
        added, removed = _install_hook(edit, hook_command, hook_timeout, previous.hook_command)
    ours = list(previous.permissions)
    if manage_permissions:
        allow = _get(original, ("permissions", "allow")) or []
        if record is None and hook_command and _stop_entries(original, [hook_command]):
            # Installed by a version that kept no record: our rules are the ones present.
            ours = [permission(server, t) for t in READ_ONLY_TOOLS
                    if permission(server, t) in allow]
        missing = [permission(server, t) for t in READ_ONLY_TOOLS
                   if permission(server, t) not in allow]
        for rule in missing:
            if edit.ensure(("permissions",), {"allow": [rule]}):
                edit.created["permissions.allow"] = "absent"
            elif not edit.ensure(("permissions", "allow"), [rule]):
                edit.append(("permissions", "allow"), rule)
        added += [f"permissions.allow: {p}" for p in missing]
        ours += [p for p in missing if p not in ours]
    created = dict(previous.created)
    for path, before in edit.created.items():
        created.setdefault(path, before)
    new_record = Record(hook_command, tuple(ours), tuple(created.items()))
    data = edit.data
    return Change(edit.rendered(), data, added, removed, _permission_warnings(data, server),
                  new_record)


def uninstall(text: str, hook_command: str | None, server: str = SERVER,
              manage_permissions: bool = True, record: Record | None = None) -> Change:
    """TEXT without what install added: the hook entries (ours, or the recorded one), the
    recorded permissions (without a record: our four rules) and the containers install
    created, if nothing else is in them now."""
    load(text)
    edit = _Edit(text)
    removed: list[str] = []
    commands = [c for c in (hook_command, record.hook_command if record else None) if c]
    if commands:
        removed += _remove_hooks(edit, _stop_entries(edit.data, commands))
    if manage_permissions:
        ours = set(record.permissions) if record is not None else {
            permission(server, t) for t in READ_ONLY_TOOLS}
        allow = _get(edit.data, ("permissions", "allow")) or []
        for index in reversed(range(len(allow))):
            if allow[index] in ours:
                edit.remove(("permissions", "allow"), index)
        removed += [f"permissions.allow: {rule}" for rule in allow if rule in ours]
    if record is not None:
        put_back(edit, dict(record.created), CONTAINERS)
    return Change(edit.text, edit.data, [], removed, [], Record())


def put_back(edit: _Edit, created: dict[str, str],
             containers: Sequence[tuple[tuple[str, ...], type]]) -> None:
    """Take away the empty CONTAINERS install created, innermost first: `null` again where it
    found `null`, nothing where it found nothing."""
    for path, _kind in reversed(containers):
        before = created.get(".".join(path))
        value = _get(edit.data, path)
        if before is None or value is None or value:
            continue
        if before == "null":
            edit.replace(path, None)
        else:
            parent = _get(edit.data, path[:-1])
            edit.remove(path[:-1], list(parent).index(path[-1]))


def _permission_warnings(data: dict[str, Any], server: str) -> list[str]:
    permissions = data.get("permissions") if isinstance(data.get("permissions"), dict) else {}
    warnings = []
    broad = {f"mcp__{server}", f"mcp__{server}__*"}
    broad |= {permission(server, t) for t in PROMPTING_TOOLS}
    for rule in _strings(permissions.get("allow")):
        if rule in broad:
            warnings.append(f"permissions.allow has {rule!r}, so thread_rebuild_request, cancel "
                            "or rollback may run without asking; it was left as found: remove "
                            "it by hand unless that is intended")
    for kind in ("ask", "deny"):
        for tool in READ_ONLY_TOOLS:
            for rule in _strings(permissions.get(kind)):
                if rule in (f"mcp__{server}", f"mcp__{server}__*", permission(server, tool)):
                    warnings.append(f"permissions.{kind} has {rule!r}, which overrides the allow "
                                    f"rule for {tool}")
    return sorted(set(warnings))


def _strings(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def hook_present(data: dict[str, Any], hook_command: str) -> bool:
    """Whether a Stop hook of this instance (HOOK_COMMAND or an earlier spelling) is there."""
    return bool(_stop_entries(data, [hook_command]))
