"""Filters of the kael-thread-rebuild installer (run on the control machine)."""

from __future__ import annotations

import importlib.util
import os
import sys
import tomllib
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

from ansible.errors import AnsibleFilterError


def _module_utils(package: str, name: str) -> ModuleType:
    """Module NAME of the role's module_utils package PACKAGE, which modules import as
    ansible.module_utils.PACKAGE.NAME; loaded under a name of its own, with its package, so that
    its relative imports work."""
    folder = os.path.join(os.path.dirname(os.path.dirname(__file__)), "module_utils", package)
    full = f"kael_filter_{package}"
    if full not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            full, os.path.join(folder, "__init__.py"), submodule_search_locations=[folder])
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[full] = module
        spec.loader.exec_module(module)
    return importlib.import_module(f"{full}.{name}")


_cli = _module_utils("kael_claude_code", "start_command")


def kael_resume_command(start: str | Sequence[str], shell: str = "/bin/sh") -> list[str]:
    """The resume command for a start command given as an argv or as shell text."""
    try:
        if isinstance(start, str):
            return list(_cli.resume_from_shell(start, shell).argv)
        return list(_cli.resume_from_argv(list(start)).argv)
    except _cli.StartCommandError as exc:
        raise AnsibleFilterError(f"kael_resume_command: {exc}") from None


def kael_mount_args(lines: Sequence[str], present: Sequence[str] = ()) -> dict[str, Any]:
    """`docker run` volumes and environment from the lines of the image's `kael-mounts`:
    `mount PATH MODE` and `ensure PATH MODE` always (the role creates a missing `ensure` path),
    `optional PATH MODE` when PATH is in PRESENT, `env NAME=VALUE` (`instance`, `activation` and
    `state` are facts, not arguments)."""
    volumes: list[str] = []
    env: dict[str, str] = {}
    for line in lines:
        kind, _, rest = line.partition("\t")
        fields = rest.split("\t")
        if kind in ("mount", "ensure") or (kind == "optional" and fields[0] in present):
            volumes.append(f"{fields[0]}:{fields[0]}:{fields[1]}")
        elif kind == "env":
            name, _, value = fields[0].partition("=")
            env[name] = value
        elif kind not in ("instance", "activation", "state", "optional"):
            raise AnsibleFilterError(f"kael_mount_args: unexpected line from kael-mounts: {line!r}")
    return {"volumes": volumes, "env": env}


def _doctor_line(check: dict[str, Any]) -> str:
    return (f"{check['name']}: {check.get('detail', '')}"
            + (f"; fix: {check['fix']}" if check.get("fix") else ""))


def kael_doctor_failures(report: dict[str, Any], summary: bool = False) -> Any:
    """The failing checks of a doctor report, one line each (name: detail; fix), or with
    SUMMARY a count of the checks that passed, the names of those that warn and of those
    skipped."""
    checks = report.get("checks", []) if isinstance(report, dict) else []
    if summary:
        skipped = [c["name"] for c in checks if c.get("skipped")]
        warned = [c["name"] for c in checks if c.get("ok") and c.get("warning")]
        passed = sum(1 for c in checks
                     if c.get("ok") and not c.get("skipped") and not c.get("warning"))
        return (f"{passed} ok, warnings: {', '.join(warned) or 'none'}, "
                f"skipped: {', '.join(skipped) or 'none'}")
    return [_doctor_line(c) for c in checks if not c.get("ok")]


def kael_doctor_warnings(report: dict[str, Any]) -> list[str]:
    """The checks of a doctor report that pass with a warning, one line each (name: detail;
    fix): worth acting on, no reason to fail the install."""
    checks = report.get("checks", []) if isinstance(report, dict) else []
    return [_doctor_line(c) for c in checks if c.get("ok") and c.get("warning")]


def kael_ro_volumes(paths: Sequence[str]) -> list[str]:
    """`--volume=P:P:ro` for each path (a regex replacement with back references in the task
    came out of Ansible's templating as a literal `\\1`)."""
    return [f"--volume={path}:{path}:ro" for path in paths]


def kael_from_toml(text: str) -> dict[str, Any]:
    """An instance config read back (uninstall without an install record); {} for no text."""
    return tomllib.loads(text) if text else {}


def kael_roots_alone(stat: dict[str, Any]) -> bool:
    """Whether a directory, as ansible.builtin.stat saw it (not following a symlink), is root's
    alone: a real directory of root's that no other user may write to. Only there does root
    create a directory for the Claude user (no path that user chose is followed)."""
    return bool(stat.get("exists") and stat.get("isdir") and not stat.get("islnk")
                and stat.get("uid") == 0 and not stat.get("wgrp") and not stat.get("woth"))


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"kael_resume_command": kael_resume_command, "kael_mount_args": kael_mount_args,
                "kael_doctor_failures": kael_doctor_failures,
                "kael_doctor_warnings": kael_doctor_warnings, "kael_ro_volumes": kael_ro_volumes,
                "kael_from_toml": kael_from_toml, "kael_roots_alone": kael_roots_alone}
