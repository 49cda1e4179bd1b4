"""The live drill inside a household (Molecule side effect).

Run as root inside the household; every key is typed as the Claude user into that user's own tmux
server, as the human would. The user first restarts Claude Code with `--continue` (a running
Claude Code does not load an MCP server registered while it runs), then asks for a rebuild: the
model calls the request tool with REBUILD, the human approves the tool, the real Stop hook
schedules it, the daemon switches the pane. A message typed afterwards must reach the stand-in
with the old conversation verbatim and no runtime block; then a rollback on the command line
takes the pane back to the old session. What was seen is written as JSON for the verify.

    drill.py --phase prepare --user alice --instance companion \
        --target companion-DO-NOT-CREATE:0.0 --start-command 'claude --model opus'
    drill.py --user alice --instance companion --target companion-DO-NOT-CREATE:0.0 \
        --start-command 'claude --model opus' --result /var/lib/kael-molecule/drill.json

A Claude Code that runs as a systemd unit (`--base systemd`, no `--target`): unit_drill.py.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pwd
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import standin as s

from support.claude_env import wait_mcp_tools_taken
from support.fidelity import conversation_texts, non_text_block_types

RECORD = Path("/var/lib/kael-standin/requests.jsonl")
#: Claude Code writes this system record after the Stop hooks of every turn.
STOP_SUMMARY = b'"subtype":"stop_hook_summary"'
SETTLED = {"activated", "cancelled", "failed", "rolled_back"}
T = TypeVar("T")
#: What the human answers with Enter: a tool's permission prompt, and (auto mode cannot reach its
#: server-side check through the stand-in) the choice to stay in auto mode and approve by hand.
#: The household's people keep manual mode (`defaultMode: "default"`, and 2.1.328's offer of auto
#: mode declined: `hasSeenAutoDefaultNudge`): under load, auto mode's check through the stand-in
#: failed the request tool's call outright instead of asking.
APPROVALS = ("Do you want to proceed?", "Enter to stay in auto mode")


def wait_until(probe: Callable[[], T | None], timeout: float, what: str) -> T:
    deadline = time.monotonic() + timeout
    while True:
        found = probe()
        if found:
            return found
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {timeout:.0f} s for {what}")
        time.sleep(0.2)


@dataclass(frozen=True)
class _Place:
    """A Claude Code's user home and workdir, where it keeps its MCP logs."""

    home: Path
    cwd: Path


@dataclass
class Household:
    user: str
    target: str
    instance: str
    container: str
    config: str
    #: Seconds the restart waited for Claude Code to take in our MCP tools (None: never seen).
    mcp_wait_seconds: float | None = field(default=None, init=False)

    @property
    def home(self) -> Path:
        return Path(pwd.getpwnam(self.user).pw_dir)

    def as_user(self, *argv: str) -> str:
        done = subprocess.run(["runuser", "-u", self.user, "--", *argv], capture_output=True,
                              text=True, check=True, timeout=30, cwd="/")
        return done.stdout

    def tmux(self, *args: str) -> str:
        return self.as_user("tmux", *args)

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", self.target)

    def type_line(self, text: str) -> None:
        self.tmux("send-keys", "-t", self.target, "-l", text)
        # Enter once the pane shows the words, as a human would: on a loaded machine an Enter
        # sent before Claude Code had read them was lost, the words left in its input box.
        with contextlib.suppress(TimeoutError):
            wait_until(lambda: text[-12:] in self.screen(), 10, "the typed words on the screen")
        time.sleep(0.3)
        self.tmux("send-keys", "-t", self.target, "Enter")

    def still_typed(self, text: str) -> bool:
        """Whether TEXT still sits in Claude Code's input box (the line between its last two
        rules): typed, not sent."""
        lines = self.screen().splitlines()
        rules = [i for i, line in enumerate(lines) if line.startswith("─" * 20)]
        if len(rules) < 2:
            return False
        box = " ".join(line.strip() for line in lines[rules[-2] + 1:rules[-1]])
        return text[-12:] in box

    def engine(self, *args: str) -> dict[str, Any]:
        """The engine's CLI in the daemon's container, as the household's admin runs it."""
        done = subprocess.run(["docker", "exec", self.container, "kael-thread-rebuild",
                               "--config", self.config, "--json", *args], capture_output=True,
                              text=True, timeout=60, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"kael-thread-rebuild {' '.join(args)}: {done.stderr.strip()}")
        data: dict[str, Any] = json.loads(done.stdout)
        return data

    # -- Claude Code as it runs --------------------------------------------------------------

    def live(self) -> dict[str, Any] | None:
        """The registry entry of the one running Claude Code of the user."""
        found = []
        for entry in (self.home / ".claude" / "sessions").glob("*.json"):
            try:
                data = json.loads(entry.read_bytes())
            except (OSError, ValueError):
                continue
            if isinstance(data, dict) and Path(f"/proc/{data.get('pid')}").exists():
                found.append(data)
        return found[0] if len(found) == 1 else None

    def session(self) -> str | None:
        entry = self.live()
        return None if entry is None else str(entry.get("sessionId"))

    def argv(self) -> list[str]:
        entry = wait_until(self.live, 60, "a running Claude Code")
        raw = Path(f"/proc/{entry['pid']}/cmdline").read_bytes()
        return [part.decode() for part in raw.split(b"\0")[:-1]]

    def transcript(self, session: str) -> bytes:
        for path in (self.home / ".claude" / "projects").glob(f"*/{session}.jsonl"):
            return path.read_bytes()
        return b""

    def wait_ready(self, session: str | None = None, timeout: float = 90) -> str:
        found = wait_until(lambda: self.session() if session in (None, self.session()) else None,
                           timeout, f"Claude Code to run session {session or '(any)'}")
        wait_until(lambda: "❯" in self.screen(), timeout, "Claude Code's prompt")
        return found

    def turn(self, prompt: str, answer: str, timeout: float = 120) -> None:
        """Type PROMPT; approve a tool the model asks for, as the human would; wait until the
        reply holding ANSWER is written and the Stop hooks ran."""
        session = self.wait_ready()
        before = self.transcript(session).count(STOP_SUMMARY)
        self.type_line(prompt)
        sent = time.monotonic()

        def done() -> bool:
            nonlocal sent
            self.approve()
            data = self.transcript(session)
            if prompt.encode() not in data and time.monotonic() - sent > 5 \
                    and self.target and self.still_typed(prompt):
                # The human sees the words still in the box and presses Enter again.
                self.tmux("send-keys", "-t", self.target, "Enter")
                sent = time.monotonic()
            return answer.encode() in data and data.count(STOP_SUMMARY) > before

        wait_until(done, timeout, f"the reply {answer!r} and the Stop hook")

    def approve(self) -> None:
        """Answer a question on the screen as the human who asked for the rebuild: stay in auto
        mode, and move the selection to "Yes" (auto mode preselects "No") before Enter."""
        screen = self.screen()
        if not any(question in screen for question in APPROVALS):
            return
        options = menu(screen, "Do you want to proceed?")
        names = [name for name, _ in options]
        if "Yes" in names:
            at = next((i for i, (_, selected) in enumerate(options) if selected), 0)
            steps = names.index("Yes") - at
            for _ in range(abs(steps)):
                self.tmux("send-keys", "-t", self.target, "Down" if steps > 0 else "Up")
        self.tmux("send-keys", "-t", self.target, "Enter")
        time.sleep(1)

    def restart_with_continue(self, start_command: str) -> None:
        """What the play's last message tells the household: restart with --continue."""
        old = wait_until(self.live, 60, "a running Claude Code")
        self.type_line("/exit")
        wait_until(lambda: not Path(f"/proc/{old['pid']}").exists(), 60,
                   "Claude Code to exit")
        program, _, rest = start_command.partition(" ")
        self.type_line(f"{program} --continue {rest}".strip())
        # The resumed session, not the one a starting Claude Code names before it resumes
        # (its MCP log is written under the resumed one).
        self.wait_mcp_connected(self.wait_ready(str(old["sessionId"])))

    def wait_mcp_connected(self, session: str) -> None:
        """Until the Claude Code running SESSION has taken in our MCP server's tools (its own
        MCP log says so): it connects in the background, and a prompt typed before that gets
        "No such tool available". A server that is only slow is waited for up to 90 s; the
        seconds waited go into the drill's figures (None: the log never said so)."""
        live = wait_until(self.live, 60, "a running Claude Code")
        place = _Place(self.home, Path(str(live["cwd"])))
        with contextlib.suppress(TimeoutError):  # the request turn then shows what went wrong
            self.mcp_wait_seconds = round(
                wait_mcp_tools_taken(place, s.SERVER, session, timeout=90), 1)

    def mcp_running(self) -> bool:
        done = subprocess.run(["docker", "ps", "-q", "--filter", "status=running", "--filter",
                               "label=io.kael-thread-rebuild.role=mcp", "--filter",
                               f"label=io.kael-thread-rebuild.instance={self.instance}"],
                              capture_output=True, text=True, timeout=30, check=False)
        return bool(done.stdout.strip())


def menu(screen: str, question: str) -> list[tuple[str, bool]]:
    """The options listed under QUESTION: (name without its number, whether selected)."""
    lines = screen.splitlines()
    start = next((i for i, line in enumerate(lines) if question in line), None)
    found: list[tuple[str, bool]] = []
    for line in lines[start + 1:] if start is not None else []:
        text = line.strip()
        if not text:
            if found:
                break
            continue
        selected = text.startswith("❯")
        name = re.sub(r"^\d+\.\s*", "", text.lstrip("❯").strip())
        found.append((name, selected))
    return found


def bodies() -> list[dict[str, Any]]:
    return [json.loads(line) for line in RECORD.read_text().splitlines() if line.strip()]


def request_with(prompt: str, since: int) -> dict[str, Any]:
    """The one request, of those after the first SINCE, whose last user message holds PROMPT
    (another user of the household may have typed the same words before)."""
    found = [b for b in bodies()[since:]
             if (users := [m for m in b.get("messages") or [] if m.get("role") == "user"])
             and prompt in json.dumps(users[-1]["content"], ensure_ascii=False)]
    if len(found) != 1:
        raise AssertionError(f"{len(found)} requests end with {prompt!r}")
    return found[0]


def settled(place: Household, operation: str | None = None) -> dict[str, Any]:
    seen: dict[str, Any] = {}

    def probe() -> dict[str, Any] | None:
        op = place.engine("status", *(["--operation", operation] if operation else []))
        found = op.get("operation")
        seen["last"] = found
        return found if found and found["status"] in SETTLED else None
    try:
        return wait_until(probe, 120, "the operation to settle")
    except TimeoutError as late:  # say how far it came: never recorded, or stuck in a status
        last = seen.get("last")
        where = (f"operation {last['operation_id']} is {last['status']}: "
                 f"{[step['to_status'] for step in last['history']]}" if last
                 else "no operation was recorded (did the model's tool call fail?); the "
                      f"last tool result the model was sent: {last_tool_result()}")
        raise TimeoutError(f"{late}; {where}") from None


def last_tool_result() -> str:
    """The last tool_result block the stand-in received (what Claude Code told the model a
    tool call gave), shortened."""
    for body in reversed(bodies()):
        for message in reversed(body.get("messages") or []):
            content = message.get("content")
            if not isinstance(content, list):
                continue
            results = [block for block in content
                       if isinstance(block, dict) and block.get("type") == "tool_result"]
            if results:
                return json.dumps(results[-1], ensure_ascii=False)[:2000]
    return "none"


def seconds_between(op: dict[str, Any], start: str, end: str) -> float | None:
    """From the transition into START to the transition into END."""
    at = {step["to_status"]: datetime.fromisoformat(step["at"]) for step in op["history"]}
    if start in at and end in at:
        return round((at[end] - at[start]).total_seconds(), 2)
    return None


def what_the_model_saw(place: Household, prompt: str,
                       answer: str) -> tuple[list[tuple[str, str]], list[str]]:
    """Type PROMPT; the conversation's texts and the non-text block types of its request."""
    since = len(bodies())
    place.turn(prompt, answer)
    body = request_with(prompt, since)
    return conversation_texts(body), sorted(non_text_block_types(body))


def drill(place: Household, start_command: str, result: dict[str, Any]) -> None:
    """Fills RESULT as it goes, so that a failure still shows how far the drill came."""
    place.restart_with_continue(start_command)
    result["mcp_wait_seconds"] = place.mcp_wait_seconds
    old = place.wait_ready()
    result["old_session"], result["old_argv"] = old, place.argv()

    place.turn(s.P_REBUILD, s.A_REBUILD_DONE)
    op = settled(place)
    result["rebuild"] = op
    result["downtime_seconds"] = seconds_between(op, "scheduled", "activated")
    if op["status"] != "activated":
        raise AssertionError(f"the rebuild ended {op['status']}: {op['error']}")
    new = place.wait_ready(op["new_session_id"])
    result["new_session"], result["new_argv"] = new, place.argv()

    result["after_texts"], result["after_non_text"] = what_the_model_saw(place, s.P_AFTER,
                                                                         s.A_AFTER)
    result["expected_texts"] = [*s.OLD_SPEECH, ("user", s.P_AFTER)]

    asked = place.engine("rollback", "--operation", op["operation_id"], "--confirm", "ROLLBACK")
    result["rollback_asked"] = asked.get("operation", {}).get("status")
    place.turn(s.P_BACK, s.A_BACK)
    result["rollback"] = settled(place, op["operation_id"])
    result["back_session"] = place.wait_ready(old)
    result["old_texts"], result["old_non_text"] = what_the_model_saw(place, s.P_OLD, s.A_OLD)
    result["expected_old_texts"] = [*s.OLD_SPEECH, ("user", s.P_OLD)]


def talk_before_install(place: Household) -> None:
    """The household's conversation before the install: a tool turn and a thinking turn."""
    place.wait_ready()
    place.turn(s.P_TOOLS, s.A_TOOLS_DONE)
    place.turn(s.P_THINK, s.A_THINK)


def arguments(description: str | None) -> argparse.ArgumentParser:
    """The arguments every drill takes (the Molecule playbooks pass them)."""
    parser = argparse.ArgumentParser(description=description,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--phase", choices=["prepare", "drill"], default="drill")
    parser.add_argument("--base", choices=["tmux", "systemd", "pointer"], default="tmux")
    parser.add_argument("--user", required=True)
    parser.add_argument("--instance", required=True)
    parser.add_argument("--target", default="", help="the tmux pane of the user's server")
    parser.add_argument("--start-command", required=True, help="what the user typed")
    parser.add_argument("--result", type=Path)
    return parser


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--container", default="")
    parser.add_argument("--config", default="")
    args = parser.parse_args()
    kind = Household
    if args.base == "systemd":
        from unit_drill import UnitHousehold as kind
    place = kind(args.user, args.target, args.instance,
                 args.container or f"kael-thread-rebuild-{args.instance}",
                 args.config or f"/etc/kael-thread-rebuild/{args.instance}.toml")
    if args.phase == "prepare":
        with shown_on_failure(place):
            talk_before_install(place)
        return
    if args.result is None:
        parser.error("the drill needs --result")
    run_and_report(lambda result: drill(place, args.start_command, result), place,
                   args.instance, args.result)


@contextlib.contextmanager
def shown_on_failure(place: Household) -> Iterator[None]:
    """A failure shows the pane as the human would see it (on stderr)."""
    try:
        yield
    except Exception:
        with contextlib.suppress(subprocess.CalledProcessError):
            print(f"the pane {place.target} at the failure:\n{place.screen()}", file=sys.stderr)
        raise


def run_and_report(work: Callable[[dict[str, Any]], None], place: Household, instance: str,
                   path: Path) -> None:
    """Run WORK, which fills the result as it goes; write the result as JSON to PATH (the
    verify reads it) and print the drill's figures; exit 1 when it failed."""
    started = time.monotonic()
    result: dict[str, Any] = {"instance": instance, "error": ""}
    try:
        work(result)
    except Exception as error:  # the verify shows what went wrong, with the screen
        result["error"] = f"{type(error).__name__}: {error}"
        try:
            result["screen"] = place.screen()
        except subprocess.CalledProcessError as gone:  # the pane, or its tmux server, is gone
            result["screen"] = f"(no screen: {gone.stderr.strip()})"
    result["seconds"] = round(time.monotonic() - started, 1)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    os.replace(tmp, path)
    figures = {k: result.get(k) for k in ("error", "downtime_seconds", "seconds",
                                           "mcp_wait_seconds")}
    # The last expected text is the message typed after the switch, not a carried one.
    figures["speech_items_carried"] = max(len(result.get("expected_texts", [])) - 1, 0)
    figures["runtime_blocks_sent"] = len(result.get("after_non_text", []))
    print(json.dumps(figures))
    if result["error"]:
        print(f"the pane at the failure:\n{result['screen']}", file=sys.stderr)
        raise SystemExit(1)

if __name__ == "__main__":
    main()
