"""The live drill: the real Claude Code, interactive in a tmux pane, asks for a rebuild through our
MCP tool; its Stop hook schedules it; the daemon switches the pane to the rebuilt session; a
rollback takes it back, on every verified Claude Code version. Refusals through the same path
(pinned version) when the pane is replaced meanwhile, when the user quits Claude Code and
starts another program, and when the resume command's program is not found where the pane
would run it; a program missing at the start ends with the old session back in the same pane.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from kael_thread_rebuild.claude_code import registry
from kael_thread_rebuild.operations.model import Operation, OperationStatus
from tests.support.claude_env import claude_available, find_claude_binary, tmux_available
from tests.support.claude_versions import Target, targets
from tests.support.fidelity import conversation_texts
from tests.switching.sandbox import SLEEPER, cmdline, wait_until

from . import live, procs, steps

S = OperationStatus
pytestmark = [
    pytest.mark.real_claude,
    pytest.mark.skipif(not claude_available(), reason="the Claude Code binary is not installed"),
    pytest.mark.skipif(not tmux_available(), reason="tmux is not installed"),
]


# Once per Claude Code version under test (the verified list): the whole round trip, on the
# version's own binary. The refusals below run on the pinned version only.
@pytest.mark.parametrize("target", targets(), ids=lambda target: target.label)
def test_the_model_requests_a_rebuild_and_the_pane_switches_then_rolls_back(
        tmp_path: Path, target: Target, monkeypatch: pytest.MonkeyPatch) -> None:
    target.use(monkeypatch)
    with live.stage(tmp_path) as drill:
        pane_id, old_pid = drill.pane()
        drill.turn(live.P_TOOLS, live.A_TOOLS_DONE)
        drill.turn(live.P_THINK, live.A_THINK)
        assert drill.tool_listed(live.REQUEST_TOOL), "our MCP server never reached Claude Code"
        old = drill.registry_session()
        assert old is not None

        op = steps.rebuild_through_mcp(drill, pane_id, old_pid, old)
        op = steps.rollback_on_request(drill, op, pane_id, old)

        worker_log = procs.log_lines(drill.config, "worker.log")
        name = op.operation_id
        assert f"operation {name}: activating -> activated (the new session is healthy)" \
            in worker_log
        assert f"operation {name}: rollback_scheduled -> rolled_back (rolled back on request)" \
            in worker_log
        assert procs.log_lines(drill.config, "hook.log") == [
            f"hook-stop: operation {name} -> scheduled",
            f"hook-stop: operation {name} -> rollback_scheduled"]
    assert (tmp_path / "daemon.stderr").read_text() == ""


def test_a_pane_replaced_between_stop_and_activation_is_refused(tmp_path: Path) -> None:
    # Slow stability samples keep the operation in prepare long enough to replace the pane.
    with live.stage(tmp_path, stability_interval_seconds=2.0) as drill:
        asked = drill.cli("request", "--reason", "drill refusal", "--confirm", "REBUILD")
        assert asked.returncode == 0, asked.stderr
        drill.turn(live.P_THINK, live.A_THINK)
        old = drill.registry_session()

        def preparing() -> Operation | None:
            op = procs.latest(drill.config)
            return op if op is not None and op.identity_before is not None else None

        assert wait_until(preparing, timeout=30, what="the worker to read the target's "
                          "identity").status is S.running
        procs.tmux(drill.tui.socket, "respawn-pane", "-k", "-t", drill.tui.target, *SLEEPER)
        replaced = drill.pane()

        op = procs.wait_for_status(drill.config, procs.SETTLED, timeout=60)

        assert op.status is S.failed and op.session_conflict, op.error
        assert "the target changed since prepare" in op.error
        assert op.resume_argv is None and op.identity_after is None
        assert drill.pane() == replaced
        transcripts = sorted(p.stem for p in drill.env.project_dir.glob("*.jsonl"))
        assert transcripts == [old]
        assert not list(drill.env.project_dir.glob("*.manifest.json"))


def _nothing_switched(drill: live.Stage, pane: tuple[str, int], old: str) -> None:
    assert drill.pane() == pane
    assert sorted(p.stem for p in drill.env.project_dir.glob("*.jsonl")) == [old]
    assert not list(drill.env.project_dir.glob("*.manifest.json"))


def _shell_prompt(screen: str) -> bool:
    lines = [line for line in screen.splitlines() if line.strip()]
    return bool(lines) and lines[-1].startswith("bash-")


def _cmdline(pid: int) -> list[str]:
    try:
        return cmdline(pid)
    except OSError:
        return []


def _preparing(drill: live.Stage) -> Operation:
    def probe() -> Operation | None:
        op = procs.latest(drill.config)
        return op if op is not None and op.identity_before is not None else None

    return wait_until(probe, timeout=30, what="the worker to read the target's identity")


def test_a_resume_program_only_the_daemons_path_finds_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The household's shape: `claude` is found by the shell that started tmux and by the
    # daemon (here: in PATH), not on the PATH tmux gives new panes (the login PATH).
    login_path = os.environ["PATH"]
    if shutil.which("claude", path=login_path):
        pytest.skip("a `claude` on this machine's PATH would be found by the pane too")
    monkeypatch.setenv("PATH", f"{find_claude_binary().parent}:{login_path}")
    with live.stage(tmp_path, resume_command=["claude", "--resume", "{session_id}"]) as drill:
        procs.tmux(drill.tui.socket, "set-environment", "-g", "PATH", login_path)
        steps.refused_bare_program(drill, login_path)


def test_a_pane_where_the_user_quit_claude_for_another_program_is_left_alone(
        tmp_path: Path) -> None:
    # Slow stability samples keep the operation in prepare while the user quits Claude Code.
    with live.stage(tmp_path, pane_shell=True, stability_interval_seconds=3.0) as drill:
        drill.household_pane()
        steps.request_after_a_turn(drill, "drill: user quits")
        old = drill.registry_session()
        assert old is not None
        pane = drill.pane()

        assert _preparing(drill).status is S.running
        drill.tui.send_keys("C-c")
        drill.tui.send_keys("C-c")
        wait_until(lambda: drill.registry_session() is None, timeout=20,
                   what="Claude Code to quit")
        drill.tui.wait_for(_shell_prompt, timeout=20)
        drill.tui.submit("sleep 1000")

        def sleepers() -> list[int]:
            return [pid for pid in registry.process_tree(pane[1])
                    if _cmdline(pid) == ["sleep", "1000"]]

        wait_until(sleepers, timeout=10, what="the user's program to start")
        op = procs.wait_for_status(drill.config, procs.SETTLED, timeout=60)

        assert op.status is S.failed and op.session_conflict, op.error
        assert op.error is not None and "\n" not in op.error
        assert op.resume_argv is None and op.identity_after is None
        _nothing_switched(drill, pane, old)
        assert len(sleepers()) == 1, "the user's program was killed"
        assert procs.tmux(drill.tui.socket, "display-message", "-p", "-t", drill.tui.target,
                          "#{pane_current_command}") == "sleep"


def test_a_resume_program_missing_at_the_start_brings_the_old_session_back_in_the_pane(
        tmp_path: Path) -> None:
    program = tmp_path / "bin" / "claude"
    program.parent.mkdir()
    program.symlink_to(find_claude_binary())
    # A generous health timeout: the resumed Claude Code registers slowly on a loaded machine.
    with live.stage(tmp_path, daemon=False, health_timeout_seconds=90.0,
                    resume_command=[str(program), "--resume", "{session_id}"]) as drill:
        drill.household_pane()  # its last pane: closing it would end the tmux server
        steps.request_after_a_turn(drill, "drill: program missing")
        op, old, pane_id, old_pid = steps.run_with_program_missing(drill, program)
        assert op.error == (f"the target is not alive after switching to session "
                            f"{op.new_session_id}; the old session was resumed")
        assert op.rollback_argv == [str(program), "--resume", old]
        drill.wait_ready(old)
        assert drill.pane()[0] == pane_id and drill.pane()[1] != old_pid
        drill.turn(live.P_OLD, live.A_OLD)
        (body,) = drill.requests_with(live.P_OLD)
        assert conversation_texts(body) == [("user", live.P_THINK), ("assistant", live.A_THINK),
                                            ("user", live.P_AFTER), ("assistant", live.A_AFTER),
                                            ("user", live.P_OLD)]
        assert procs.tmux(drill.tui.socket, "show-options", "-p", "-q", "-v", "-t",
                          drill.tui.target, "remain-on-exit") == ""
