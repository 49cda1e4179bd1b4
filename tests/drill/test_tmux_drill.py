"""The live drill: the real Claude Code, interactive in a tmux pane, asks for a rebuild through our
MCP tool; its Stop hook schedules it; the daemon switches the pane to the rebuilt session; a
rollback takes it back, on every verified Claude Code version. A refusal through the same path
when the pane is replaced meanwhile.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kael_thread_rebuild.operations.model import Operation, OperationStatus
from tests.support.claude_env import claude_available, tmux_available
from tests.support.claude_versions import Target, targets
from tests.switching.sandbox import SLEEPER, wait_until

from . import live, procs, steps

S = OperationStatus
pytestmark = [
    pytest.mark.real_claude,
    pytest.mark.skipif(not claude_available(), reason="the Claude Code binary is not installed"),
    pytest.mark.skipif(not tmux_available(), reason="tmux is not installed"),
]
# Once per Claude Code version under test (the verified list): the whole round trip, on the
# version's own binary. The refusal below runs on the pinned version only.
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
