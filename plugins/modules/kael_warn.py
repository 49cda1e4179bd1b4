#!/usr/bin/python
"""Documentation of the action plugin kael_warn (plugins/action/kael_warn.py): it runs on the
control machine only, so this module has no code of its own."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: kael_warn
short_description: Show each line of a message as a warning of the play
description:
  - Shows each line of O(msg) as a warning of the play (a C([WARNING]) line), changes nothing
    and runs nothing on the host. The doctor's checks that warn use it, since a warning is no
    reason to fail a run, and a warning is what Ansible prints again in the play's summary.
  - An action plugin; it runs on the control machine only.
options:
  msg:
    description: One warning, or a list of them (each one line of the play's output).
    type: raw
    required: true
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  platform:
    platforms: all
author:
  - kael-thread-rebuild maintainers (@kael-thread-rebuild)
"""

EXAMPLES = r"""
- name: Say what the doctor warned of
  kael.appliance.kael_warn:
    msg:
      - "companion: mcp_loaded: the running Claude Code has not loaded the MCP server"
"""

RETURN = r"""
warnings:
  description: The lines of O(msg), shown as warnings.
  returned: always
  type: list
  elements: str
"""
