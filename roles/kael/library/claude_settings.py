#!/usr/bin/python
"""Ansible module: merge our Stop hook and read-only permissions into Claude Code's settings."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.kael_settings import (
    SettingsError,
    hook_present,
    install,
    load,
    render,
    uninstall,
)

DOCUMENTATION = r"""
---
module: claude_settings
short_description: Add or remove kael-thread-rebuild's Stop hook and permissions in settings.json
description:
  - With O(state=present), appends the Stop hook entry
    C({"type":"command","command":HOOK_COMMAND,"timeout":HOOK_TIMEOUT}) to
    C(hooks.Stop[*].hooks) unless an entry with the same command is there, and adds the four
    read-only tools C(mcp__SERVER__thread_rebuild_doctor|dirty|plan|status) to
    C(permissions.allow). C(thread_rebuild_request), C(cancel) and C(rollback_request) are never
    added, so they keep asking the human.
  - Every other key, hook, matcher and permission is kept exactly, in its order. A file whose
    C(hooks) key was dropped (Claude Code has been seen rewriting the file without it) gets it
    back. A missing, empty or C({}) file is treated as an empty object.
  - With O(state=absent), removes only what O(state=present) adds (the hook entry, matched by
    command, and the four permissions); a group, C(hooks.Stop), C(hooks), C(permissions.allow)
    or C(permissions) emptied by that removal goes too.
  - A file that is not a JSON object (invalid JSON, duplicate keys, C(NaN), a list at the top, a
    C(hooks) that is not an object...) is refused and left untouched, byte for byte.
  - When the file changes, it is first backed up, then replaced atomically (a temporary file in
    the same directory renamed over it) with the same owner, group and mode. A new file takes the
    owner and group of its directory and mode 0600. A symlink is followed and its target written.
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
      - Where backups go (created with mode 0700 and the file's owner when missing); next to the
        file when omitted. Backups are named C(settings.json.YYYYmmddTHHMMSS.PID.bak).
    type: path
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
notes:
  - Runs on the managed host with Python 3.9+ and the standard library only.
author:
  - kael-thread-rebuild maintainers
"""

EXAMPLES = r"""
- name: Wire the Stop hook and the read-only tools into Claude Code
  claude_settings:
    path: /home/kael/.claude/settings.json
    hook_command: docker exec -i kael-companion kael-thread-rebuild hook-stop
    backup_dir: /var/lib/kael-thread-rebuild/companion/settings-backups

- name: Take them out again
  claude_settings:
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
backup_file:
  description: The backup taken before the change.
  returned: changed and O(backup)
  type: str
hook_present:
  description: Whether our Stop hook entry is in the file afterwards.
  returned: success
  type: bool
"""


def _backup(path: str, backup_dir: str | None) -> str:
    info = os.stat(path)
    directory = backup_dir or os.path.dirname(path)
    if not os.path.isdir(directory):
        os.makedirs(directory, mode=0o700)
        os.chown(directory, info.st_uid, info.st_gid)
    stamp = time.strftime("%Y%m%dT%H%M%S")
    target = os.path.join(directory, f"{os.path.basename(path)}.{stamp}.{os.getpid()}.bak")
    shutil.copy2(path, target)
    os.chown(target, info.st_uid, info.st_gid)
    os.chmod(target, 0o600)
    return target


def _write(module: AnsibleModule, path: str, text: str) -> None:
    """Replace PATH atomically, keeping its owner, group and mode (a new file: the directory's
    owner and group, mode 0600)."""
    directory = os.path.dirname(path)
    new = not os.path.exists(path)
    info = os.stat(directory if new else path)
    uid, gid, mode = info.st_uid, info.st_gid, 0o600 if new else stat.S_IMODE(info.st_mode)
    handle, temp = tempfile.mkstemp(prefix=".settings.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.chown(temp, uid, gid)
        os.chmod(temp, mode)
        module.atomic_move(temp, path)
    finally:
        if os.path.exists(temp):
            os.unlink(temp)
    if new:  # atomic_move gives a new file the umask's mode
        os.chown(path, uid, gid)
        os.chmod(path, mode)


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
        },
        supports_check_mode=True,
    )
    params = module.params
    path = os.path.realpath(params["path"])
    if not os.path.isdir(os.path.dirname(path)):
        module.fail_json(msg=f"{os.path.dirname(path)} does not exist: is this Claude Code's "
                             "config dir?", path=path)
    try:
        with open(path, "rb") as handle:
            original = handle.read().decode("utf-8")
    except FileNotFoundError:
        original = ""
    except (OSError, UnicodeDecodeError) as exc:
        module.fail_json(msg=f"{path} cannot be read as UTF-8 text: {exc}; left untouched",
                         path=path)
    try:
        data = load(original)
        if params["state"] == "present":
            change = install(data, params["hook_command"], params["hook_timeout"],
                             params["server"], params["permissions"])
        else:
            change = uninstall(data, params["hook_command"], params["server"],
                               params["permissions"])
    except SettingsError as exc:
        module.fail_json(msg=f"{path}: {exc}; the file was left untouched. Fix it by hand (Claude "
                             "Code cannot read it either) and run again.", path=path)
    for warning in change.warnings:
        module.warn(f"{path}: {warning}")
    changed = bool(change.added or change.removed)
    result = {"changed": changed, "path": path, "added": change.added,
              "removed": change.removed, "hook_present": bool(params["hook_command"])
              and hook_present(change.data, params["hook_command"])}
    if not changed:
        module.exit_json(**result)
    after = render(change.data, original)
    result["diff"] = {"before": original, "after": after,
                      "before_header": path, "after_header": path}
    if module.check_mode:
        module.exit_json(**result)
    try:
        if params["backup"] and os.path.exists(path):
            result["backup_file"] = _backup(path, params["backup_dir"])
        _write(module, path, after)
    except OSError as exc:
        module.fail_json(msg=f"cannot write {path}: {exc}", **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
