"""The live drill's stage: the real Claude Code interactive in a tmux pane on a private socket,
with our Stop hook and MCP server in its own config dir, the daemon as a separate process, and a
scripted stand-in API. Shared by `tests/drill/` and `benchmarks/bench_switch.py`.

The scenario's speech is written down here, from the script, never read back from the engine.
"""

from __future__ import annotations

import contextlib
import shlex
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from kael_thread_rebuild.claude_code import registry
from kael_thread_rebuild.config import Config
from kael_thread_rebuild.doctor.mcp import SERVER_NAME
from tests.support.claude_env import (
    DEFAULT_ALLOW,
    ClaudeEnv,
    TmuxClaude,
    find_claude_binary,
    make_claude_env,
    wait_mcp_tools_taken,
)
from tests.support.standin_api import Reply, StandinAPI, Text, Thinking, ToolUse, prompt_script
from tests.switching.sandbox import wait_until

from . import procs

REQUEST_TOOL = f"mcp__{SERVER_NAME}__thread_rebuild_request"
BIG_OUTPUT_LINES = 40000
#: A user's interactive shell with job control (Ctrl-C reaches only the foreground program).
SHELL = ["bash", "--norc", "--noprofile", "-i"]
#: How long a pressed Enter may take to empty the input box before it counts as dropped.
ENTER_SECONDS = 5.0
#: Claude Code writes this system record after the Stop hooks of every turn.
STOP_SUMMARY = b'"subtype":"stop_hook_summary"'

# -- the scenario ------------------------------------------------------------------------------

P_TOOLS = "drill one: please count the lines of the big listing, 漢字 ok"
A_TOOLS = "I will run the listing first."
A_TOOLS_DONE = f"The listing has {BIG_OUTPUT_LINES} lines; the last one is {BIG_OUTPUT_LINES}."
P_THINK = "drill two: think about kingfisher 7731 and answer in one word"
A_THINK = "Kingfisher 7731 noted. One word: blue."
P_REBUILD = "drill three: yes, please rebuild the session now"
A_REBUILD = "Requesting the rebuild, as you agreed."
A_REBUILD_DONE = "The rebuild is recorded; it happens once this reply ends."
P_AFTER = "drill four: what do you remember after the switch?"
A_AFTER = "Every word we said, and nothing else."
P_BACK = "drill five: please go back to the old session"
A_BACK = "Going back once this reply ends."
P_OLD = "drill six: and now we are in the old session again"
A_OLD = "Back in the old session, tools and all."

#: The old session's speech, in order, as the new session's model must see it.
OLD_SPEECH: list[tuple[str, str]] = [
    ("user", P_TOOLS), ("assistant", A_TOOLS), ("assistant", A_TOOLS_DONE),
    ("user", P_THINK), ("assistant", A_THINK),
    ("user", P_REBUILD), ("assistant", A_REBUILD), ("assistant", A_REBUILD_DONE),
]


def responder() -> Callable[[dict[str, Any]], Reply | list[Any]]:
    return prompt_script({
        P_TOOLS: [Reply([Text(A_TOOLS), ToolUse("Bash", {
                      "command": f"seq 1 {BIG_OUTPUT_LINES}", "description": "big listing"})]),
                  Reply([Text(A_TOOLS_DONE)])],
        P_THINK: [Reply([Thinking("private: the user wants one word"), Text(A_THINK)])],
        P_REBUILD: [Reply([Text(A_REBUILD), ToolUse(REQUEST_TOOL, {
                        "reason": "drill: the human asked for a fresh start",
                        "confirmation": "REBUILD"})]),
                    Reply([Text(A_REBUILD_DONE)])],
        P_AFTER: [Reply([Text(A_AFTER)])],
        P_BACK: [Reply([Text(A_BACK)])],
        P_OLD: [Reply([Text(A_OLD)])],
    })


# -- the stage ---------------------------------------------------------------------------------


@dataclass
class Stage:
    root: Path
    api: StandinAPI
    env: ClaudeEnv
    tui: TmuxClaude
    config: Config
    config_path: Path

    def cli(self, *args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[str]:
        return procs.run_cli(self.config_path, *args, stdin=stdin)

    def pane(self) -> tuple[str, int]:
        return procs.pane(self.tui.socket, self.tui.target)

    def registry_session(self) -> str | None:
        """The session id in Claude Code's own registry entry for the pane's process, or for the
        nearest process under it (a Claude Code started in the pane's shell)."""
        entry = registry.entry_for_tree(self.env.config_dir, self.pane()[1])
        return entry.session_id if entry is not None else None

    def household_pane(self) -> None:
        """remain-on-exit off, as in a household's tmux (the test helper turns it on)."""
        procs.tmux(self.tui.socket, "set-option", "-u", "-t", self.tui.session,
                   "remain-on-exit")

    def requests_with(self, prompt: str) -> list[dict[str, Any]]:
        """The requests whose last user message holds PROMPT."""
        found = []
        for body in self.api.message_bodies():
            users = [m for m in body.get("messages") or [] if m.get("role") == "user"]
            if users and prompt in orjson.dumps(users[-1]["content"]).decode():
                found.append(body)
        return found

    def tool_listed(self, name: str) -> bool:
        """Whether Claude Code has told the model about tool NAME (MCP tools are announced in
        a deferred-tools reminder once their server is connected)."""
        return any(name in orjson.dumps(body).decode() for body in self.api.message_bodies())

    def submit(self, prompt: str, timeout: float = 60) -> None:
        """Type PROMPT, and press Enter once Claude Code's input box shows it; again while the
        box still holds it: under load the TUI can drop an Enter that follows the typing (the
        prompt then sits unsent in the box)."""
        self.tui.wait_for("❯", timeout=timeout)
        self.tui.type_text(prompt)
        self.tui.wait_for(lambda screen: input_box(screen) == prompt, timeout)
        deadline = time.monotonic() + timeout
        while True:
            self.tui.send_keys("Enter")
            with contextlib.suppress(TimeoutError):
                self.tui.wait_for(lambda screen: input_box(screen) != prompt, ENTER_SECONDS)
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"Claude Code kept {prompt!r} in its input box for "
                                   f"{timeout:g} s of pressing Enter:\n{self.tui.capture()}")

    def turn(self, prompt: str, answer: str, timeout: float = 60) -> None:
        """Type PROMPT and wait until Claude Code has written the reply holding ANSWER and run
        its Stop hooks (it writes `stop_hook_summary` after them)."""
        session = wait_until(self.registry_session, timeout, what="Claude Code to register")
        transcript = self.env.session_path(session)
        before = _read(transcript).count(STOP_SUMMARY)

        def done() -> bool:
            data = _read(transcript)
            return answer.encode() in data and data.count(STOP_SUMMARY) > before

        self.submit(prompt)
        try:
            wait_until(done, timeout, what=f"the reply {answer!r} and the Stop hook")
        except TimeoutError as exc:
            raise TimeoutError(f"{exc}; the pane shows:\n{self.tui.capture()}") from None

    def wait_mcp_ready(self, timeout: float = 60) -> float:
        """Wait until the pane's Claude Code has our MCP server's tools: it sends its first
        request without waiting for MCP servers, and a slow server (a `docker run` under load)
        would miss the turn. Returns the seconds waited."""
        session = wait_until(self.registry_session, timeout, what="Claude Code to register")
        return wait_mcp_tools_taken(self.env, SERVER_NAME, session, timeout)

    def register_mcp(self) -> None:
        """Register our MCP server as the installer does, while Claude Code runs."""
        entry = mcp_server(self.config_path)
        subprocess.run([str(find_claude_binary()), "mcp", "add", "--scope", "user", SERVER_NAME,
                        "--", entry["command"], *entry["args"]],
                       env=self.env.env, cwd=self.env.cwd, check=True, capture_output=True,
                       timeout=60)

    def wait_ready(self, session_id: str, timeout: float = 60) -> None:
        """Wait until the pane's Claude Code runs SESSION_ID and shows its prompt."""
        wait_until(lambda: self.registry_session() == session_id, timeout,
                   what=f"the pane to run session {session_id}")
        self.tui.wait_for("❯", timeout=timeout)


def input_box(screen: str) -> str | None:
    """The text in Claude Code's input box: the lines between the screen's last two rules,
    without the `❯` mark; None when no box is shown."""
    lines = screen.splitlines()
    rules = [i for i, line in enumerate(lines) if line.startswith("───")]
    if len(rules) < 2:
        return None
    inside = " ".join(line.strip() for line in lines[rules[-2] + 1:rules[-1]])
    return inside.removeprefix("❯").strip()


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return b""


@contextlib.contextmanager
def stage(root: Path, *, daemon: bool = True, pane_shell: bool = False,
          hook_delay: float = 0.0, mcp_at_start: bool = True,
          **config_overrides: Any) -> Iterator[Stage]:
    """Everything up, Claude Code's prompt on screen and our MCP server's tools taken in;
    everything stopped and killed afterwards.

    ROOT (an empty directory in the temp dir) holds the Claude Code state, the config, the state
    dir and the daemon's stderr. Without DAEMON the test runs the worker itself. With
    PANE_SHELL the pane runs an interactive shell in which Claude Code is typed, as by a user.
    With HOOK_DELAY the Stop hook process returns that many seconds after it recorded the Stop,
    like a `docker exec` under load (Claude Code writes `stop_hook_summary` only then).
    Without MCP_AT_START our MCP server is not registered when Claude Code starts (as on a
    household the installer reaches while it runs): `register_mcp` registers it later.
    """
    with contextlib.ExitStack() as stack:
        api = stack.enter_context(StandinAPI(responder()))
        config_path = root / "kael.toml"
        hook = shlex.join([str(procs.CLI), "--config", str(config_path), "hook-stop"])
        if hook_delay:
            hook = f"{hook}; status=$?; sleep {hook_delay:g}; exit $status"
        env = make_claude_env(
            root / "claude", api.url, allow=(*DEFAULT_ALLOW, f"mcp__{SERVER_NAME}"),
            mcp_servers={SERVER_NAME: mcp_server(config_path)} if mcp_at_start else None,
            settings={"hooks": {"Stop": [{"hooks": [
                {"type": "command", "command": hook, "timeout": 10}]}]}})
        claude = str(find_claude_binary())
        tui = TmuxClaude(env, command=SHELL if pane_shell else None)
        # TmuxClaude starts the tmux server with the isolated environment (CLAUDE_CONFIG_DIR,
        # HOME, the stand-in API): it is the server's global environment, which respawn-pane
        # hands on, so the resume command needs nothing more.
        config = procs.write_config(config_path, {
            "project_dir": env.project_dir, "claude_workdir": env.cwd,
            "claude_config_dir": env.config_dir, "state_dir": root / "state",
            "activation": "tmux", "tmux_socket": tui.socket, "tmux_target": tui.target,
            "resume_command": [claude, "--resume", "{session_id}"],
            **config_overrides})
        if daemon:
            stack.enter_context(procs.daemon(config_path, root / "daemon.stderr"))
        stack.enter_context(tui)
        if pane_shell:
            tui.submit(shlex.quote(claude))
        tui.wait_for("❯", timeout=60)
        drill = Stage(root, api, env, tui, config, config_path)
        if mcp_at_start:
            print(f"live drill: our MCP server's tools taken in {drill.wait_mcp_ready():.2f} s "
                  "after the prompt showed")
        yield drill


def mcp_server(config_path: Path) -> dict[str, Any]:
    """Our MCP server's registration entry for the stage's config."""
    return {"type": "stdio", "command": str(procs.MCP), "args": ["--config", str(config_path)]}
