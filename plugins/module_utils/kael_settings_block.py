"""A block of settings merged into Claude Code's settings.json beside the user's own, and taken
out again exactly: permission rules (`permissions.allow`, `permissions.ask`), `env` variables and
hook groups (`hooks.EVENT`), as `kael-advisor pieces` prints them. The text is spliced with
kael_settings' editor (every byte the merge does not touch is kept) and what was added is kept in
a record, so uninstall removes only that: a rule the user already had stays, an `env` variable
the user set to another value is left alone (and said so), a container (`env`, `hooks.EVENT`...)
goes only if install created it and nothing else is in it now.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from ansible_collections.kael.appliance.plugins.module_utils.kael_settings import (
    SettingsError,
    _Edit,
    _get,
    load,
    put_back,
)

#: The containers install may create, outermost first: (path, kind). The hook events are added
#: per block (`hooks.EVENT`).
_BASE = ((("permissions",), dict), (("permissions", "allow"), list),
         (("permissions", "ask"), list), (("env",), dict), (("hooks",), dict))
KINDS = ("allow", "ask")


class BlockRecord(NamedTuple):
    """What install added: rules by kind, env variables (name -> value), hook commands by event,
    and the containers it created (path -> "absent" or "null")."""

    rules: dict[str, list[str]]
    env: dict[str, str]
    hooks: dict[str, list[str]]
    created: dict[str, str]

    @classmethod
    def empty(cls) -> BlockRecord:
        return cls({}, {}, {}, {})

    def to_json(self) -> dict[str, Any]:
        return {"rules": self.rules, "env": self.env, "hooks": self.hooks,
                "created": self.created}

    @classmethod
    def from_json(cls, data: Any) -> BlockRecord:
        if not isinstance(data, dict):
            raise SettingsError("the record of what install added is not a JSON object")

        def strings(value: Any) -> list[str]:
            return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []

        def table(value: Any) -> dict[str, Any]:
            return value if isinstance(value, dict) else {}

        return cls({k: strings(v) for k, v in table(data.get("rules")).items()},
                   {k: v for k, v in table(data.get("env")).items() if isinstance(v, str)},
                   {k: strings(v) for k, v in table(data.get("hooks")).items()},
                   {k: v for k, v in table(data.get("created")).items()
                    if v in ("absent", "null")})


class BlockChange(NamedTuple):
    text: str
    added: list[str]
    removed: list[str]
    warnings: list[str]
    record: BlockRecord


def _containers(events: list[str]) -> list[tuple[tuple[str, ...], type]]:
    return [*_BASE, *((("hooks", event), list) for event in events)]


def _check(data: dict[str, Any], events: list[str]) -> None:
    for path, kind in _containers(events):
        value = _get(data, path)
        if value is not None and not isinstance(value, kind):
            expected = "an object" if kind is dict else "a list"
            raise SettingsError(f"{'.'.join(path)} is a JSON {type(value).__name__}, not "
                                f"{expected}")


def _ensure_path(edit: _Edit, path: tuple[str, ...], leaf: Any) -> bool:
    """Create the containers down to PATH (its last one holding LEAF) where missing; whether
    the last one was created with LEAF in it."""
    for depth in range(1, len(path)):
        edit.ensure(path[:depth], {})
    return edit.ensure(path, leaf)


def _add_to_list(edit: _Edit, path: tuple[str, ...], value: Any) -> None:
    if not _ensure_path(edit, path, [value]):
        edit.append(path, value)


def _hook_commands(group: Any) -> list[str]:
    hooks = group.get("hooks") if isinstance(group, dict) else None
    return [h.get("command") for h in hooks if isinstance(h, dict)] if isinstance(hooks, list) \
        else []


def _find_group(data: dict[str, Any], event: str, commands: list[str]) -> list[int]:
    groups = _get(data, ("hooks", event)) or []
    return [index for index, group in enumerate(groups)
            if any(command in commands for command in _hook_commands(group))]


def install(text: str, block: dict[str, Any], record: BlockRecord | None) -> BlockChange:
    """TEXT with BLOCK merged in; RECORD is what an earlier install added."""
    previous = record or BlockRecord.empty()
    hooks = block.get("hooks") or {}
    events = sorted(set(hooks) | set(previous.hooks))
    _check(load(text), events)
    edit = _Edit(text)
    added: list[str] = []
    removed: list[str] = []
    warnings: list[str] = []
    rules: dict[str, list[str]] = {k: list(v) for k, v in previous.rules.items()}
    for kind in KINDS:
        for rule in (block.get("permissions") or {}).get(kind, []):
            if rule in (_get(edit.data, ("permissions", kind)) or []):
                continue
            _add_to_list(edit, ("permissions", kind), rule)
            added.append(f"permissions.{kind}: {rule}")
            rules.setdefault(kind, []).append(rule)
    env = dict(previous.env)
    for name, value in (block.get("env") or {}).items():
        current = (_get(edit.data, ("env",)) or {}).get(name)
        if current == value:
            continue
        if current is None:
            if not _ensure_path(edit, ("env",), {name: value}):
                edit.ensure(("env", name), value)
        elif name in previous.env and current == previous.env[name]:
            edit.replace(("env", name), value)
        else:
            warnings.append(f"env.{name} is {current!r}, not {value!r}: left as found")
            continue
        added.append(f"env.{name}: {value}")
        env[name] = value
    hook_record: dict[str, list[str]] = {}
    for event in events:
        groups = hooks.get(event, [])
        wanted = [c for group in groups for c in _hook_commands(group)]
        stale = [c for c in previous.hooks.get(event, []) if c not in wanted]
        for index in reversed(_find_group(edit.data, event, stale)):
            edit.remove(("hooks", event), index)
            removed += [f"hooks.{event}: {c}" for c in stale]
        for group in groups:
            commands = _hook_commands(group)
            found = _find_group(edit.data, event, commands)
            if found and _get(edit.data, ("hooks", event))[found[0]] == group:
                continue
            if found:
                edit.replace(("hooks", event, found[0]), group)
            else:
                _add_to_list(edit, ("hooks", event), group)
            added += [f"hooks.{event}: {c}" for c in commands]
        if wanted:
            hook_record[event] = wanted
    created = dict(previous.created)
    containers = {".".join(path) for path, _kind in _containers(events)}
    for path, before in edit.created.items():
        if path in containers:
            created.setdefault(path, before)
    return BlockChange(edit.rendered(), added, removed, warnings,
                       BlockRecord(rules, env, hook_record, created))


def uninstall(text: str, record: BlockRecord) -> BlockChange:
    """TEXT without what RECORD says install added."""
    events = sorted(record.hooks)
    _check(load(text), events)
    edit = _Edit(text)
    removed: list[str] = []
    warnings: list[str] = []
    for event, commands in record.hooks.items():
        for index in reversed(_find_group(edit.data, event, commands)):
            group = _get(edit.data, ("hooks", event))[index]
            removed += [f"hooks.{event}: {c}" for c in _hook_commands(group) if c in commands]
            edit.remove(("hooks", event), index)
    for kind, ours in record.rules.items():
        present = _get(edit.data, ("permissions", kind)) or []
        for index in reversed(range(len(present))):
            if present[index] in ours:
                edit.remove(("permissions", kind), index)
                removed.append(f"permissions.{kind}: {present[index]}")
    for name, value in record.env.items():
        current = _get(edit.data, ("env",)) or {}
        if name not in current:
            continue
        if current[name] != value:
            warnings.append(f"env.{name} is {current[name]!r} now, not the {value!r} install "
                            "set: left as found")
            continue
        edit.remove(("env",), list(current).index(name))
        removed.append(f"env.{name}: {value}")
    put_back(edit, dict(record.created), _containers(events))
    return BlockChange(edit.text if text.strip() else text, [], removed, warnings,
                       BlockRecord.empty())
