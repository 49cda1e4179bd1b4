"""Doctor's start check against a real tmux server: it reports what the switch would refuse, the
program of resume_command not found where the respawned pane would run it, and changes nothing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kael_thread_rebuild.doctor.resume import check_resume_start
from kael_thread_rebuild.doctor.runner import run_doctor
from tests.switching.sandbox import SLEEPER, PrivateTmux, tmux_config


def test_doctor_reports_a_program_the_pane_would_not_find_and_touches_nothing(
        tmux: PrivateTmux, tmp_path: Path, workdir: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmux.new_session(SLEEPER, cwd=workdir)
    program = tmp_path / "only-here" / "kael-doctor-claude"
    program.parent.mkdir()
    program.write_text("#!/bin/sh\n")
    program.chmod(0o755)
    monkeypatch.setenv("PATH", f"{program.parent}:{os.environ['PATH']}")  # doctor's own PATH
    before = tmux.display(target, "#{pane_pid} #{pane_in_mode}")

    def start_check(resume: list[str]) -> tuple[bool, str, str]:
        config = tmux_config(tmux, target, tmp_path, claude_workdir=workdir,
                             resume_command=resume)
        (check,) = run_doctor(config, checks=[check_resume_start], environ={}).checks
        return check.ok, check.detail, check.fix

    ok, detail, fix = start_check([program.name, "--resume", "{session_id}"])
    assert not ok
    assert detail == (f"the program {program.name!r} of resume_command is not found on the tmux "
                      f"server's host on the PATH a respawned pane gets ({tmux.env['PATH']}, the "
                      "tmux environment's)")
    assert "absolute path" in fix and "set-environment" in fix

    ok, detail, _ = start_check([str(program), "--resume", "{session_id}"])
    assert ok, detail
    assert tmux.display(target, "#{pane_pid} #{pane_in_mode}") == before
    assert not (tmp_path / "state").exists()
