"""The household's loopback stand-in for Anthropic's Messages API (Molecule only).

It serves the scripted conversations of the live drill and of the demo (demo_script.py) on
127.0.0.1:PORT and appends the body of every `POST /v1/messages` to a JSON-lines file: the
ground truth of what the model was shown, which the drill and the verify read back.
"""

from __future__ import annotations

import argparse
import json
import signal
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import advisor_script
import demo_script

from support.standin_api import Reply, StandinAPI, Text, Thinking, ToolUse, prompt_script

SERVER = "kael-thread-rebuild"
REQUEST_TOOL = f"mcp__{SERVER}__thread_rebuild_request"
BIG_OUTPUT_LINES = 40000

# Typed by the household before the install (prepare): the conversation that must be carried.
P_TOOLS = "household one: please count the lines of the big listing, 漢字 ok"
A_TOOLS = "I will run the listing first."
A_TOOLS_DONE = f"The listing has {BIG_OUTPUT_LINES} lines; the last one is {BIG_OUTPUT_LINES}."
P_THINK = "household two: think about kingfisher 7731 and answer in one word"
A_THINK = "Kingfisher 7731 noted. One word: blue."
# Typed by the drill (side effect), after the install.
P_REBUILD = "household three: yes, please rebuild the session now"
A_REBUILD = "Requesting the rebuild, as you agreed."
A_REBUILD_DONE = "The rebuild is recorded; it happens once this reply ends."
P_AFTER = "household four: what do you remember after the switch?"
A_AFTER = "Every word we said, and nothing else."
P_BACK = "household five: please go back to the old session"
A_BACK = "Going back once this reply ends."
P_OLD = "household six: and now we are in the old session again"
A_OLD = "Back in the old session, tools and all."

#: The old session's speech, in order, as the new session's model must see it.
OLD_SPEECH: list[tuple[str, str]] = [
    ("user", P_TOOLS), ("assistant", A_TOOLS), ("assistant", A_TOOLS_DONE),
    ("user", P_THINK), ("assistant", A_THINK),
    ("user", P_REBUILD), ("assistant", A_REBUILD), ("assistant", A_REBUILD_DONE),
]


def script() -> dict[str, list[Reply]]:
    return {
        P_TOOLS: [Reply([Text(A_TOOLS), ToolUse("Bash", {
                      "command": f"seq 1 {BIG_OUTPUT_LINES}", "description": "big listing"})]),
                  Reply([Text(A_TOOLS_DONE)])],
        P_THINK: [Reply([Thinking("private: the user wants one word"), Text(A_THINK)])],
        P_REBUILD: [Reply([Text(A_REBUILD), ToolUse(REQUEST_TOOL, {
                        "reason": "household drill: the human asked for a fresh start",
                        "confirmation": "REBUILD"})]),
                    Reply([Text(A_REBUILD_DONE)])],
        P_AFTER: [Reply([Text(A_AFTER)])],
        P_BACK: [Reply([Text(A_BACK)])],
        P_OLD: [Reply([Text(A_OLD)])],
        **demo_script.script(),
    }


class BodyLog:
    """Appends the JSON body of every POST to a path ending in SUFFIX to RECORD, one a line:
    what a stand-in was sent, which the drills and the verify read back."""

    def __init__(self, record: Path, suffix: str) -> None:
        self._file = record.open("a", encoding="utf-8")
        self._lock = threading.Lock()
        self._suffix = suffix

    def __call__(self, method: str, path: str, body: Any) -> None:
        if method == "POST" and path.split("?", 1)[0].endswith(self._suffix) \
                and isinstance(body, dict):
            with self._lock:
                self._file.write(json.dumps(body, ensure_ascii=False) + "\n")
                self._file.flush()


class RecordingAPI(StandinAPI):
    """The stand-in, appending each Messages API body to RECORD as it arrives."""

    def __init__(self, record: Path, port: int) -> None:
        super().__init__(advisor_script.responder(prompt_script(script())), port=port)
        self._log = BodyLog(record, "/v1/messages")

    def _record(self, method: str, path: str, body: Any) -> None:
        super()._record(method, path, body)
        self._log(method, path, body)


def serve(make: Callable[[Path, int], AbstractContextManager[Any]], port: int,
          description: str | None) -> None:
    """Run the stand-in MAKE(record, port) until SIGTERM (the household's service)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--port", type=int, default=port)
    parser.add_argument("--record", type=Path, required=True)
    args = parser.parse_args()
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    with make(args.record, args.port):
        done.wait()


if __name__ == "__main__":
    serve(RecordingAPI, 8765, __doc__)
