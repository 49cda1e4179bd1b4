"""Claude Code's settings.json: add or remove exactly our Stop hook entry and our permissions.

Pure functions over the parsed JSON; the module does the reading and writing. Everything not
ours is left as it was, key order included (Python dicts keep it). A container (`hooks`,
`hooks.Stop`, `permissions`, `permissions.allow`) is created only when something is added to it
and removed only when our removal emptied it.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any, NamedTuple

SERVER = "kael-thread-rebuild"
#: Read-only tools: allowed without asking.
READ_ONLY_TOOLS = ("thread_rebuild_doctor", "thread_rebuild_dirty", "thread_rebuild_plan",
                   "thread_rebuild_status")
#: Tools that change something: they must keep asking the human (never added to allow).
PROMPTING_TOOLS = ("thread_rebuild_request", "thread_rebuild_cancel",
                   "thread_rebuild_rollback_request")


class SettingsError(ValueError):
    """The file is not something this module may change; it is left untouched."""


class Change(NamedTuple):
    data: dict[str, Any]
    added: list[str]
    removed: list[str]
    warnings: list[str]


def permission(server: str, tool: str) -> str:
    return f"mcp__{server}__{tool}"


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
    """The settings object of TEXT; empty text is an empty object."""
    if not text.strip():
        return {}
    try:
        data = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise SettingsError(f"not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise SettingsError(f"the top level is a JSON {type(data).__name__}, not an object")
    return data


def render(data: dict[str, Any], original: str) -> str:
    """DATA as JSON in the indentation of ORIGINAL (two spaces for a new file), with a final
    newline when ORIGINAL had one or was empty."""
    found = re.search(r"\n([ \t]+)\S", original)
    indent = found.group(1) if found else "  "
    text = json.dumps(data, indent=indent, ensure_ascii=False)
    return text + "\n" if original.endswith("\n") or not original.strip() else text


def _child(parent: dict[str, Any], key: str, kind: type, where: str) -> Any:
    value = parent.get(key)
    if value is not None and not isinstance(value, kind):
        expected = "an object" if kind is dict else "a list"
        raise SettingsError(f"{where} is a JSON {type(value).__name__}, not {expected}")
    return value


def _our_entry(entry: Any, command: str) -> bool:
    return isinstance(entry, dict) and entry.get("command") == command


def _groups(stop: list[Any]) -> list[dict[str, Any]]:
    return [g for g in stop if isinstance(g, dict) and isinstance(g.get("hooks"), list)]


def install(data: dict[str, Any], hook_command: str | None, hook_timeout: int,
            server: str = SERVER, manage_permissions: bool = True) -> Change:
    new = copy.deepcopy(data)
    added: list[str] = []
    if hook_command:
        hooks = _child(new, "hooks", dict, "hooks")
        stop = _child(hooks or {}, "Stop", list, "hooks.Stop")
        groups = _groups(stop or [])
        if not any(_our_entry(e, hook_command) for g in groups for e in g["hooks"]):
            entry = {"type": "command", "command": hook_command, "timeout": hook_timeout}
            # Stop has no matcher; a group that has one anyway is someone else's business.
            target = next((g for g in groups if not g.get("matcher")), None)
            if target is not None:
                target["hooks"].append(entry)
            else:
                hooks = new.setdefault("hooks", {})
                hooks.setdefault("Stop", []).append({"hooks": [entry]})
            added.append(f"hooks.Stop: {hook_command}")
    warnings: list[str] = []
    if manage_permissions:
        permissions = _child(new, "permissions", dict, "permissions")
        allow = _child(permissions or {}, "allow", list, "permissions.allow")
        missing = [permission(server, t) for t in READ_ONLY_TOOLS
                   if permission(server, t) not in (allow or [])]
        if missing:
            new.setdefault("permissions", {}).setdefault("allow", []).extend(missing)
            added += [f"permissions.allow: {p}" for p in missing]
        warnings = _permission_warnings(new, server)
    return Change(new, added, [], warnings)


def _permission_warnings(data: dict[str, Any], server: str) -> list[str]:
    permissions = data.get("permissions") if isinstance(data.get("permissions"), dict) else {}
    warnings = []
    broad = {f"mcp__{server}", f"mcp__{server}__*"} | {permission(server, t)
                                                         for t in PROMPTING_TOOLS}
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


def uninstall(data: dict[str, Any], hook_command: str | None,
              server: str = SERVER, manage_permissions: bool = True) -> Change:
    new = copy.deepcopy(data)
    removed: list[str] = []
    hooks = _child(new, "hooks", dict, "hooks")
    stop = _child(hooks or {}, "Stop", list, "hooks.Stop")
    if hook_command and stop:
        emptied: list[dict[str, Any]] = []
        for group in _groups(stop):
            kept = [e for e in group["hooks"] if not _our_entry(e, hook_command)]
            if len(kept) != len(group["hooks"]):
                removed.append(f"hooks.Stop: {hook_command}")
                if kept or set(group) - {"hooks"}:
                    group["hooks"] = kept
                else:
                    emptied.append(group)
        stop[:] = [g for g in stop if not any(g is e for e in emptied)]
        if removed and not stop:
            del hooks["Stop"]
            if not hooks:
                del new["hooks"]
    permissions = _child(new, "permissions", dict, "permissions")
    allow = _child(permissions or {}, "allow", list, "permissions.allow")
    if manage_permissions and allow:
        ours = {permission(server, t) for t in READ_ONLY_TOOLS}
        gone = [rule for rule in allow if rule in ours]
        if gone:
            allow[:] = [rule for rule in allow if rule not in ours]
            removed += [f"permissions.allow: {rule}" for rule in gone]
            if not allow:
                del permissions["allow"]
                if not permissions:
                    del new["permissions"]
    return Change(new, [], removed, [])


def hook_present(data: dict[str, Any], hook_command: str) -> bool:
    hooks = data.get("hooks")
    stop = hooks.get("Stop") if isinstance(hooks, dict) else None
    return isinstance(stop, list) and any(
        _our_entry(e, hook_command) for g in _groups(stop) for e in g["hooks"])
