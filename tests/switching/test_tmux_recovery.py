"""Recovery of a tmux switch whose worker was killed (SIGKILL) inside it, against a real tmux
server on a private socket: the pane's own `remain-on-exit` comes back and the switch's marker
option goes, whichever way recovery settles the operation.

The pane runs a stand-in for Claude Code that registers its session in Claude Code's session
registry (as 2.1.328 does), so that the worker's identity and health checks read it as they read
the real one; the resume command starts the same stand-in on the new session.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from kael_thread_rebuild.config import Config
from kael_thread_rebuild.operations import worker
from kael_thread_rebuild.operations.model import OperationStatus
from kael_thread_rebuild.operations.store import OperationStore
from kael_thread_rebuild.switching.tmux import TmuxBase
from tests.builder import SESSION
from tests.operations.harness import scheduled, write_source
from tests.operations.test_recovery import Env, run_killed_at
from tests.switching.sandbox import PrivateTmux, tmux_config, wait_until
from tests.switching.test_health import STARTING_CLAUDE

S = OperationStatus
MARKER = "@kael-thread-rebuild-remain-on-exit"


class TmuxEnv(Env):
    def fresh_base(self) -> TmuxBase:  # type: ignore[override]
        return TmuxBase(self.config)


def _stage(tmux: PrivateTmux, root: Path) -> tuple[TmuxEnv, str]:
    workdir = root / "work"
    workdir.mkdir()
    registry = root / "claude-config" / "sessions"
    claude = [sys.executable, "-c", STARTING_CLAUDE]
    target = tmux.new_session([*claude, SESSION, str(registry), "idle"], cwd=workdir,
                              remain_on_exit=False)
    config: Config = tmux_config(
        tmux, target, root, claude_workdir=workdir, claude_config_dir=root / "claude-config",
        project_dir=root / "project-dir", activation="tmux",
        resume_command=[*claude, "{session_id}", str(registry), "idle"],
        stability_interval_seconds=0.01, stability_timeout_seconds=3.0,
        health_window_seconds=0.5, health_timeout_seconds=10.0, poll_interval_seconds=0.05)
    config.project_dir.mkdir()
    base = TmuxBase(config)
    wait_until(lambda: base.running_session() == SESSION, what="the stand-in to register")
    env = TmuxEnv(config, base, OperationStore(config.state_dir),  # type: ignore[arg-type]
                  write_source(config))
    return env, target


def _pane_options(tmux: PrivateTmux, target: str) -> tuple[str, str]:
    """The pane's own remain-on-exit and the switch's marker (empty: not set on the pane)."""
    def own(name: str) -> str:
        return tmux.run("show-options", "-p", "-q", "-v", "-t", target, name).stdout.strip()
    return own("remain-on-exit"), own(MARKER)


@pytest.mark.parametrize(("kill_at", "settled", "running"), [
    # Kept, not yet respawned: nothing switched, the old session still runs.
    ("respawn", S.failed, "old"),
    # Respawned, the health check not yet done: recovery finds the new session healthy.
    ("health", S.activated, "new"),
])
def test_recovery_gives_the_pane_its_remain_on_exit_back(
        tmux: PrivateTmux, tmp_path: Path, kill_at: str, settled: OperationStatus,
        running: str) -> None:
    env, target = _stage(tmux, tmp_path)
    assert _pane_options(tmux, target) == ("", "")
    op = scheduled(env.config, env.fresh_base())  # type: ignore[arg-type]

    code, steps = run_killed_at(env, op, kill_at, lambda step: None)
    assert code == -9 and steps[-1] == kill_at, (code, steps)
    assert _pane_options(tmux, target) == ("on", "-")  # what the killed switch left

    (recovered,) = worker.recover(env.config, env.store, env.fresh_base())
    assert recovered.status is settled, recovered.error
    new = recovered.new_session_id
    assert env.fresh_base().running_session() == (SESSION if running == "old" else new)
    assert _pane_options(tmux, target) == ("", "")
    assert tmux.display(target, "#{remain-on-exit}") == "off"
    if settled is S.failed:
        assert recovered.error == (f"interrupted before switching; nothing was switched: the "
                                   f"old session {SESSION} still runs")
        assert not (env.config.project_dir / f"{new}.jsonl").exists()


def test_a_pane_left_with_neither_session_does_not_keep_the_candidate_in_project_dir(
        tmux: PrivateTmux, tmp_path: Path) -> None:
    env, target = _stage(tmux, tmp_path)
    # The resume command's program: there at prepare's start check, gone when the switch
    # starts it, for the new session and for the old one.
    program = tmp_path / "bin" / "claude"
    program.parent.mkdir()
    program.symlink_to(sys.executable)
    registry = env.config.claude_config_dir / "sessions"  # type: ignore[operator]
    config = env.config.model_copy(update={"resume_command": [
        str(program), "-c", STARTING_CLAUDE, "{session_id}", str(registry), "idle"]})
    base = TmuxBase(config)
    op = scheduled(config, base)  # type: ignore[arg-type]

    def program_gone(step: str) -> None:
        if step == "switch":
            program.unlink()

    op = worker.run_operation(config, env.store, base, op.operation_id, program_gone)

    assert op.status is S.failed and op.rollback_ok is False, op.error
    assert "resuming the old session failed too" in op.error
    assert tmux.display(target, "#{pane_dead}") == "1"  # kept for a look, with neither session
    new = op.new_session_id
    kept = config.state_dir / "candidates" / op.operation_id / f"{new}.jsonl"
    assert op.candidate_path == str(kept) and kept.is_file()
    assert sorted(p.name for p in config.project_dir.iterdir()) == [f"{SESSION}.jsonl"]
