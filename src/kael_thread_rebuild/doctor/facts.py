"""What several checks need, computed once and only when asked for (read-only, like every
check)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import datetime, timedelta
from functools import cached_property
from pathlib import Path

from ..claude_code import registry
from ..claude_code.command_line import claude_arguments
from ..config import Config
from ..errors import KaelError
from ..paths import transcripts
from ..state_layout import CONFIG_ENV
from ..switching.base import Identity, SwitchBase
from ..switching.factory import make_base
from .host_facts import HOST_FACTS_ENV, HostFacts, parse_host_facts
from .reading import read_cmdline

#: Host paths doctor reads that this container does not mount (os.pathsep-separated).
UNMOUNTED_ENV = "KAEL_UNMOUNTED"

# Identity token fields naming the process a target runs (tmux pane, systemd main process).
_PROCESS_TOKENS = ("pane_pid", "main_pid")


class Facts:
    """What several checks need, computed once and only when asked for."""

    def __init__(self, config: Config, now: datetime, stuck_after: timedelta,
                 environ: Mapping[str, str]) -> None:
        self.config = config
        self.now = now
        self.stuck_after = stuck_after
        self.environ = environ

    @cached_property
    def config_path(self) -> Path | None:
        """The config file, when the environment names it (as every appliance container's does)."""
        named = self.environ.get(CONFIG_ENV)
        return Path(named) if named else None

    @cached_property
    def unmounted(self) -> frozenset[str]:
        named = self.environ.get(UNMOUNTED_ENV, "")
        return frozenset(part for part in named.split(os.pathsep) if part)

    @cached_property
    def host(self) -> HostFacts | str | None:
        """The host's facts; None when none were given, a string when they do not parse."""
        return parse_host_facts(self.environ.get(HOST_FACTS_ENV))

    @cached_property
    def live_claude_pids(self) -> list[int]:
        """Claude Code processes alive now that registered in this config dir's session registry
        (pid and start time agree; the caller must see the host's pids)."""
        live = []
        for entry in registry.read_entries(self.claude_config_dir):
            started = registry.proc_start(entry.pid)
            if started is not None and entry.proc_start in (None, started):
                live.append(entry.pid)
        return live

    @cached_property
    def base(self) -> SwitchBase | str:
        try:
            return make_base(self.config)
        except KaelError as exc:
            return str(exc)

    @cached_property
    def identity(self) -> Identity | str:
        base = self.base
        if isinstance(base, str):
            return base
        try:
            return base.identity()
        except KaelError as exc:
            return str(exc)

    @cached_property
    def transcripts(self) -> list[Path]:
        project = self.config.project_dir
        return transcripts(project) if project.is_dir() else []

    @cached_property
    def claude_config_dir(self) -> Path:
        return self.config.claude_config_dir or Path.home() / ".claude"

    @cached_property
    def claude_process(self) -> tuple[int, list[str]] | str:
        """The live Claude Code process the target runs: (pid, argv), or why it is not known."""
        identity = self.identity
        if isinstance(identity, str):
            return f"the target is unreadable: {identity}"
        root = next((identity.token[key] for key in _PROCESS_TOKENS if key in identity.token),
                    None)
        if root is None:
            return f"the {identity.base} base runs no live process to compare with"
        for pid in self._process_candidates(int(root)):
            argv = read_cmdline(pid)
            if argv is not None and claude_arguments(argv) is not None:
                return pid, argv
        return (f"no Claude Code process is visible at or under pid {root} of the "
                f"{identity.base} target; from another pid namespace (a container) the live "
                "command line cannot be read")

    def _process_candidates(self, root: int) -> list[int]:
        """The pids that may be the target's Claude Code: the registry's entry for the tree
        under ROOT first (when the config dir is known), then the tree itself."""
        candidates: list[int] = []
        if self.config.claude_config_dir is not None:
            entry = registry.entry_for_tree(self.config.claude_config_dir, root)
            if entry is not None:
                candidates.append(entry.pid)
        return candidates + registry.process_tree(root)
