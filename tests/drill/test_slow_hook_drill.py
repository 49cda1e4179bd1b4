"""The live drill with a slow Stop hook: the hook records the Stop at once but its process returns
seconds later (as a `docker exec` under load does), and only then does Claude Code write the
Stop's `stop_hook_summary`. The worker waits for it: the switch the human confirmed happens, with
every word carried, instead of failing on "the source transcript changed after prepare"."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.claude_versions import Target, targets

from . import live, procs, steps, test_tmux_drill

HOOK_DELAY = 3.0
pytestmark = test_tmux_drill.pytestmark  # the real Claude Code in tmux, skipped without them


@pytest.mark.parametrize("target", targets(), ids=lambda target: target.label)
def test_a_slow_stop_hook_still_ends_activated_with_every_word(
        tmp_path: Path, target: Target, monkeypatch: pytest.MonkeyPatch) -> None:
    target.use(monkeypatch)
    with live.stage(tmp_path, hook_delay=HOOK_DELAY) as drill:
        pane_id, old_pid = drill.pane()
        drill.turn(live.P_TOOLS, live.A_TOOLS_DONE)
        drill.turn(live.P_THINK, live.A_THINK)
        old = drill.registry_session()
        assert old is not None

        # Activated; the pane runs the new session; its first request carries the old speech
        # verbatim; the backup holds the rebuild turn's own `stop_hook_summary`.
        op = steps.rebuild_through_mcp(drill, pane_id, old_pid, old)

        backup = Path(op.backup_path or "").read_bytes()
        assert backup.count(live.STOP_SUMMARY) == 3, "the backup was taken before the Stop ended"
        worker_log = procs.log_lines(drill.config, "worker.log")
        assert f"operation {op.operation_id}: activating -> activated (the new session is " \
               "healthy)" in worker_log
    assert (tmp_path / "daemon.stderr").read_text() == ""
