"""`.ci/demo` end to end, as the README runs it: a household container built like the Molecule
ones, its Claude Code talking in a tmux pane, the real install playbook over the docker
connection, a live switch, the report. The facts the report prints are checked against what
the household recorded (the operation record, the stand-in's log of what the model was shown).

It needs a Docker engine and takes several minutes (the images are cached after the first run):
it runs when ``KAEL_DEMO_TEST=1`` (`.ci/run` sets it, beside the Molecule scenarios).
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from typing import Any

import pytest

from tests.support.demo.household import REPO

pytestmark = [
    pytest.mark.real_claude,
    pytest.mark.skipif(os.environ.get("KAEL_DEMO_TEST") != "1",
                       reason="the demo end to end takes minutes: KAEL_DEMO_TEST=1 runs it"),
]

RUNTIME = {"tool_use", "tool_result", "thinking", "image"}


def block_types(value: Any) -> set[str]:
    """The type of every content block at any depth (an image sits inside a tool result)."""
    if isinstance(value, list):
        return set().union(*(block_types(item) for item in value))
    if isinstance(value, dict):
        own = {value["type"]} if isinstance(value.get("type"), str) else set()
        return own.union(*(block_types(item) for item in value.values()))
    return set()


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str],
                                                            dict[str, Any], str]:
    # Beside the Molecule households of the same checkout: their name, and a test's own suffix.
    name = f"{os.environ.get('KAEL_MOLECULE_NAME') or 'kael-molecule'}-t{uuid.uuid4().hex[:6]}"
    result = tmp_path_factory.mktemp("demo") / "result.json"
    env = {**os.environ, "KAEL_MOLECULE_NAME": name}
    done = subprocess.run([str(REPO / ".ci/demo"), "--result-json", str(result)], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=1800, check=False)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    return done, json.loads(result.read_text()), f"{name}-demo"


def test_the_new_session_was_shown_every_word_and_nothing_else(
        demo: tuple[subprocess.CompletedProcess[str], dict[str, Any], str]) -> None:
    _, result, _ = demo
    op = result["rebuild"]
    assert op["status"] == "activated", op["error"]
    assert result["new_session"] == op["new_session_id"] != result["old_session"]
    # What the new session's model was shown: the old speech verbatim, then the new prompt.
    shown = [tuple(item) for item in result["after_texts"]]
    expected = [tuple(item) for item in result["expected_texts"]]
    assert shown == expected
    assert any("看牙医" in text for _, text in shown)  # Chinese carried too
    counts = op["manifest_summary"]
    assert counts["carried_speech_items"] == counts["source_speech_items"] == len(expected) - 1
    # The old session sent every kind of runtime block; the new one none.
    assert block_types(result["before_request"]["messages"]) >= RUNTIME
    assert result["after_non_text"] == []
    assert isinstance(result["downtime_seconds"], float) and result["downtime_seconds"] > 0


def test_the_report_prints_the_recorded_facts(
        demo: tuple[subprocess.CompletedProcess[str], dict[str, Any], str]) -> None:
    done, result, container = demo
    op = result["rebuild"]
    out = done.stdout
    counts = op["manifest_summary"]
    n = counts["source_speech_items"]
    assert f"speech items carried    {n} of {n} (the new session's model was shown them " \
           "verbatim: yes)" in out
    assert f"turns carried           {counts['selected_turns']} of {counts['source_turns']}" in out
    assert f"{result['downtime_seconds']:.2f} s (Stop hook -> new session running)" in out
    after = next(line for line in out.splitlines() if line.startswith("model's request after"))
    assert after.endswith(", 0 runtime blocks")
    assert f"operation {op['operation_id']}: activated" in out
    for path in (op["backup_path"], op["candidate_path"], op["manifest_path"],
                 f"/operations/{op['operation_id']}.json"):
        assert path in out
    for step in range(1, 8):
        assert f"step {step}/7:" in out
    # Cleaned up: the household is gone (no --keep).
    gone = subprocess.run(["docker", "container", "inspect", container], capture_output=True,
                          check=False)
    assert gone.returncode != 0
