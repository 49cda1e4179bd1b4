"""Filters of the kael-thread-rebuild installer (run on the control machine)."""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Sequence
from typing import Any

from ansible.errors import AnsibleFilterError
from ansible_collections.kael.appliance.plugins.module_utils.kael_claude_code import (
    start_command as _cli,
)


def kael_resume_command(start: str | Sequence[str], shell: str = "/bin/sh") -> list[str]:
    """The resume command for a start command given as an argv or as shell text."""
    try:
        if isinstance(start, str):
            return list(_cli.resume_from_shell(start, shell).argv)
        return list(_cli.resume_from_argv(list(start)).argv)
    except _cli.StartCommandError as exc:
        raise AnsibleFilterError(f"kael_resume_command: {exc}") from None


_MOUNTED = ("mount", "ensure", "optional")
#: Who must own a mount source, per kael-mounts' OWNER column: (uid 0 allowed, the user's allowed).
_OWNERS = {"user": (False, True), "root": (True, False), "root-or-user": (True, True)}


def kael_mount_paths(lines: Sequence[str]) -> list[str]:
    """The host paths of the `mount`, `ensure` and `optional` lines of the image's `kael-mounts`,
    in order: what the role looks at (not following a final symlink) and resolves before
    kael_mount_args."""
    return [line.split("\t")[1] for line in lines if line.partition("\t")[0] in _MOUNTED]


def _refusal(path: str, owner: str, stat: dict[str, Any], real: str, uid: int) -> str | None:
    """Why PATH may not be bind-mounted for the Claude user UID (image/lib.sh's kael_mountable):
    it must exist, be its own real path (root's dockerd would follow the user's links anywhere)
    and belong to OWNER; docker's --mount takes no comma or quote in a path."""
    if not stat.get("exists"):
        return f"{path} does not exist on this host"
    if stat.get("islnk") or real != path:
        return f"{path} is not its real path ({real}): a symlink in a mount is refused"
    if "," in path or '"' in path:
        return f"{path} holds a comma or a quote, which a mount cannot take"
    root_ok, user_ok = _OWNERS.get(owner, (False, True))
    have = stat.get("uid")
    if (root_ok and have == 0) or (user_ok and have == uid):
        return None
    whom = " or ".join(name for name, ok in (("root", root_ok),
                                             (f"the Claude user (uid {uid})", user_ok)) if ok)
    return f"{path} belongs to uid {have}, not to {whom}: refused as a mount"


def kael_mount_args(lines: Sequence[str], stats: Sequence[dict[str, Any]], reals: Sequence[str],
                    uid: int) -> dict[str, Any]:
    """docker_container's bind `mounts` and `env` from the lines of the image's `kael-mounts`,
    and `refused`: why a source may not be mounted, one line each. STATS (ansible's stat, not
    following a final symlink) and REALS (realpath -m) are those of kael_mount_paths(LINES), in
    order; UID is the Claude user's. `mount PATH MODE OWNER` and `ensure …` always (the role
    creates a missing `ensure` path), `optional …` when PATH or a symlink is there, `env
    NAME=VALUE` (`instance`, `activation` and `state` are facts, not arguments)."""
    mounts: list[dict[str, Any]] = []
    refused: list[str] = []
    env: dict[str, str] = {}
    seen = dict(zip(kael_mount_paths(lines), zip(stats, reals, strict=True), strict=True))
    for line in lines:
        kind, _tab, rest = line.partition("\t")
        fields = rest.split("\t")
        if kind in _MOUNTED:
            path, mode, owner = [*fields, "user"][:3]
            stat, real = seen[path]
            if kind == "optional" and not (stat.get("exists") or stat.get("islnk")):
                continue
            why = _refusal(path, owner, stat, real, int(uid))
            if why:
                refused.append(why)
            mounts.append({"type": "bind", "source": path, "target": path,
                           "read_only": mode == "ro"})
        elif kind == "env":
            name, _eq, value = fields[0].partition("=")
            env[name] = value
        elif kind not in ("instance", "activation", "state"):
            raise AnsibleFilterError(f"kael_mount_args: unexpected line from kael-mounts: {line!r}")
    return {"mounts": mounts, "env": env, "refused": refused}


def kael_bind_args(mounts: Sequence[dict[str, Any]]) -> list[str]:
    """`docker run --mount` arguments for bind mounts as Docker reports them (a container's
    HostConfig.Mounts: Source, Target, ReadOnly); --mount never creates a missing source."""
    return [f"--mount=type=bind,source={m['Source']},target={m['Target']}"
            + (",readonly" if m.get("ReadOnly") else "") for m in mounts]


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


def kael_ro_mounts(paths: Sequence[str]) -> list[str]:
    """`--mount=type=bind,source=P,target=P,readonly` for each path (a regex replacement with
    back references in the task came out of Ansible's templating as a literal `\\1`)."""
    return kael_bind_args([{"Source": path, "Target": path, "ReadOnly": True} for path in paths])


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
                "kael_doctor_warnings": kael_doctor_warnings, "kael_ro_mounts": kael_ro_mounts,
                "kael_mount_paths": kael_mount_paths, "kael_bind_args": kael_bind_args,
                "kael_from_toml": kael_from_toml, "kael_roots_alone": kael_roots_alone}
