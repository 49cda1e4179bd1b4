#!/usr/bin/python
"""Ansible module: a marked block in a text file of the user's (CLAUDE.md), in or out, the rest of
the file kept byte for byte."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: marked_block
short_description: Put a marked block into a text file, or take it out, keeping every other byte
description:
  - The block's first and last lines are its markers. With O(state=present) the block replaces
    the one already there, else is appended (after text that ends with a newline, or to an empty
    or missing file, which is created with mode 0644), or put first in a file whose last line has
    no newline, so no byte of the user's is changed to make room.
  - With O(state=absent) the block is removed, from its first line to its last, and the file is
    as it was before; a file that is empty then and that O(created) says install created is
    removed.
  - Unlike C(blockinfile), install then uninstall gives the file back byte for byte.
  - Run it as the file's user (C(become_user)); as root it refuses a place another user can change.
version_added: "0.1.0"
options:
  path:
    description: The file (a symlink is followed, with the permissions of the user it runs as).
    type: path
    required: true
  block:
    description: The block, its markers as its first and last lines.
    type: str
    required: true
  state:
    description: Whether the block should be present or absent.
    type: str
    choices: [present, absent]
    default: present
  created:
    description: With O(state=absent), whether install created the file (it is removed when empty).
    type: bool
    default: false
extends_documentation_fragment:
  - kael.appliance.module
attributes:
  diff_mode:
    support: full
"""

EXAMPLES = r"""
- name: The advisor-discipline block in CLAUDE.md
  kael.appliance.marked_block:
    path: /home/alice/.claude/CLAUDE.md
    block: "{{ pieces.templates['CLAUDE.md'] }}"
"""

RETURN = r"""
created:
  description: Whether this run created the file.
  returned: success
  type: bool
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.kael.appliance.plugins.module_utils.kael_file_write import read_text, write
from ansible_collections.kael.appliance.plugins.module_utils.kael_marked import (
    find,
    with_block,
    without,
)
from ansible_collections.kael.appliance.plugins.module_utils.kael_user_files import root_refusal


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "path": {"type": "path", "required": True},
            "block": {"type": "str", "required": True},
            "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
            "created": {"type": "bool", "default": False},
        },
        supports_check_mode=True,
    )
    params = module.params
    problem = root_refusal(params["path"])
    if problem is not None:
        module.fail_json(msg=problem)
    path = os.path.realpath(params["path"])
    try:
        _data, original = read_text(path)
    except (OSError, UnicodeDecodeError) as exc:
        module.fail_json(msg=f"{path} cannot be read as uid {os.geteuid()}: {exc}")
    exists = os.path.exists(path)
    lines = params["block"].rstrip("\n").splitlines()
    if params["state"] == "present":
        text = with_block(original, params["block"])
        remove = False
    else:
        text = without(original, lines[0], lines[-1])
        remove = exists and params["created"] and not text \
            and find(original, lines[0], lines[-1]) is not None
    changed = text != original or (not exists and params["state"] == "present")
    result = {"changed": changed, "path": path,
              "created": not exists and params["state"] == "present"}
    if changed:
        result["diff"] = {"before": original, "after": "" if remove else text,
                          "before_header": path, "after_header": path}
    if module.check_mode or not changed:
        module.exit_json(**result)
    try:
        if remove:
            os.unlink(path)
        else:
            write(module, path, text, new_mode=0o644)
    except OSError as exc:
        module.fail_json(msg=f"cannot write {path}: {exc}", **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
