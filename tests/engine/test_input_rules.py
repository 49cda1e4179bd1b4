"""Input rules through the real command line (spec §3-4): what Node writes is read and carried
exactly, impossible shapes block with their line numbers, a user's own tags are kept."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.builder import TranscriptBuilder
from tests.engine.test_cli_bad_input import run_cli, setup
from tests.support.claude_env import claude_available
from tests.support.fidelity import conversation_texts, resume_and_capture

__all__ = ["setup"]  # the fixture, shared with the other bad-input tests

def _node_string_body(text_js: str) -> bytes:
    """What Node's JSON.stringify writes for a JavaScript string expression, without quotes."""
    node = shutil.which("node")
    assert node is not None, "Node is needed: Claude Code runs on it"
    result = subprocess.run([node, "-e", f"process.stdout.write(JSON.stringify({text_js}))"],
                            capture_output=True, check=True, timeout=60)
    assert result.stdout.startswith(b'"') and result.stdout.endswith(b'"')
    return result.stdout[1:-1]


def _plan(config: Path, transcript: Path) -> dict[str, object]:
    result = run_cli("--config", str(config), "--json", "plan", "--transcript", str(transcript))
    assert result.returncode == 0, result.stderr
    report: dict[str, object] = json.loads(result.stdout)
    return report


def _candidate(config: Path, out: Path, transcript: Path) -> subprocess.CompletedProcess[str]:
    return run_cli("--config", str(config), "--json", "candidate", "--transcript",
                   str(transcript), "--output-dir", str(out))


def _cut_emoji_transcript(project: Path) -> tuple[Path, bytes, bytes]:
    """A transcript whose speech and tool result hold strings cut inside an emoji, as Node
    writes them: a lone high and a lone low surrogate escape."""
    high = _node_string_body('"see 😀".slice(0, -1)')
    low = _node_string_body('"😀 done".slice(1)')
    assert high == b"see \\ud83d" and low == b"\\ude00 done"
    b = TranscriptBuilder()
    b.user("I typed HIGH-CUT here")
    b.tool_call("Bash", "a tool output cut in an emoji LOW-CUT")
    b.say("My answer LOW-CUT")
    path = b.write(project / f"{b.session_id}.jsonl")
    path.write_bytes(path.read_bytes().replace(b"HIGH-CUT", high).replace(b"LOW-CUT", low))
    return path, high, low


def test_lone_surrogates_node_writes_are_read_and_carried_exactly(
        setup: tuple[Path, Path, Path]) -> None:
    project, out, config = setup
    path, high, low = _cut_emoji_transcript(project)
    source = path.read_bytes()

    report = _plan(config, path)
    assert report["unreadable_lines"] == [] and report["blocked_reason"] == ""
    assert report["carried_speech_items"] == 2
    dirty = report["dirty"]
    assert isinstance(dirty, dict)
    # The tool result is runtime, counted with its cut character (3 bytes as written).
    cut_output = len("a tool output cut in an emoji ") + 3 + len(" done")
    assert dirty["categories"]["tool_result"] == cut_output

    made = _candidate(config, out, path)
    assert made.returncode == 0, made.stderr
    summary = json.loads(made.stdout)
    assert summary["verification"] == {"ok": True, "errors": [], "records_checked": 2}
    written = Path(summary["candidate_path"]).read_bytes()
    # Carried byte for byte as Node wrote them, so Claude Code reads back the same strings.
    assert b'"content":"I typed ' + high + b' here"' in written
    assert b'"text":"My answer ' + low + b'"' in written
    assert path.read_bytes() == source


@pytest.mark.skipif(not claude_available(), reason="the pinned Claude Code binary is missing")
def test_real_client_sees_the_cut_emoji_as_the_old_session_did(
        setup: tuple[Path, Path, Path]) -> None:
    project, out, config = setup
    path, _, _ = _cut_emoji_transcript(project)
    made = _candidate(config, out, path)
    assert made.returncode == 0, made.stderr
    summary = json.loads(made.stdout)
    workdir = project.parent / "work"
    old = resume_and_capture(path, path.stem, workdir, "and now?")
    new = resume_and_capture(Path(summary["candidate_path"]), summary["new_session_id"],
                             workdir, "and now?")
    said = conversation_texts(new[0])
    # Claude Code itself sends a lone surrogate as U+FFFD: the model of the rebuilt session
    # reads the very words the old session's model read.
    assert said == conversation_texts(old[0])
    assert said == [("user", "I typed see \ufffd here"), ("assistant", "My answer \ufffd done"),
                    ("user", "and now?")]


def _add_impossible_records(b: TranscriptBuilder) -> list[int]:
    """Records that parse but that Claude Code cannot write where speech could be; returns
    their line numbers."""
    def user(**changes: object) -> dict[str, object]:
        record = b._envelope("user", message={"role": "user", "content": "words to keep"})
        record.update(changes)
        return record

    no_uuid = user()
    del no_uuid["uuid"]
    shapes = [
        user(message={"role": "user", "content": 42}),
        user(message="hello there"),
        no_uuid,
        user(parentUuid=42),
        user(message={"role": "user", "content": ["loose words"]}),
        user(message={"role": "user", "content": [{"type": "text", "text": 7}]}),
        b._envelope("assistant", message={"role": "assistant", "content": {"text": "hi"}}),
    ]
    lines = []
    for record in shapes:
        b.add(record, link=False)
        lines.append(len(b.records))
    return lines


def test_impossible_shapes_block_with_their_line_numbers(setup: tuple[Path, Path, Path]) -> None:
    project, out, config = setup
    b = TranscriptBuilder()
    b.user("first words")
    b.say("first answer")
    expected = _add_impossible_records(b)
    b.user("last words")
    b.say("last answer")
    path = b.write(project / f"{b.session_id}.jsonl")

    report = _plan(config, path)
    assert report["unreadable_lines"] == []
    assert report["impossible_lines"] == expected
    reason = str(report["blocked_reason"])
    assert reason.startswith(f"{len(expected)} user/assistant records of a shape Claude Code")
    assert ", ".join(map(str, expected)) in reason

    made = _candidate(config, out, path)
    assert made.returncode == 1
    assert made.stderr.count("\n") == 1
    assert f"plan blocked: {len(expected)} user/assistant records" in made.stderr
    assert list(out.iterdir()) == []

    # With blocking turned off the lines are still reported, and the rest is carried.
    config.write_text(config.read_text() + "block_on_unreadable_lines = false\n")
    report = _plan(config, path)
    assert report["impossible_lines"] == expected and report["blocked_reason"] == ""
    assert report["carried_speech_items"] == 4


def test_a_record_whose_type_is_not_a_string_is_tolerated(
        setup: tuple[Path, Path, Path]) -> None:
    """Any JSON value may stand where Claude Code writes a type: such a record is of an unknown
    type (tolerated, like any other), never a crash."""
    project, out, config = setup
    b = TranscriptBuilder()
    b.user("first words")
    b.say("first answer")
    for odd in (["user"], {"type": "user"}, None, 7):
        b.add(b._envelope("user", type=odd, message={"role": "user", "content": "odd words"}),
              link=False)
    b.user("last words")
    b.say("last answer")
    path = b.write(project / f"{b.session_id}.jsonl")

    report = _plan(config, path)
    assert report["impossible_lines"] == [] and report["blocked_reason"] == ""
    assert report["carried_speech_items"] == 4
    made = _candidate(config, out, path)
    assert made.returncode == 0, made.stderr


def test_a_users_own_tags_inside_a_line_are_carried(setup: tuple[Path, Path, Path]) -> None:
    project, out, config = setup
    b = TranscriptBuilder()
    typed = "Remind me: <system-reminder>buy milk</system-reminder> before six."
    b.user(typed)
    b.say("I will.")
    # Where Claude Code puts its blocks: a whole text block, or at the start / the end of the
    # text on their own lines. Those are removed; the words between are kept exactly.
    b.add(b._envelope("user", message={"role": "user", "content": [
        {"type": "text", "text": "<system-reminder>attribution</system-reminder>"},
        {"type": "text", "text": "and <command-name>x</command-name> stays"}]}))
    b.expected.append(("user", "and <command-name>x</command-name> stays"))
    b.user("<system-reminder>\nmemory\n</system-reminder>\nwords  \n"
           "<system-reminder>late</system-reminder>\n", expect=False)
    b.expected.append(("user", "words"))
    b.say("Done.")
    path = b.write(project / f"{b.session_id}.jsonl")

    made = _candidate(config, out, path)
    assert made.returncode == 0, made.stderr
    summary = json.loads(made.stdout)
    assert summary["verification"]["ok"] is True
    records = [json.loads(line) for line in Path(summary["candidate_path"]).read_text()
               .splitlines()]
    carried = [(r["type"], r["message"]["content"] if r["type"] == "user"
                else r["message"]["content"][0]["text"]) for r in records]
    assert carried == b.expected
    assert carried[0] == ("user", typed)
