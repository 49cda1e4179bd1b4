"""The live drill of the pointer base inside a household (Molecule side effect).

The household runs the package's reference runner (`pointer_runner.sh`, a `claude -p` loop) as
its Claude user in a pane of that user's own tmux server; each line typed into the pane is one
prompt. Run as root; every prompt is typed as the user. The model calls the request tool with
REBUILD (allowed by the runner's `--allowedTools`), the runner hands that call's Stop to the
daemon through the wrapper (`KAEL_RUN`), waits, and the daemon writes the new session id into
the pointer. The next prompt must reach the stand-in with the old conversation verbatim and no
runtime block; then a rollback takes the pointer back to the old session at the next Stop.
What was seen is written as JSON for the verify, like drill.py's.

    pointer_drill.py --phase prepare --user alice --instance companion \
        --target runner-DO-NOT-CREATE:0.0 --start-command 'bash ~/pointer_runner.sh /srv/p …'
    pointer_drill.py --user alice --instance companion --target runner-DO-NOT-CREATE:0.0 \
        --start-command 'bash ~/pointer_runner.sh /srv/p …' --result /var/lib/kael-molecule/d.json
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import standin as s

from drill import (
    Household,
    arguments,
    bodies,
    request_with,
    run_and_report,
    seconds_between,
    settled,
    shown_on_failure,
    wait_until,
)
from support.fidelity import conversation_texts, non_text_block_types

#: In the argv of every `claude -p` call of the runner (its own Stop hook's settings), and in
#: nothing else the user runs.
CALL_MARK = b"KAEL_RUNNER_STOP_FILE"
RUNNER = b"pointer_runner.sh"


def processes(mark: bytes) -> dict[int, list[str]]:
    """The argv of every process whose command line holds MARK."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            raw = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if mark in raw:
            found[int(entry.name)] = [part.decode() for part in raw.split(b"\0")[:-1]]
    return found


def parent_of(pid: int) -> int | None:
    """PID's parent (None once PID is gone). The command name in /proc/PID/stat may hold
    blanks and parentheses: the fields after it follow its last ')'."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat[stat.rindex(")") + 2:].split()[1])


def runner_pid(mark: bytes) -> int:
    """The pid of the one runner: the bash whose command line holds MARK. Between fork and
    exec, a child it starts (sudo, claude, a command substitution) has the runner's very
    command line; the runner is the one whose parent is not such a bash too."""
    found = {pid for pid, argv in processes(mark).items()
             if argv and Path(argv[0]).name == "bash"}
    parents = {pid: parent_of(pid) for pid in found}
    runners = [pid for pid, parent in parents.items()
               if parent is not None and parent not in found]
    if len(runners) != 1:
        raise AssertionError(f"{len(runners)} pointer runners run: {runners}")
    return runners[0]


@dataclass
class Runner(Household):
    """The household with its runner: the pane takes prompts, the pointer names the session."""

    pointer: Path = Path()

    def session(self) -> str | None:
        try:
            text = self.pointer.read_text().strip()
        except OSError:
            return None
        return text or None

    def idle(self) -> bool:
        """The runner waits at `read` for the next prompt: no child of it runs."""
        pid = runner_pid(RUNNER)
        children = "".join(p.read_text() for p in Path(f"/proc/{pid}/task").glob("*/children"))
        return not children.strip()

    def call(self, prompt: str, answer: str, timeout: float = 180) -> list[str]:
        """Type PROMPT; wait until the reply holding ANSWER is in the transcript of the session
        the runner resumed and the runner is idle again (its hook-stop and wait done). The
        argv of that `claude -p` call."""
        wait_until(self.idle, 60, "the runner to wait for a prompt")
        seen: list[list[str]] = []
        self.type_line(prompt)

        def done() -> bool:
            seen.extend(argv for argv in processes(CALL_MARK).values()
                        if prompt in argv and argv not in seen)
            session = self.session()
            return bool(seen) and session is not None and \
                answer.encode() in self.transcript(self.called_session(seen[0])) and self.idle()

        wait_until(done, timeout, f"the reply {answer!r} and the runner's wait")
        return seen[0]

    @staticmethod
    def called_session(argv: list[str]) -> str:
        for flag in ("--resume", "--session-id"):
            if flag in argv:
                return argv[argv.index(flag) + 1]
        raise AssertionError(f"no session in the call {argv}")


def pointer_of(start_command: str) -> Path:
    """The pointer file the typed runner command line names (the runner's first argument)."""
    words = shlex.split(start_command)
    at = next(i for i, word in enumerate(words) if word.endswith("/" + RUNNER.decode()))
    return Path(words[at + 1])


def what_the_model_saw(place: Runner, prompt: str,
                       answer: str) -> tuple[list[tuple[str, str]], list[str], list[str]]:
    """Type PROMPT; the conversation's texts and non-text block types of its request, and the
    argv of the call."""
    since = len(bodies())
    argv = place.call(prompt, answer)
    body = request_with(prompt, since)
    return conversation_texts(body), sorted(non_text_block_types(body)), argv


def drill(place: Runner, result: dict[str, Any]) -> None:
    """Fills RESULT as it goes, so that a failure still shows how far the drill came."""
    old = place.session()
    result["old_session"] = old
    result["old_argv"] = place.call(s.P_REBUILD, s.A_REBUILD_DONE)
    op = settled(place)
    result["rebuild"] = op
    result["downtime_seconds"] = seconds_between(op, "scheduled", "activated")
    if op["status"] != "activated":
        raise AssertionError(f"the rebuild ended {op['status']}: {op['error']}")
    result["new_session"] = place.session()

    result["after_texts"], result["after_non_text"], result["new_argv"] = what_the_model_saw(
        place, s.P_AFTER, s.A_AFTER)
    result["expected_texts"] = [*s.OLD_SPEECH, ("user", s.P_AFTER)]

    asked = place.engine("rollback", "--operation", op["operation_id"], "--confirm", "ROLLBACK")
    result["rollback_asked"] = asked.get("operation", {}).get("status")
    place.call(s.P_BACK, s.A_BACK)
    result["rollback"] = settled(place, op["operation_id"])
    result["back_session"] = place.session()
    result["old_texts"], result["old_non_text"], _ = what_the_model_saw(place, s.P_OLD, s.A_OLD)
    result["expected_old_texts"] = [*s.OLD_SPEECH, ("user", s.P_OLD)]


def main() -> None:
    parser = arguments(__doc__)  # --start-command: the runner's command line, naming the pointer
    args = parser.parse_args()
    place = Runner(args.user, args.target, args.instance, f"kael-thread-rebuild-{args.instance}",
                   f"/etc/kael-thread-rebuild/{args.instance}.toml",
                   pointer_of(args.start_command))
    if args.phase == "prepare":  # the conversation to carry: a tool turn and a thinking turn
        with shown_on_failure(place):
            place.call(s.P_TOOLS, s.A_TOOLS_DONE)
            place.call(s.P_THINK, s.A_THINK)
        return
    if args.result is None:
        parser.error("the drill needs --result")
    run_and_report(lambda result: drill(place, result), place, args.instance, args.result)

if __name__ == "__main__":
    main()
