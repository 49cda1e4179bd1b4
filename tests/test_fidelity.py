"""Fidelity through the real client: every fixture's speech reaches the model verbatim, in order,
and no runtime block does.

For each fixture (made by the real Claude Code, or built from documented shapes) of every
verified Claude Code version (`claude_code/versions.toml`; each has its folder
`fixtures/claude-code-<version>/`) the engine builds and verifies a candidate; that version's real
binary resumes it with `claude -p --resume` against
the loopback stand-in API, and the request it sends is compared with the speech written down
from the scenario (`<name>.expected.json`), never with what the engine read.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from kael_thread_rebuild.candidate.writer import OPEN_TAIL_NOTICE, write_candidate
from kael_thread_rebuild.config import parse_config
from kael_thread_rebuild.plan import build_plan
from tests.support.claude_versions import Target, targets
from tests.support.fidelity import conversation_texts, non_text_block_types, resume_and_capture

PROMPT = "Fidelity check: what did we talk about?"
RUNTIME_BLOCKS = {"tool_use", "tool_result", "thinking", "redacted_thinking", "image"}

pytestmark = pytest.mark.real_claude


def _cases() -> list[Any]:
    """One case per fixture of every Claude Code version under test (the verified list)."""
    return [pytest.param(target, path.name.removesuffix(".expected.json"),
                         id=f"{target.label}-{path.name.removesuffix('.expected.json')}")
            for target in targets() for path in sorted(target.fixtures.glob("*.expected.json"))]


CASES = _cases()


def test_every_verified_version_has_every_fixture() -> None:
    by_target: dict[str, set[str]] = {}
    for case in CASES:
        target, name = case.values
        by_target.setdefault(target.label, set()).add(name)
    assert set(by_target) == {target.label for target in targets()}
    assert len({frozenset(names) for names in by_target.values()}) == 1, by_target


def _expected(target: Target, name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((target.fixtures / f"{name}.expected.json").read_text())
    return data


def _matches(item: dict[str, Any], role: str, text: str) -> bool:
    if item["role"] != role:
        return False
    if "text_contains" in item:
        return str(item["text_contains"]) in text
    return bool(text == item["text"])


def _assert_same_speech(expected: list[dict[str, Any]], got: list[tuple[str, str]]) -> None:
    assert len(got) == len(expected), (
        f"{len(got)} texts carried, {len(expected)} expected:\n"
        + "\n".join(f"  {role}: {text[:80]!r}" for role, text in got))
    for position, (item, (role, text)) in enumerate(zip(expected, got, strict=True)):
        assert _matches(item, role, text), (position, item, role, text[:200])


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fidelity")


def _candidate(target: Target, name: str, root: Path) -> tuple[Any, Any]:
    root = root / target.label
    project = root / name / "project"
    project.mkdir(parents=True)
    source = target.fixtures / f"{name}.jsonl"
    copy = project / source.name
    shutil.copyfile(source, copy)
    config = parse_config({"project_dir": str(project), "claude_workdir": str(root / name)})
    plan = build_plan(config, copy)
    assert plan.report.blocked_reason == "", plan.report.blocked_reason
    out = root / name / "out"
    out.mkdir()
    result = write_candidate(plan, out, config)
    assert result.verification.ok, result.verification.errors
    assert copy.read_bytes() == source.read_bytes()
    return plan, result


@pytest.mark.parametrize(("target", "name"), CASES)
def test_engine_selects_exactly_the_scenario_speech(target: Target, name: str,
                                                    workspace: Path) -> None:
    expected = _expected(target, name)
    plan, _ = _candidate(target, name, workspace / "engine")
    items = plan.items
    texts = plan.texts()
    _assert_same_speech(expected["speech"],
                        [(item.role.value, text) for item, text in zip(items, texts, strict=True)])
    for want, item in zip(expected["speech"], items, strict=True):
        if want["role"] == "user" or want["origin"] == "speech_tool":
            assert item.origin.value == want["origin"], (want, item.origin)
    assert plan.report.open_tail_turns == int(expected["open_tail"])
    for line in expected.get("snapshot_contains", []):
        assert plan.snapshot is not None and line in plan.snapshot.text
    for text in expected.get("abandoned_texts", []):
        assert all(text not in said for said in texts)


@pytest.mark.parametrize(("target", "name"), CASES)
def test_real_client_receives_the_speech_verbatim(target: Target, name: str, workspace: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    target.use(monkeypatch)  # this version's binary resumes the candidate
    expected = _expected(target, name)
    plan, result = _candidate(target, name, workspace / "client")
    bodies = resume_and_capture(result.candidate_path, result.new_session_id,
                                workspace / "client" / target.label / name, PROMPT)
    body = bodies[0]
    assert not non_text_block_types(body) & RUNTIME_BLOCKS, non_text_block_types(body)
    texts = conversation_texts(body)
    assert texts[-1] == ("user", PROMPT)
    texts = texts[:-1]
    if plan.snapshot is not None:
        role, first = texts.pop(0)
        assert role == "user" and first.startswith("<startup-snapshot ")
        assert plan.snapshot.text in first
        for line in expected.get("snapshot_contains", []):
            assert line in first
    if expected["open_tail"]:
        assert texts.pop() == ("assistant", OPEN_TAIL_NOTICE)
    # Claude Code sends consecutive user records as one message, one text block each, and ends
    # every block but the last with "\n"; that newline is its joint, not part of the words.
    _assert_same_speech(expected["speech"], _unjoin(texts, expected["speech"]))


def _unjoin(texts: list[tuple[str, str]],
            expected: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """Drop the one joining newline Claude Code adds, only where the words themselves lack it."""
    out = []
    for position, (role, text) in enumerate(texts):
        want = expected[position] if position < len(expected) else None
        if (role == "user" and text.endswith("\n") and want is not None
                and "text" in want and text[:-1] == want["text"]):
            text = text[:-1]
        out.append((role, text))
    return out
