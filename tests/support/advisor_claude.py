"""The real Claude Code consulting the real Kimi Code CLI through the advisor, both against
loopback stand-ins: the pieces the acceptance tests (tests/advisor/test_acceptance.py) share.

- :func:`make_advisor_place` lays out one user's world in a temporary directory: an isolated
  Claude Code (its config with the advisor's settings block from ``kael_advisor.pieces``: the
  prompt hook and the MCP server ``advisor-mcp`` as ``claude mcp add`` would register it) and
  an isolated ``KIMI_CODE_HOME`` whose provider is the OpenAI-style stand-in.
- :func:`advisor_script` is a responder for the Messages API stand-in that plays a Claude model
  following the advisor's instructions: for a prompt naming a plan (``PLAN: create auth | consult
  blueprint: how? | consult: and then?``) it calls the tools in order, and after each
  ``advisor_consult`` it calls ``advisor_poll`` with the number returned until the answer is
  there; then it ends the turn quoting every tool result, so the test reads them on stdout.
"""

from __future__ import annotations

import json
import queue
import re
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kael_advisor import pieces
from kael_advisor.places import IDLE_ENV, KIMI_ENV, SESSIONS_ENV, SESSIONS_FOLDER

from .claude_env import (
    STREAM_JSON_ARGS,
    ClaudeEnv,
    find_claude_binary,
    make_claude_env,
    user_message_line,
)
from .kimi_env import KimiEnv, find_kimi_binary, make_kimi_env
from .standin_api import Reply, Text, ToolUse, default_responder, tool_result_text

__all__ = [
    "PLAN",
    "AdvisorPlace",
    "Step",
    "StreamClaude",
    "advisor_script",
    "make_advisor_place",
    "parse_plan",
    "tool_name",
]

PLAN = "PLAN:"
#: Seconds the stand-in waits before answering a repeated poll (a model does not poll in a loop).
POLL_PAUSE = 0.3
_ID = re.compile(r"#(t\d+)")


def tool_name(tool: str) -> str:
    """Claude Code's name of one of the advisor's tools (``mcp__advisor-mcp__<tool>``)."""
    return pieces.permission(tool)


@dataclass(frozen=True)
class Step:
    """One tool call of a plan."""

    tool: str  # advisor_consult, advisor_create_task, ...
    arguments: dict[str, Any]


def parse_plan(text: str) -> list[Step]:
    """The steps of ``PLAN: step | step | ...`` in TEXT (the last ``PLAN:`` wins):

    ``create NAME [goal=GOAL]`` · ``create! NAME`` (force_new) · ``consult[ MODE]: MESSAGE`` ·
    ``consult@TASK: MESSAGE`` (task_id) · ``list`` · ``close[ TASK]``.
    """
    at = text.rfind(PLAN)
    steps: list[Step] = []
    if at < 0:
        return steps
    for raw in text[at + len(PLAN):].splitlines()[0].split("|"):
        word, _, rest = raw.strip().partition(" ")
        if word.startswith("consult"):
            head, _, message = raw.strip().partition(":")
            args: dict[str, Any] = {"message": message.strip()}
            head = head.strip()
            if head.startswith("consult@"):
                args["task_id"] = head[len("consult@"):]
            elif " " in head:
                args["mode"] = head.split(" ", 1)[1].strip()
            steps.append(Step("advisor_consult", args))
        elif word in ("create", "create!"):
            name, _, goal = rest.partition(" goal=")
            args = {"name": name.strip()}
            if goal:
                args["goal"] = goal.strip()
            if word == "create!":
                args["force_new"] = True
            steps.append(Step("advisor_create_task", args))
        elif word == "list":
            steps.append(Step("advisor_list_tasks", {}))
        elif word == "close":
            steps.append(Step("advisor_close_task", {"task_id": rest.strip()} if rest.strip()
                              else {}))
        elif word:
            raise ValueError(f"unknown plan step {raw!r}")
    return steps


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content or [] if isinstance(b, dict)]


def _exchange(body: Mapping[str, Any]) -> tuple[list[Step], list[tuple[str, dict[str, Any],
                                                                       str]]] | None:
    """The plan of the newest prompt holding one, and the (tool, input, result) calls since."""
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.get("role") != "user":
            continue
        texts = [b.get("text", "") for b in _blocks(message.get("content"))
                 if b.get("type") == "text"]
        plan_texts = [t for t in texts if PLAN in t]
        if not plan_texts:
            continue
        calls: dict[str, tuple[str, dict[str, Any]]] = {}
        done: list[tuple[str, dict[str, Any], str]] = []
        for later in messages[index + 1:]:
            for block in _blocks(later.get("content")):
                if block.get("type") == "tool_use":
                    calls[str(block.get("id"))] = (str(block.get("name")),
                                                   dict(block.get("input") or {}))
                elif block.get("type") == "tool_result":
                    name, given = calls.get(str(block.get("tool_use_id")), ("?", {}))
                    done.append((name, given, tool_result_text(block)))
        return parse_plan(plan_texts[-1]), done
    return None


def advisor_script(body: dict[str, Any]) -> Reply:
    """The Claude model of the acceptance tests (see the module's docstring)."""
    found = _exchange(body)
    if found is None:
        return default_responder(body)
    steps, done = found
    planned = [(name, given, text) for name, given, text in done
               if name != tool_name("advisor_poll")]
    if done:
        name, given, text = done[-1]
        waiting = text.startswith("⏳")
        if name in (tool_name("advisor_consult"), tool_name("advisor_poll")) and waiting:
            number = _ID.search(text) or _ID.search(json.dumps(given))
            if number is None:
                return Reply([Text(f"RESULTS\nno consultation number in: {text}")])
            return Reply([ToolUse(tool_name("advisor_poll"), {"task": number[1]})],
                         delay=POLL_PAUSE if name == tool_name("advisor_poll") else 0.0)
    if len(planned) < len(steps):
        step = steps[len(planned)]
        return Reply([ToolUse(tool_name(step.tool), step.arguments)])
    said = "\n".join(f"[{name.rsplit('__', 1)[-1]}] {text}" for name, _, text in done)
    return Reply([Text(f"RESULTS\n{said}")])


@dataclass
class AdvisorPlace:
    """One user's Claude Code and Kimi Code, sharing a project, with the advisor installed."""

    claude: ClaudeEnv
    kimi: KimiEnv

    @property
    def project(self) -> Path:
        return self.claude.cwd

    @property
    def sessions(self) -> Path:
        return Path(self.claude.extra_env[SESSIONS_ENV])

    @property
    def table(self) -> Path:
        return self.project / ".agent" / "advisor-tasks.json"

    def table_data(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.table.read_text())
        return data


def advisor_env(kimi: KimiEnv, sessions: Path, idle_seconds: float) -> dict[str, str]:
    """What the hook and the MCP server are given: the Kimi CLI, its home, the hook's dir."""
    return {
        SESSIONS_ENV: str(sessions),
        KIMI_ENV: str(find_kimi_binary()),
        IDLE_ENV: f"{idle_seconds:g}",
        "KIMI_CODE_HOME": str(kimi.kimi_home),
        "KIMI_CODE_NO_AUTO_UPDATE": "1",
        "KIMI_DISABLE_TELEMETRY": "1",
    }


def make_advisor_place(root: Path, claude_url: str, kimi_url: str, *,
                       permissions: Mapping[str, Sequence[str]] | None = None,
                       cwd: Path | None = None, kimi_home: Path | None = None,
                       idle_seconds: float = 10) -> AdvisorPlace:
    """An isolated Claude Code (under ``root/claude``) with the advisor's settings block and MCP
    server, and an isolated Kimi Code (``root/kimi``, or the one at KIMI_HOME, shared) whose
    project is Claude Code's cwd.

    PERMISSIONS replaces the block's (``claude -p`` cannot ask: pass
    ``{"allow": ["mcp__advisor-mcp"]}`` there); the settings' env, the hook entry and
    ``MCP_TOOL_TIMEOUT`` are the block's as ``kael-advisor pieces`` prints it.
    """
    root.mkdir(parents=True, exist_ok=True)
    kimi = make_kimi_env(root / "kimi", kimi_url)
    if kimi_home is not None:
        kimi.kimi_home = kimi_home
    settings = pieces.settings()
    if permissions is not None:
        settings["permissions"] = {kind: list(rules) for kind, rules in permissions.items()}
    sessions = root / "claude" / "config" / SESSIONS_FOLDER
    env = advisor_env(kimi, sessions, idle_seconds)
    server = {"type": "stdio", "command": pieces.program("kael-advisor-mcp"), "args": [],
              "env": env}
    claude = make_claude_env(root / "claude", claude_url, cwd=cwd,
                             mcp_servers={pieces.SERVER_NAME: server}, settings=settings)
    claude.extra_env.update(env)
    kimi.cwd = claude.cwd
    return AdvisorPlace(claude, kimi)


class StreamClaude:
    """One Claude Code window kept open: ``claude -p`` over stream-json, one turn at a time, so
    that two windows (two processes, two MCP servers) can take turns on one project."""

    def __init__(self, env: ClaudeEnv, timeout: float = 120) -> None:
        self.env, self.timeout = env, timeout
        self.session_id: str | None = None
        self._proc: subprocess.Popen[str] | None = None
        self._lines: queue.Queue[str | None] = queue.Queue()

    def __enter__(self) -> StreamClaude:
        self._proc = subprocess.Popen(
            [str(find_claude_binary()), "-p", *STREAM_JSON_ARGS], cwd=self.env.cwd,
            env=self.env.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, text=True, encoding="utf-8")
        threading.Thread(target=self._pump, daemon=True).start()
        return self

    def _pump(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        for line in self._proc.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def turn(self, prompt: str) -> str:
        """Sends PROMPT as the next user message; the turn's result text."""
        assert self._proc is not None and self._proc.stdin is not None
        self._proc.stdin.write(user_message_line(prompt))
        self._proc.stdin.flush()
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                line = self._lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                raise TimeoutError(f"no result for {prompt!r} within {self.timeout:g} s") \
                    from None
            if line is None:
                raise RuntimeError(f"claude exited during {prompt!r}")
            event = json.loads(line) if line.startswith("{") else {}
            self.session_id = event.get("session_id") or self.session_id
            if event.get("type") == "result":
                return str(event.get("result") or "")

    def __exit__(self, *exc: object) -> None:
        if self._proc is None:
            return
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        try:
            self._proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
