"""`kael-advisor doctor`: small read-only checks of what a consultation needs. Nothing is
changed, and the provider's key is never shown."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from .errors import AdvisorError
from .places import kimi_home, kimi_program, sessions_dir
from .runner import agent_file, kimi_environment
from .table import BindingTable
from .windows import windows

VERSION_SECONDS = 30.0
RECENT_SECONDS = 86400.0
READ_ONLY_TOOLS = frozenset({"Read", "Glob", "Grep"})
_FRONTMATTER = re.compile(r"\A---\n(.*?)\n---\n", re.DOTALL)


@dataclass(frozen=True)
class Check:
    name: str
    status: Literal["ok", "warn", "fail"]
    detail: str


def kimi_version() -> Check:
    try:
        done = subprocess.run([kimi_program(), "--version"], capture_output=True, text=True,
                              timeout=VERSION_SECONDS, env=kimi_environment(), check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Check("kimi", "fail", f"{kimi_program()!r} cannot be run: {exc} "
                     "(install it or set KAEL_ADVISOR_KIMI)")
    said = (done.stdout.strip() or done.stderr.strip()).splitlines()
    if done.returncode != 0:
        return Check("kimi", "fail", f"{kimi_program()} --version exited {done.returncode}")
    return Check("kimi", "ok", f"{kimi_program()} {said[0] if said else '(no version)'}")


def _default_provider(config: dict[str, Any]) -> tuple[object, object, dict[str, Any] | None]:
    """The default model's name, its provider's name and that provider's table, if any."""
    model = config.get("default_model")
    models, providers = config.get("models") or {}, config.get("providers") or {}
    chosen = models.get(model) if isinstance(model, str) else None
    name = chosen.get("provider") if isinstance(chosen, dict) else None
    found = providers.get(name) if isinstance(name, str) else None
    return model, name, found if isinstance(found, dict) else None


def provider(path: Path | None = None) -> Check:
    """A default model whose provider has a base URL and a key (the key is not shown), in PATH
    (default: config.toml of the Kimi home), or in the environment when PATH is not given."""
    given, path = path is not None, path or kimi_home() / "config.toml"
    if not given and os.environ.get("KIMI_MODEL_NAME") and os.environ.get("KIMI_MODEL_API_KEY"):
        return Check("provider", "ok", f"model {os.environ['KIMI_MODEL_NAME']!r} from the "
                     "environment (KIMI_MODEL_*), key set")
    try:
        config = tomllib.loads(path.read_text())
    except FileNotFoundError:
        return Check("provider", "fail", f"{path} does not exist: no provider configured")
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        return Check("provider", "fail", f"{path} cannot be read: {exc}")
    model, name, found = _default_provider(config)
    if found is None:
        return Check("provider", "fail", f"{path}: default_model {model!r} names no provider "
                     "of [providers]")
    keyed = bool(found.get("api_key") or found.get("api_key_env"))
    return Check("provider", "ok" if keyed else "warn",
                 f"model {model!r} on provider {name!r} ({found.get('type', '?')}, "
                 f"{found.get('base_url', 'default URL')}), key "
                 f"{'set' if keyed else 'not set'}")


def agent(path: Path | None = None) -> Check:
    """The agent at PATH (default: the packaged one) may use Read, Glob and Grep, nothing
    else."""
    path = path or agent_file()
    try:
        head = _FRONTMATTER.match(path.read_text())
    except OSError as exc:
        return Check("agent", "fail", f"{path} cannot be read: {exc.strerror}")
    tools = re.search(r"^tools:(.*)$", head.group(1), re.MULTILINE) if head else None
    if tools is None or {t.strip() for t in tools[1].split(",")} != READ_ONLY_TOOLS:
        return Check("agent", "fail", f"{path} has no read-only frontmatter (tools: "
                     f"{', '.join(sorted(READ_ONLY_TOOLS))} and nothing else)")
    return Check("agent", "ok", f"{path} (tools Read, Glob, Grep)")


def hook_written(where: Path) -> Check:
    """The hook's directory WHERE has a window file written lately."""
    if not where.is_dir():
        return Check("hook", "fail", f"{where} does not exist: kael-advisor-hook has never "
                     "run (is it a UserPromptSubmit hook?)")
    newest = max((path.stat().st_mtime for path in where.glob("*.json")), default=None)
    if newest is None:
        return Check("hook", "warn", f"{where} has no window file yet")
    age = time.time() - newest
    status: Literal["ok", "warn"] = "ok" if age < RECENT_SECONDS else "warn"
    return Check("hook", status, f"{where}: last written {age:.0f} s ago")


def hook_dir(project: Path) -> Check:
    where = sessions_dir()
    written = hook_written(where)
    if written.status == "fail" or "no window file" in written.detail:
        return written
    here = len(windows(project, where))
    return dataclasses.replace(written, detail=f"{written.detail}; {here} window(s) on "
                               f"{project}")


def table(project: Path) -> Check:
    try:
        found = BindingTable(project).read()
    except AdvisorError as exc:
        return Check("table", "fail", str(exc))
    return Check("table", "ok", f"{len(found.bindings)} binding(s), {len(found.archived)} "
                 "archived")


def checks(project: Path) -> list[Check]:
    return [kimi_version(), provider(), agent(), hook_dir(project), table(project)]
