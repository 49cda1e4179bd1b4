"""Claude Code's session registry: parsing, pid-tree lookup, pane lookup, stale entries."""

from __future__ import annotations

import json
import shlex
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kael_thread_rebuild.claude_code import registry
from kael_thread_rebuild.switching.tmux import TmuxBase
from tests.switching.sandbox import SLEEPER, PrivateTmux, tmux_config, wait_until

#: Every field Claude Code 2.1.328 wrote in an interactive session's entry.
REAL_FIELDS: dict[str, Any] = {
    "cwd": "/home/user/project", "startedAt": 1796031722831, "procStart": "25018",
    "version": "2.1.328", "peerProtocol": 1,
    "peerFeatures": ["notify_idle", "reply_across_default_dirs", "artifact_yield"],
    "kind": "interactive", "entrypoint": "cli",
    "pidDomain": "linux:0123456789abcdef0123456789abcdef:pid:[4026531836]",
    "asksForConvertedSkills": None, "tmux": "cc:@0.%0",
    "messagingSocketPath": "/tmp/cc-socks/4944.sock", "name": "project-81",
    "nameSource": "derived", "nameSince": 1796031722831, "status": "idle",
    "updatedAt": 1796031722942, "statusUpdatedAt": 1796031722942,
}


def write_entry(config_dir: Path, pid: int, **fields: Any) -> str:
    """Writes `sessions/<pid>.json`; a live pid gets its real procStart and pid domain."""
    session_id = str(uuid.uuid4())
    data = {**REAL_FIELDS, "pid": pid, "sessionId": session_id,
            "procStart": registry.proc_start(pid) or "1", "pidDomain": registry.pid_domain()}
    data.update(fields)
    folder = registry.registry_dir(config_dir)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{pid}.json").write_text(json.dumps(data))
    return session_id


@pytest.fixture
def shell_with_child() -> Iterator[tuple[int, int]]:
    """A shell that waits for a child (the trailing `true` keeps it from exec'ing)."""
    proc = subprocess.Popen(["sh", "-c", shlex.join(SLEEPER) + "; true"])
    try:
        child = wait_until(lambda: registry.process_tree(proc.pid)[1:], what="the child")[0]
        yield proc.pid, child
    finally:
        for pid in registry.process_tree(proc.pid)[::-1]:
            subprocess.run(["kill", str(pid)], check=False)
        proc.wait()


def test_known_fields_are_read_and_unknown_ones_ignored(tmp_path: Path) -> None:
    write_entry(tmp_path, 4944, sessionId="7dbad4cc-d132-427a-96f5-5f1d641d3e8b",
                someFutureField={"x": 1})
    [entry] = registry.read_entries(tmp_path)
    assert entry.pid == 4944
    assert entry.session_id == "7dbad4cc-d132-427a-96f5-5f1d641d3e8b"
    assert (entry.status, entry.kind, entry.cwd) == ("idle", "interactive", "/home/user/project")
    assert entry.tmux_pane_id == "%0"


def test_odd_optional_fields_do_not_cost_the_entry(tmp_path: Path) -> None:
    write_entry(tmp_path, 4945, startedAt=None, status={"busy": True}, tmux=7, procStart=25018)
    [entry] = registry.read_entries(tmp_path)
    assert (entry.started_at, entry.status, entry.tmux, entry.proc_start) == (
        None, None, None, None)


def test_unusable_files_are_skipped(tmp_path: Path) -> None:
    folder = registry.registry_dir(tmp_path)
    folder.mkdir()
    good = write_entry(tmp_path, 101)
    (folder / "102.json").write_text('{"pid": 102, "sessionId": "half-writ')
    (folder / "103.json").write_text(json.dumps({"pid": 103, "status": "idle"}))
    (folder / "104.json").write_text(json.dumps({"pid": 999, "sessionId": "x"}))
    (folder / "105.json").write_text(json.dumps([1, 2]))
    (folder / "notes.json").write_text(json.dumps({"pid": 1, "sessionId": "x"}))
    (folder / "101.abc.key").write_text("secret")
    (folder / "106.json").mkdir()
    assert [e.session_id for e in registry.read_entries(tmp_path)] == [good]
    assert registry.read_entries(tmp_path / "absent") == []


def test_tree_lookup_finds_claude_as_the_child_of_a_shell(
        tmp_path: Path, shell_with_child: tuple[int, int]) -> None:
    shell, child = shell_with_child
    session_id = write_entry(tmp_path, child)

    entry = registry.entry_for_tree(tmp_path, shell)

    assert entry is not None
    assert (entry.pid, entry.session_id) == (child, session_id)
    assert registry.entry_for_pid(tmp_path, shell) is None
    assert registry.entry_for_pid(tmp_path, child) == entry


def test_the_nearest_entry_of_the_tree_wins(tmp_path: Path,
                                            shell_with_child: tuple[int, int]) -> None:
    shell, child = shell_with_child
    write_entry(tmp_path, child, kind="print")
    outer = write_entry(tmp_path, shell)
    entry = registry.entry_for_tree(tmp_path, shell)
    assert entry is not None and entry.session_id == outer


def test_an_entry_left_by_a_dead_process_is_not_believed(
        tmp_path: Path, shell_with_child: tuple[int, int]) -> None:
    shell, child = shell_with_child
    # The pid now belongs to a process that started at another time: reused.
    write_entry(tmp_path, child, procStart=str(int(registry.proc_start(child) or 0) + 1))
    assert registry.entry_for_tree(tmp_path, shell) is None
    write_entry(tmp_path, 2**22 + 7, tmux="s:@0.%4")  # no such process
    assert registry.entry_for_pid(tmp_path, 2**22 + 7) is None
    assert registry.entry_for_pane(tmp_path, "%4") is None


def test_pane_lookup_serves_callers_in_another_pid_namespace(tmp_path: Path) -> None:
    foreign = "linux:0000:pid:[1]"
    write_entry(tmp_path, 2**22 + 1, pidDomain=foreign, tmux="cc:@1.%7", startedAt=10)
    newest = write_entry(tmp_path, 2**22 + 2, pidDomain=foreign, tmux="cc:@1.%7", startedAt=20)
    write_entry(tmp_path, 2**22 + 3, pidDomain=foreign, tmux="cc:@1.%8", startedAt=30)

    entry = registry.entry_for_pane(tmp_path, "%7")

    assert entry is not None and entry.session_id == newest
    # The pid means nothing here, so no tree lookup may match it.
    assert registry.entry_for_pid(tmp_path, 2**22 + 1) is None


def test_pid_domain_reads_like_claude_codes() -> None:
    domain = registry.pid_domain()
    assert domain is not None
    assert domain.startswith("linux:") and domain.endswith("]") and ":pid:[" in domain


def test_tmux_base_reports_the_session_of_claude_under_the_panes_shell(
        tmux: PrivateTmux, tmp_path: Path, workdir: Path) -> None:
    target = tmux.new_session(["sh", "-c", shlex.join(SLEEPER) + "; true"], cwd=workdir)
    config = tmux_config(tmux, target, tmp_path)
    base = TmuxBase(config)
    pane_pid = int(base.identity().token["pane_pid"])
    child = wait_until(lambda: registry.process_tree(pane_pid)[1:], what="the child")[0]
    assert config.claude_config_dir is not None
    session_id = write_entry(config.claude_config_dir, child)

    assert base.running_session() == session_id
    assert base.identity().running_session_id == session_id
    assert TmuxBase(config.model_copy(update={"claude_config_dir": None})).running_session() \
        is None


def test_tmux_base_falls_back_to_the_pane_named_in_the_registry(
        tmux: PrivateTmux, tmp_path: Path, workdir: Path) -> None:
    target = tmux.new_session(SLEEPER, cwd=workdir)
    config = tmux_config(tmux, target, tmp_path)
    pane_id = tmux.display(target, "#{pane_id}")
    assert config.claude_config_dir is not None
    session_id = write_entry(config.claude_config_dir, 2**22 + 5, pidDomain="linux:0:pid:[1]",
                             tmux=f"{target.partition(':')[0]}:@0.{pane_id}")
    assert TmuxBase(config).running_session() == session_id
