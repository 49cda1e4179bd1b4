"""What every module of kael.appliance that runs on the household documents the same way."""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options: {}
attributes:
  check_mode:
    description: Can run in check mode and return what it would change without changing it.
    support: full
  diff_mode:
    description: Returns what it changed (or would change, in check mode) in diff mode.
    support: none
  platform:
    description: Target OS/families that can be operated against.
    support: N/A
    platforms: posix
notes:
  - Runs on the managed host with Python 3.9+ and the standard library only.
author:
  - kael-thread-rebuild maintainers (@kael-thread-rebuild)
"""
