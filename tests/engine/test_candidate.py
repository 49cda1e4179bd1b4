"""The candidate session and its verification (spec §7)."""

from __future__ import annotations

import itertools
import json
import stat
from pathlib import Path

import pytest

from kael_thread_rebuild.candidate.verifier import verify_candidate
from kael_thread_rebuild.candidate.writer import OPEN_TAIL_NOTICE, write_candidate
from kael_thread_rebuild.errors import InputError
from kael_thread_rebuild.plan import build_plan
from tests.builder import TranscriptBuilder
from tests.conftest import ConfigFactory
from tests.engine.helpers import carried, plan_of


def _conversation() -> TranscriptBuilder:
    b = TranscriptBuilder()
    b.user("first question")
    b.attachment("nested_memory", "<system-reminder>CLAUDE.md: be kind</system-reminder>")
    b.tool_call("Bash", "noise", text="Let me check.")
    b.say("Checked: all fine.")
    b.user("second, 第二个")
    b.user("and a follow-up")
    b.say("Both answered.")
    return b


def _records(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_candidate_is_a_verified_linear_chain(make_config: ConfigFactory, tmp_path: Path) -> None:
    config = make_config()
    plan = plan_of(_conversation(), config)
    out = tmp_path / "out"
    out.mkdir()
    result = write_candidate(plan, out, config)
    assert result.verification.ok, result.verification.errors
    assert result.candidate_path.name == f"{result.new_session_id}.jsonl"
    assert stat.S_IMODE(result.candidate_path.stat().st_mode) == 0o600
    assert stat.S_IMODE(result.manifest_path.stat().st_mode) == 0o600
    records = _records(result.candidate_path)
    assert {r["type"] for r in records} == {"user", "assistant"}
    assert records[0]["parentUuid"] is None
    assert all(r["parentUuid"] == p["uuid"] for p, r in itertools.pairwise(records))
    assert [r["timestamp"] for r in records] == sorted({str(r["timestamp"]) for r in records})
    assert records[0]["kaelRebuild"]["kind"] == "startup_snapshot"  # type: ignore[index]
    assert records[-1]["type"] == "assistant"
    turn_ids = [r["message"]["id"] for r in records[1:4] if r["type"] == "assistant"]  # type: ignore[index]
    assert len(set(turn_ids)) == 1 and len(turn_ids) == 2
    manifest = json.loads(result.manifest_path.read_text())
    assert "first question" not in result.manifest_path.read_text()
    assert manifest["counts"]["carried_speech_items"] == 6


def test_candidate_read_again_carries_the_same_speech(make_config: ConfigFactory,
                                                       tmp_path: Path) -> None:
    config = make_config()
    plan = plan_of(_conversation(), config)
    result = write_candidate(plan, config.project_dir, config)
    result.manifest_path.unlink()
    again = build_plan(config, result.candidate_path)
    assert carried(again) == carried(plan)
    assert again.snapshot is not None and plan.snapshot is not None
    assert again.snapshot.text == plan.snapshot.text


def test_tampering_is_caught_by_verification(make_config: ConfigFactory, tmp_path: Path) -> None:
    config = make_config()
    plan = plan_of(_conversation(), config)
    result = write_candidate(plan, tmp_path, config)
    text = result.candidate_path.read_text().replace("Checked: all fine.", "Checked: all fine")
    result.candidate_path.write_text(text)
    verification = verify_candidate(result.candidate_path, result.manifest_path, plan)
    assert not verification.ok
    assert any("not verbatim" in error for error in verification.errors)

    lines = result.candidate_path.read_text().splitlines()
    result.candidate_path.write_text("\n".join(lines[:-1]) + "\n")
    assert not verify_candidate(result.candidate_path, result.manifest_path).ok


def test_turn_stamps_are_prefixes_that_verification_removes(make_config: ConfigFactory,
                                                            tmp_path: Path) -> None:
    config = make_config(stamp_turns=True)
    plan = plan_of(_conversation(), config)
    result = write_candidate(plan, tmp_path, config)
    assert result.verification.ok, result.verification.errors
    users = [r for r in _records(result.candidate_path) if r["type"] == "user"][1:]
    contents = [r["message"]["content"] for r in users]  # type: ignore[index]
    assert contents[0].startswith("[2026-11-01 08:00 UTC] first question")
    assert contents[2] == "and a follow-up"  # only the first user item of a turn


def test_open_tail_is_carried_visibly_unanswered(make_config: ConfigFactory,
                                                 tmp_path: Path) -> None:
    b = TranscriptBuilder()
    b.user("hello")
    b.say("hi")
    b.user("are you still there?")
    config = make_config()
    result = write_candidate(plan_of(b, config), tmp_path, config)
    assert result.verification.ok
    records = _records(result.candidate_path)
    assert records[-2]["message"]["content"] == "are you still there?"  # type: ignore[index]
    last = records[-1]["message"]
    assert last["content"] == [{"type": "text", "text": OPEN_TAIL_NOTICE}]  # type: ignore[index]
    assert last["model"] == "<synthetic>"  # type: ignore[index]
    again = build_plan(config, result.candidate_path)
    assert again.report.open_tail_turns == 1  # the notice is not speech


def test_candidate_never_overwrites(make_config: ConfigFactory, tmp_path: Path) -> None:
    config = make_config()
    plan = plan_of(_conversation(), config)
    first = write_candidate(plan, tmp_path, config)
    with pytest.raises(FileExistsError):
        write_candidate(plan, tmp_path, config, session_id=first.new_session_id)
    assert verify_candidate(first.candidate_path, first.manifest_path).ok


def test_words_changed_after_planning_are_refused(make_config: ConfigFactory,
                                                   tmp_path: Path) -> None:
    config = make_config()
    plan = plan_of(_conversation(), config)
    source = plan.source_path
    source.write_text(source.read_text().replace("Checked: all fine.", "Checked: all FINE."))
    with pytest.raises(InputError, match="changed at line"):
        write_candidate(plan, tmp_path, config)
    assert list(tmp_path.glob("*.jsonl")) == []
