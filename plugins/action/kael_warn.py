"""kael_warn: show each line of `msg` as a warning of the play (`[WARNING]: ...`), changing
nothing and running nothing on the host (a doctor check that warns is no reason to fail)."""

from __future__ import annotations

from typing import Any

from ansible.plugins.action import ActionBase


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("msg",))

    def run(self, tmp: Any = None, task_vars: Any = None) -> dict[str, Any]:
        result: dict[str, Any] = super().run(tmp, task_vars)
        lines = self._task.args.get("msg", [])
        result["warnings"] = [lines] if isinstance(lines, str) else [str(line) for line in lines]
        result["changed"] = False
        return result
