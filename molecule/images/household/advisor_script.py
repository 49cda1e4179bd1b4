"""What the household's Claude model does in the advisor drill (Molecule only): for the drill's
prompts it consults the advisor (`advisor_consult`, mode blueprint, which Claude Code asks the
human about), polls with the number it got until the answer is there, and ends the turn showing
the answer; a rebuild prompt asks for the switch as the main drill's does."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from support.standin_api import Reply, Text, ToolUse, tool_result_text

SERVER = "advisor-mcp"
CONSULT, POLL = f"mcp__{SERVER}__advisor_consult", f"mcp__{SERVER}__advisor_poll"
REQUEST_TOOL = "mcp__kael-thread-rebuild__thread_rebuild_request"
#: Typed by the advisor drill, after the main drill.
P_BLUEPRINT = "household seven: ask the advisor for a blueprint of a plan cache"
P_SWITCH = "household eight: yes, rebuild the session now, advisor and all"
A_SWITCH = "Requesting the rebuild with the advisor's session in it."
A_SWITCH_DONE = "The rebuild is recorded; the advisor stays with us."
P_AGAIN = "household nine: ask the advisor what it told us before the switch"
#: The first words of the turn's last reply, the advisor's answer after them.
A_SHOWN = "The advisor answered:"
_NUMBER = re.compile(r"#(t\d+)")
Responder = Callable[[dict[str, Any]], Any]


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content or [] if isinstance(b, dict)]


def _since(body: dict[str, Any], prompts: tuple[str, ...]) -> tuple[str, list[str]] | None:
    """The drill's prompt of the newest user message holding one, and the tool results since."""
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    for index in range(len(messages) - 1, -1, -1):
        texts = [b.get("text", "") for b in _blocks(messages[index].get("content"))
                 if b.get("type") == "text"] if messages[index].get("role") == "user" else []
        found = next((p for p in prompts for t in texts if p in t), None)
        if found is not None:
            return found, [tool_result_text(b) for m in messages[index + 1:]
                           for b in _blocks(m.get("content")) if b.get("type") == "tool_result"]
    return None


def responder(otherwise: Responder) -> Responder:
    """The drill's model for its prompts, OTHERWISE for every other request."""

    def respond(body: dict[str, Any]) -> Any:
        found = _since(body, (P_BLUEPRINT, P_AGAIN, P_SWITCH))
        if found is None:
            return otherwise(body)
        prompt, results = found
        if prompt == P_SWITCH:
            return Reply([Text(A_SWITCH), ToolUse(REQUEST_TOOL, {
                "reason": "advisor drill: the human asked for a fresh start",
                "confirmation": "REBUILD"})]) if not results else Reply([Text(A_SWITCH_DONE)])
        if not results:
            return Reply([ToolUse(CONSULT, {"message": prompt, "mode": "blueprint"})])
        last = results[-1]
        if last.startswith("⏳"):
            number = _NUMBER.search(last)
            if number is None:
                return Reply([Text(f"{A_SHOWN} (no consultation number in: {last})")])
            return Reply([ToolUse(POLL, {"task": number[1]})], delay=1.0)
        return Reply([Text(f"{A_SHOWN}\n{last}")])

    return respond
