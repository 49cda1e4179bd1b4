"""Filters of the appliance role (run on the control machine): which daemons a run replaces."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

VERSION_LABEL = "org.opencontainers.image.version"


def _running(inspected: dict[str, Any]) -> dict[str, Any] | None:
    """The daemon `docker container inspect` found running, None when there is none."""
    if inspected.get("rc") != 0:
        return None
    (daemon,) = json.loads(inspected["stdout"])
    running: dict[str, Any] | None = daemon if daemon["State"]["Running"] else None
    return running


def kael_replaced_daemons(found: list[dict[str, Any]], inspected: list[dict[str, Any]],
                          config_plan: list[dict[str, Any]], new_image_id: str,
                          new_image: str) -> list[dict[str, Any]]:
    """Per instance of FOUND whose daemon runs and would be replaced (another image than
    NEW_IMAGE_ID, which is empty when that image is not on the host yet, or a config that
    changes): its names and paths, the image it runs, and why it is replaced."""
    replaced = []
    for item, look, plan in zip(found, inspected, config_plan, strict=True):
        daemon = _running(look)
        if daemon is None:
            continue
        image_changes = daemon["Image"] != new_image_id
        config_changes = bool(plan.get("changed"))
        if not (image_changes or config_changes):
            continue
        labels = daemon["Config"].get("Labels") or {}
        reasons = ([f"new image {new_image}"] if image_changes else []) + (
            ["new config"] if config_changes else [])
        replaced.append({
            "name": item["name"], "container": item["container"],
            "state_dir": item["state_dir"], "config_path": item["config_path"],
            "claude_user": item["claude_user"], "claude_gid": item["claude_gid"],
            "image_id": daemon["Image"], "image_ref": daemon["Config"]["Image"],
            "version": labels.get(VERSION_LABEL, ""),
            "image_changes": image_changes, "config_changes": config_changes,
            "why": "the installer replaces the daemon (" + ", ".join(reasons) + ")"})
    return replaced


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"kael_replaced_daemons": kael_replaced_daemons}
