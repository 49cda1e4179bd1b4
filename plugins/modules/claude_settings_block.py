#!/usr/bin/python
"""Ansible module: merge a block of settings (permission rules, env, hook groups) into Claude
Code's settings.json beside the user's own, and take out exactly what it added."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: claude_settings_block
short_description: Add or remove a block of rules, env and hooks in Claude Code's settings.json
description:
  - With O(state=present), adds to C(settings.json) what O(block) holds and the file lacks, i.e. the
    rules of C(block.permissions.allow) and C(block.permissions.ask), the variables of
    C(block.env) (one the user set to another value is left as found, with a warning), and the
    hook groups of C(block.hooks.EVENT), each appended as its own group after the user's (a group
    of ours with another spelling, found by its command, is replaced). The block is what
    C(kael-advisor pieces --json) prints as C(settings).
  - The text is spliced, never re-serialised (kael_settings' editor); every byte outside our
    entries stays as it was.
  - What O(state=present) added is kept in O(record). With O(state=absent), only that is
    removed; our hook groups, the rules and variables it added (a variable the user changed
    since is left, with a warning), and a container it created (C(permissions),
    C(permissions.allow), C(permissions.ask), C(env), C(hooks), C(hooks.EVENT)) when nothing else
    is in it, back to C(null) if it was C(null). Install then uninstall gives the file back byte
    for byte.
  - A file that is not a JSON object, or whose containers have other types, is refused and left
    untouched. A change is backed up to O(backup_dir) first and written atomically with the same
    owner, group and mode.
  - Run it as the user whose settings these are (C(become_user)). Run as root, it refuses a path
    in a place another user can change; a O(backup_dir) or O(record) that is a symlink is refused.
version_added: "0.1.0"
options:
  path:
    description: Claude Code's settings file (C($CLAUDE_CONFIG_DIR/settings.json)).
    type: path
    required: true
  state:
    description: Whether the block should be present or absent.
    type: str
    choices: [present, absent]
    default: present
  block:
    description: The settings to merge (C(permissions.allow), C(permissions.ask), C(env), C(hooks)).
    type: dict
    default: {}
  backup:
    description: Back the file up before changing it.
    type: bool
    default: true
  backup_dir:
    description: Where backups and the record go (created with mode 0700 when missing).
    type: path
    required: true
  record:
    description: The record's file name in O(backup_dir).
    type: str
    default: settings.json.added.json
extends_documentation_fragment:
  - kael.appliance.module
attributes:
  diff_mode:
    support: full
"""

EXAMPLES = r"""
- name: Merge the advisor's settings
  kael.appliance.claude_settings_block:
    path: /home/alice/.claude/settings.json
    block: "{{ pieces.settings }}"
    backup_dir: /home/alice/.claude/kael-advisor-backups
"""

RETURN = r"""
added:
  description: What was added, one line per item.
  returned: success
  type: list
  elements: str
removed:
  description: What was removed, one line per item.
  returned: success
  type: list
  elements: str
backup_file:
  description: The backup taken before the change.
  returned: changed and O(backup)
  type: str
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.kael.appliance.plugins.module_utils.kael_file_write import (
    backup,
    make_dir,
    read_text,
    write,
)
from ansible_collections.kael.appliance.plugins.module_utils.kael_settings import SettingsError
from ansible_collections.kael.appliance.plugins.module_utils.kael_settings_block import (
    BlockRecord,
    install,
    uninstall,
)
from ansible_collections.kael.appliance.plugins.module_utils.kael_user_files import (
    open_ours,
    root_refusal,
    symlink_refusal,
)


def _read_record(path: str) -> BlockRecord | None:
    try:
        with os.fdopen(open_ours(path, os.O_RDONLY), "rb") as handle:
            return BlockRecord.from_json(json.loads(handle.read().decode("utf-8")))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise SettingsError(f"the record of what install added ({path}) cannot be read: "
                            f"{exc}") from None


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "path": {"type": "path", "required": True},
            "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
            "block": {"type": "dict", "default": {}},
            "backup": {"type": "bool", "default": True},
            "backup_dir": {"type": "path", "required": True},
            "record": {"type": "str", "default": "settings.json.added.json"},
        },
        supports_check_mode=True,
    )
    params = module.params
    record_path = os.path.join(params["backup_dir"], params["record"])
    problem = next((found for found in (
        root_refusal(params["path"]), root_refusal(params["backup_dir"]),
        symlink_refusal(params["backup_dir"], "the backup dir"),
        symlink_refusal(record_path, "the record of what install added")) if found), None)
    if problem is not None:
        module.fail_json(msg=problem, path=params["path"])
    path = os.path.realpath(params["path"])
    try:
        raw, original = read_text(path)
        record = _read_record(record_path)
        if params["state"] == "present":
            change = install(original, params["block"], record)
        else:
            change = uninstall(original, record or BlockRecord.empty())
    except (OSError, UnicodeDecodeError) as exc:
        module.fail_json(msg=f"{path} cannot be read as uid {os.geteuid()}: {exc}; left "
                             "untouched", path=path)
    except SettingsError as exc:
        module.fail_json(msg=f"{path}: {exc}; the file was left untouched. Fix it by hand (Claude "
                             "Code cannot read it either) and run again.", path=path)
    for warning in change.warnings:
        module.warn(f"{path}: {warning}")
    changed = change.text != original
    record_changed = change.record != (record or BlockRecord.empty())
    result = {"changed": changed or record_changed, "path": path, "added": change.added,
              "removed": change.removed}
    if changed:
        result["diff"] = {"before": original, "after": change.text,
                          "before_header": path, "after_header": path}
    if module.check_mode or not result["changed"]:
        module.exit_json(**result)
    try:
        if changed:
            if params["backup"] and os.path.exists(path):
                result["backup_file"] = backup(path, raw, params["backup_dir"])
            write(module, path, change.text)
        if record_changed:
            if change.record == BlockRecord.empty():
                if os.path.lexists(record_path):
                    os.unlink(record_path)
            else:
                make_dir(params["backup_dir"])
                write(module, record_path, json.dumps(change.record.to_json(), indent=2) + "\n")
    except OSError as exc:
        module.fail_json(msg=f"cannot write {path}: {exc}", **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
