#!/usr/bin/python
"""Ansible module: merge our Stop hook and read-only permissions into Claude Code's settings."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: claude_settings
short_description: Add or remove kael-thread-rebuild's Stop hook and permissions in settings.json
description:
  - With O(state=present), adds the Stop hook entry
    C({"type":"command","command":HOOK_COMMAND,"timeout":HOOK_TIMEOUT}) as a group of its own,
    C({"hooks":[ENTRY]}), at the end of C(hooks.Stop), never into another group. An earlier
    spelling of our entry (a hook-stop or kael-hook command whose C(--config) is the same file),
    or one with another timeout, is replaced, so there is exactly one. It adds the four read-only
    tools C(mcp__SERVER__thread_rebuild_doctor|dirty|plan|status) to C(permissions.allow).
    C(thread_rebuild_request), C(cancel) and C(rollback_request) are never added, so they keep
    asking the human.
  - The file's text is spliced, never re-serialised; every byte outside our entries stays as it
    was (escapes such as C(caf\u00e9), numbers such as C(1.50), spacing, key order). A file
    whose C(hooks) key was dropped (Claude Code has been seen rewriting the file without it)
    gets it back. A missing or empty file is treated as C({}); a C(null) C(hooks),
    C(hooks.Stop), C(permissions) or C(permissions.allow) as absent.
  - What O(state=present) added is kept in a record, O(record). With O(state=absent), only
    that is removed, the hook entry (and its group), the permissions it added (not one the
    user had before), and a container it created (C(hooks), C(hooks.Stop), C(permissions),
    C(permissions.allow)) when nothing else is in it, back to C(null) if it was C(null). Empty
    C({}) and C([]) the user had stay. Without a record (an install by a version that kept
    none) the four permissions are removed and no container.
  - A file that is not a JSON object (invalid JSON, duplicate keys, C(NaN), a list at the top, a
    C(hooks) that is not an object...) is refused and left untouched, byte for byte.
  - When the file changes, it is first backed up, then replaced atomically (a temporary file in
    the same directory renamed over it) with the same owner, group and mode. A new file belongs
    to the user the module runs as, mode 0600. A symlink at O(path) (the user's dotfiles) is
    followed and its target written, with that user's permissions.
  - Run it as the user whose settings these are (C(become_user)). Run as root, it refuses a
    O(path), O(backup_dir) or O(record) where a component of the path, or of the place it
    resolves to, belongs to another user, rather than read or write there following a path that
    user chose. A O(backup_dir) or O(record) that is a symlink is refused too (they are ours,
    never a symlink). Each refusal is one line naming the path; nothing is written.
  - Warns (without changing them) about rules that would let the changing tools run unasked
    (C(mcp__SERVER), C(mcp__SERVER__*)) or that override our allow rules (C(ask), C(deny)).
version_added: "0.1.0"
options:
  path:
    description: Claude Code's settings file (C($CLAUDE_CONFIG_DIR/settings.json)).
    type: path
    required: true
  state:
    description: Whether our entries should be present or absent.
    type: str
    choices: [present, absent]
    default: present
  hook_command:
    description:
      - The Stop hook's command, matched exactly. Omit it to manage no hook (the pointer base's
        runner forwards every Stop itself).
    type: str
  hook_timeout:
    description: The hook's timeout in seconds, used when the entry is added.
    type: int
    default: 10
  server:
    description: The MCP server name the permissions name.
    type: str
    default: kael-thread-rebuild
  permissions:
    description: Whether to manage the four read-only permissions.
    type: bool
    default: true
  backup:
    description: Back the file up before changing it.
    type: bool
    default: true
  backup_dir:
    description:
      - Where backups go (created with mode 0700 when missing); next to the file when omitted.
        Backups are named C(settings.json.YYYYmmddTHHMMSS.PID.bak) (C(.PID.N.bak) for a second
        one within the same second).
    type: path
  record:
    description:
      - The record of what O(state=present) added, which O(state=absent) reads (and deletes).
        Default C(BACKUP_DIR/settings.json.added.json), or beside the file
        (C(.settings.json.kael-thread-rebuild.json)) without O(backup_dir).
    type: path
extends_documentation_fragment:
  - kael.appliance.module
attributes:
  diff_mode:
    support: full
"""

EXAMPLES = r"""
- name: Wire the Stop hook and the read-only tools into Claude Code
  kael.appliance.claude_settings:
    path: /home/kael/.claude/settings.json
    hook_command: docker exec -i kael-companion kael-thread-rebuild hook-stop
    backup_dir: /var/lib/kael-thread-rebuild/companion/settings-backups

- name: Take them out again
  kael.appliance.claude_settings:
    path: /home/kael/.claude/settings.json
    hook_command: docker exec -i kael-companion kael-thread-rebuild hook-stop
    state: absent
"""

RETURN = r"""
path:
  description: The file written (a symlink's target).
  returned: always
  type: str
added:
  description: What was added, one line per item.
  returned: success
  type: list
  elements: str
  sample: ["hooks.Stop: docker exec -i kael-companion kael-thread-rebuild hook-stop"]
removed:
  description: What was removed, one line per item.
  returned: success
  type: list
  elements: str
record:
  description: The record of what install added (empty after an uninstall).
  returned: success
  type: dict
backup_file:
  description: The backup taken before the change.
  returned: changed and O(backup)
  type: str
hook_present:
  description: Whether a Stop hook of this instance (O(hook_command), or an earlier spelling of it
    whose C(--config) is the same file) is in the file afterwards.
  returned: success
  type: bool
"""

import json
import os
import stat

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.kael.appliance.plugins.module_utils.kael_file_write import (
    backup as _backup,
)
from ansible_collections.kael.appliance.plugins.module_utils.kael_file_write import (
    make_dir as _make_dir,
)
from ansible_collections.kael.appliance.plugins.module_utils.kael_file_write import write as _write
from ansible_collections.kael.appliance.plugins.module_utils.kael_settings import (
    Record,
    SettingsError,
    hook_present,
    install,
    uninstall,
)
from ansible_collections.kael.appliance.plugins.module_utils.kael_user_files import (
    open_ours,
    root_refusal,
    symlink_refusal,
)


def _record_path(params: dict) -> str:
    if params["record"]:
        return params["record"]
    if params["backup_dir"]:
        return os.path.join(params["backup_dir"], "settings.json.added.json")
    return os.path.join(os.path.dirname(os.path.realpath(params["path"])),
                        ".settings.json.kael-thread-rebuild.json")


def _read_record(path: str) -> Record | None:
    try:
        with os.fdopen(open_ours(path, os.O_RDONLY), "rb") as handle:
            return Record.from_json(json.loads(handle.read().decode("utf-8")))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise SettingsError(f"the record of what install added ({path}) cannot be read: "
                            f"{exc}") from None


def _write_record(module: AnsibleModule, path: str, record: Record) -> None:
    if record == Record():
        if os.path.lexists(path):
            os.unlink(path)
        return
    _make_dir(os.path.dirname(path))
    _write(module, path, json.dumps(record.to_json(), indent=2) + "\n")


def _place_problem(params: dict, record_path: str) -> str | None:
    """Why the module must not go on: root asked to read or write the Claude user's places, or a
    file or directory of ours (the backup dir, the record) that is a symlink."""
    checks = [root_refusal(params["path"]), root_refusal(record_path)]
    if params["backup_dir"]:
        checks += [root_refusal(params["backup_dir"]),
                   symlink_refusal(params["backup_dir"], "the backup dir")]
    checks.append(symlink_refusal(record_path, "the record of what install added"))
    return next((problem for problem in checks if problem is not None), None)


def _dir_problem(directory: str) -> str | None:
    try:
        if stat.S_ISDIR(os.stat(directory).st_mode):
            return None
    except FileNotFoundError:
        pass
    except OSError as exc:
        return f"{directory} cannot be reached as uid {os.geteuid()} ({exc.strerror})"
    return f"{directory} does not exist: is this Claude Code's config dir?"


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "path": {"type": "path", "required": True},
            "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
            "hook_command": {"type": "str"},
            "hook_timeout": {"type": "int", "default": 10},
            "server": {"type": "str", "default": "kael-thread-rebuild"},
            "permissions": {"type": "bool", "default": True},
            "backup": {"type": "bool", "default": True},
            "backup_dir": {"type": "path"},
            "record": {"type": "path"},
        },
        supports_check_mode=True,
    )
    params = module.params
    record_path = _record_path(params)
    problem = _place_problem(params, record_path)
    if problem is not None:
        module.fail_json(msg=problem, path=params["path"])
    path = os.path.realpath(params["path"])
    problem = _dir_problem(os.path.dirname(path))
    if problem is not None:
        module.fail_json(msg=problem, path=path)
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
        original = raw.decode("utf-8")
    except FileNotFoundError:
        raw, original = b"", ""
    except (OSError, UnicodeDecodeError) as exc:
        shown = path if path == params["path"] else f"{params['path']} (-> {path})"
        module.fail_json(msg=f"{shown} cannot be read as UTF-8 text as uid {os.geteuid()}: "
                             f"{exc}; left untouched", path=path)
    try:
        record = _read_record(record_path)
        if params["state"] == "present":
            change = install(original, params["hook_command"], params["hook_timeout"],
                             params["server"], params["permissions"], record)
        else:
            change = uninstall(original, params["hook_command"], params["server"],
                               params["permissions"], record)
    except SettingsError as exc:
        module.fail_json(msg=f"{path}: {exc}; the file was left untouched. Fix it by hand (Claude "
                             "Code cannot read it either) and run again.", path=path)
    for warning in change.warnings:
        module.warn(f"{path}: {warning}")
    changed = change.text != original and bool(change.added or change.removed)
    record_changed = change.record != (record or Record())
    result = {"changed": changed or record_changed, "path": path, "added": change.added,
              "removed": change.removed, "record": change.record.to_json(),
              "hook_present": bool(params["hook_command"])
              and hook_present(change.data, params["hook_command"])}
    if changed:
        result["diff"] = {"before": original, "after": change.text,
                          "before_header": path, "after_header": path}
    if module.check_mode or not result["changed"]:
        module.exit_json(**result)
    try:
        if changed:
            if params["backup"] and os.path.exists(path):
                result["backup_file"] = _backup(path, raw, params["backup_dir"])
            _write(module, path, change.text)
        if record_changed:
            _write_record(module, record_path, change.record)
    except OSError as exc:
        module.fail_json(msg=f"cannot write {path}: {exc}", **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
