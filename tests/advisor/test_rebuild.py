"""The rebuild carries the advisor (issue 24), with the real binaries: the real Claude Code
consults the real Kimi Code CLI through the prompt hook and the MCP server, both against loopback
stand-ins; the engine's own command line plans and writes the candidate of that transcript.

- The advisor's finished answers are words said in the conversation: the candidate holds each
  verbatim (an assistant item of origin `advisor_answer`), and none of the rest of its traffic
  (the consult's "consultation started", the running polls, the task's creation); the real
  Claude Code resuming the candidate sends them as text, with no tool block.
- Lineage: after a switch A -> B, a consult in B continues A's Kimi session (the provider
  stand-in sees A's exchange in the request); after a rollback to A, the same Kimi session again.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from kael_advisor import hook, places
from kael_advisor.places import SESSIONS_ENV, window_file
from kael_thread_rebuild.conversation import records as engine_records
from tests.advisor.test_acceptance import answers, claude
from tests.support.advisor_claude import AdvisorPlace, make_advisor_place
from tests.support.claude_env import claude_available, run_print
from tests.support.fidelity import conversation_texts, main_requests, non_text_block_types
from tests.support.kimi_env import kimi_available
from tests.support.standin_api import Reply as ClaudeReply
from tests.support.standin_api import StandinAPI, Text, ToolUse, default_responder
from tests.support.standin_openai import Reply, StandinOpenAI, user_prompts

needs_real_binaries = pytest.mark.skipif(
    not (claude_available() and kimi_available()),
    reason="the Claude Code binary or the Kimi Code CLI is not installed")
MARKER = "kaelRebuild"
SOURCE_SESSION = "sourceSessionId"  # the lineage key (the contract's name)
LONG_ADVICE = "\n".join(f"{n}. 先加锁 — take the lock, then re-read the table ({n})"
                        for n in range(1, 40))


def engine(config: Path, *args: str) -> dict[str, Any]:
    """The engine's command line (`--json`), which must succeed; its JSON."""
    done = subprocess.run([sys.executable, "-m", "kael_thread_rebuild.interfaces.cli",
                           "--config", str(config), "--json", *args],
                          capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    data: dict[str, Any] = json.loads(done.stdout)
    return data


def rebuild(place: AdvisorPlace, session: str, tmp_path: Path) -> tuple[str, dict[str, Any]]:
    """Plan and write the candidate of SESSION's transcript into Claude Code's project folder
    (where a switch puts it); the new session id and the plan."""
    folder = place.claude.project_dir
    config = tmp_path / "engine.toml"
    config.write_text(f'project_dir = "{folder}"\nstate_dir = "{tmp_path / "state"}"\n')
    source = str(folder / f"{session}.jsonl")
    plan = engine(config, "plan", "--transcript", source)
    made = engine(config, "candidate", "--transcript", source, "--output-dir", str(folder))
    assert made["verification"]["ok"], made
    return str(made["new_session_id"]), plan


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def text_of(record: dict[str, Any]) -> str:
    content = record["message"]["content"]
    return content if isinstance(content, str) else str(content[0]["text"])


@pytest.mark.real_claude
@needs_real_binaries
def test_finished_answers_are_carried_verbatim_and_the_rest_stays_runtime(
        place: AdvisorPlace, kimi_api: StandinOpenAI, claude_api: StandinAPI,
        tmp_path: Path) -> None:
    kimi_api.queue(Reply("first advice: start with the lock"), Reply(LONG_ADVICE))
    out, session = claude(place, "create auth goal=safe table writes | "
                                 "consult blueprint: where do I start? | consult: and then?")
    said = answers(out)  # what Claude Code was given back, as it quoted it
    assert len(said) == 2 and said[1].endswith(LONG_ADVICE), out
    assert session is not None
    source = place.claude.session_path(session).read_text()
    assert "consultation started" in source and "still thinking" in source

    new_id, plan = rebuild(place, session, tmp_path)
    candidate = records(place.claude.session_path(new_id))
    carried = [(r["type"], r[MARKER]["origin"], text_of(r)) for r in candidate
               if r[MARKER].get("origin")]
    for answer in said:  # verbatim
        assert answer in [text for _, _, text in carried], answer[:80]
    answered = [text for kind, origin, text in carried if origin == "advisor_answer"]
    assert answered == said  # in order, and nothing else
    assert plan["speech_by_origin"]["advisor_answer"] == 2, plan
    assert all(kind == "assistant" for kind, origin, _ in carried if origin == "advisor_answer")
    # The rest of the advisor's traffic is runtime: the consult's start, the running polls, the
    # task's creation (the scripted model's last words quote them all: that is its speech).
    others = "\n".join(text_of(r) for r in candidate if not text_of(r).startswith("RESULTS"))
    for runtime in ("consultation started", "still thinking", "📌 task", "advisor_poll("):
        assert runtime not in others, runtime
    assert candidate[0][MARKER][SOURCE_SESSION] == session

    # The real Claude Code resuming the candidate sends the answers as text, no tool block.
    claude_api.clear()
    run_print(place.claude, "What did the advisor say?", resume=new_id, timeout=180)
    [body] = [b for b in main_requests(claude_api.message_bodies())
              if "What did the advisor say?" in json.dumps(b)][:1]
    assert non_text_block_types(body) == set()
    texts = [text for role, text in conversation_texts(body) if role == "assistant"]
    for answer in said:
        assert any(answer in text for text in texts), answer[:80]


PARALLEL = "PARALLEL POLLS"


def _tool_results(body: dict[str, Any]) -> list[str]:
    """The texts of the tool results since the prompt (Claude Code's structured `{"result"}`
    JSON read as its text)."""
    found = []
    for message in body.get("messages") or []:
        content = message.get("content")
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                inner = block.get("content")
                text = inner if isinstance(inner, str) else "".join(
                    str(part.get("text", "")) for part in inner or [])
                found.append(str(json.loads(text).get("result", text)) if text.startswith("{")
                             else text)
    return found


def parallel_polls(body: dict[str, Any]) -> ClaudeReply:
    """A model that consults, then polls with a Bash call beside it in the same message (the
    poll's result finishes first, so it hangs off the path the next message continues), until
    the answer is there."""
    if PARALLEL not in json.dumps(body.get("messages") or []):
        return default_responder(body)
    results = _tool_results(body)
    if not results:
        return ClaudeReply([ToolUse("mcp__advisor-mcp__advisor_consult",
                                    {"message": "asked beside a Bash call"})])
    if any(text.startswith("✅") for text in results):
        return ClaudeReply([Text("DONE: the advisor answered")])
    return ClaudeReply([ToolUse("mcp__advisor-mcp__advisor_poll", {"task": "t1"}),
                        ToolUse("Bash", {"command": "sleep 1", "description": "wait a second"})])


def _ancestors(transcript: Path) -> set[str]:
    """The uuids the last record of TRANSCRIPT descends from (itself included)."""
    rows = [json.loads(line) for line in transcript.read_text().splitlines()]
    parents = {r["uuid"]: r.get("parentUuid") for r in rows if isinstance(r.get("uuid"), str)}
    current = [r["uuid"] for r in rows if r.get("type") == "assistant"][-1]
    chain = set()
    while current is not None and current not in chain:
        chain.add(current)
        current = parents.get(current)
    return chain


@pytest.mark.real_claude
@needs_real_binaries
def test_an_answer_off_the_path_of_a_parallel_call_is_carried(
        tmp_path: Path, kimi_api: StandinOpenAI) -> None:
    kimi_api.queue(Reply("advice given beside a Bash call"))
    with StandinAPI(parallel_polls) as api:
        place = make_advisor_place(tmp_path, api.url, kimi_api.url, permissions={
            "allow": ["mcp__advisor-mcp", "Bash"]})
        done = run_print(place.claude, PARALLEL, timeout=180)
    assert "DONE" in done.stdout, done.stdout + done.stderr
    assert done.session_id is not None
    transcript = place.claude.session_path(done.session_id)
    rows = [json.loads(line) for line in transcript.read_text().splitlines()]
    [answer] = [r for r in rows if r.get("type") == "user" and "✅ consultation #t1" in
                json.dumps(r.get("message"), ensure_ascii=False)]
    assert answer["uuid"] not in _ancestors(transcript)  # the layout this test is about

    new_id, plan = rebuild(place, done.session_id, tmp_path)
    assert plan["speech_by_origin"]["advisor_answer"] == 1, plan
    carried = [text_of(r) for r in records(place.claude.session_path(new_id))
               if r[MARKER].get("origin") == "advisor_answer"]
    assert len(carried) == 1 and carried[0].endswith("advice given beside a Bash call")


def _history(body: dict[str, Any]) -> list[str]:
    return [str(m["content"]) for m in body["messages"] if m["role"] == "assistant"]


def _log(kimi_api: StandinOpenAI) -> list[str]:
    """The provider stand-in's requests, one line each: the Kimi session (`prompt_cache_key`),
    the user prompts' ends and the assistant history it was sent."""
    return [f"chat {n}: prompt_cache_key={body['prompt_cache_key']} "
            f"prompts={[p[-24:] for p in user_prompts(body)]} history={_history(body)}"
            for n, body in enumerate(kimi_api.chat_bodies(), start=1)]


@pytest.mark.real_claude
@needs_real_binaries
def test_a_switch_and_a_rollback_continue_the_same_kimi_session(
        place: AdvisorPlace, kimi_api: StandinOpenAI, tmp_path: Path) -> None:
    kimi_api.queue(Reply("advice in A"), Reply("advice in B"), Reply("advice after rollback"))
    _, session_a = claude(place, "consult: asked in A")
    assert session_a is not None
    [binding] = place.table_data()["bindings"].values()
    kimi = binding["kimi_session"]

    session_b, _ = rebuild(place, session_a, tmp_path)
    claude(place, "consult: asked in B", resume=session_b)
    claude(place, "consult: asked after the rollback", resume=session_a)

    for line in _log(kimi_api):
        print(line)
    first, in_b, rolled_back = kimi_api.chat_bodies()
    assert first["prompt_cache_key"] == in_b["prompt_cache_key"] == \
        rolled_back["prompt_cache_key"] == kimi
    assert _history(in_b) == ["advice in A"]
    assert any(p.endswith("asked in A") for p in user_prompts(in_b)[:-1])
    assert _history(rolled_back) == ["advice in A", "advice in B"]
    table = place.table_data()
    assert list(table["bindings"]) == [session_a] and not table["archived"]
    assert len(table["bindings"][session_a]["consultations"]) == 3
    window_b = json.loads((place.sessions / window_file(str(place.project), session_b))
                          .read_text())
    assert (window_b["session_id"], window_b["conversation"]) == (session_b, session_a)


def _candidate_line(source: str) -> str:
    return json.dumps({"type": "user", "uuid": "u", MARKER: {"kind": "startup_snapshot",
                                                             SOURCE_SESSION: source},
                       "message": {"role": "user", "content": "x"}}) + "\n"


def test_the_hook_reads_the_engine_s_lineage_key() -> None:
    assert (hook.MARKER, hook.SOURCE_SESSION) == (engine_records.MARKER, SOURCE_SESSION) == (
        MARKER, engine_records.SOURCE_SESSION)


def test_lineage_is_followed_bounded_and_round_no_cycle(tmp_path: Path) -> None:
    ids = [f"{n:08d}-0000-4000-8000-000000000000" for n in range(40)]
    (tmp_path / f"{ids[0]}.jsonl").write_text('{"type": "user"}\n')
    for older, newer in itertools.pairwise(ids):
        (tmp_path / f"{newer}.jsonl").write_text(_candidate_line(older))
    assert hook.root_of(ids[3], tmp_path / f"{ids[3]}.jsonl") == ids[0]
    assert hook.root_of(ids[39], tmp_path / f"{ids[39]}.jsonl") == ids[39 - hook.MAX_HOPS]
    (tmp_path / f"{ids[0]}.jsonl").write_text(_candidate_line(ids[2]))  # a cycle
    assert hook.root_of(ids[2], tmp_path / f"{ids[2]}.jsonl") in ids[:3]
    (tmp_path / "evil.jsonl").write_text(_candidate_line("../../etc/passwd"))
    assert hook.root_of("evil", tmp_path / "evil.jsonl") == "evil"


def test_the_hook_as_a_stdlib_zipapp_writes_the_conversation(tmp_path: Path) -> None:
    """The hook packed with only its own modules, run by an isolated Python: the lineage needs
    nothing beyond the standard library."""
    package = Path(hook.__file__).parent
    archive = tmp_path / "kael-advisor-hook.pyz"
    with zipfile.ZipFile(archive, "w") as packed:
        for name in ("__init__.py", "hook.py", "places.py"):
            packed.write(package / name, f"kael_advisor/{name}")
        packed.writestr("__main__.py", "import sys\nfrom kael_advisor.hook import main\n"
                                       "sys.exit(main())\n")
    source = "aaaaaaaa-1111-4111-8111-111111111111"
    rebuilt = "bbbbbbbb-2222-4222-8222-222222222222"
    folder = tmp_path / "projects" / "p"
    folder.mkdir(parents=True)
    (folder / f"{source}.jsonl").write_text('{"type": "user"}\n')
    (folder / f"{rebuilt}.jsonl").write_text(_candidate_line(source))
    event = json.dumps({"session_id": rebuilt, "cwd": "/home/u/p", "prompt": "hi",
                        "transcript_path": str(folder / f"{rebuilt}.jsonl")}).encode()
    sessions = tmp_path / "sessions"
    done = subprocess.run(["python3", "-I", "-S", str(archive)], input=event,
                          capture_output=True, timeout=60, check=False,
                          env={SESSIONS_ENV: str(sessions), "PATH": "/usr/bin:/bin"})
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    window = json.loads((sessions / window_file("/home/u/p", rebuilt)).read_text())
    assert window["conversation"] == source
    assert places.SESSIONS_ENV == SESSIONS_ENV
