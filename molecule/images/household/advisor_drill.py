"""The advisor drill inside household-a (Molecule side effect, after the main drill).

Run as root; every key is typed as the Claude user into that user's own tmux server. The human
asks for a blueprint: the model calls `advisor_consult` (Claude Code asks, the human says yes),
polls until the answer is there and shows it. Then the human asks for a rebuild and the daemon
switches the pane to the new session; a consultation there must reach the same Kimi session:
the provider stand-in's log shows the same `prompt_cache_key` and the first answer in the
history it was sent. What was seen is written as JSON; the drill fails when a step does.

    advisor_drill.py --user alice --instance companion --target companion-DO-NOT-CREATE:0.0 \
        --start-command 'claude --model sonnet' --result /var/lib/kael-molecule/advisor.json
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import advisor_script as a

import drill as d

KIMI_RECORD = Path("/var/lib/kael-advisor-standin/requests.jsonl")


def kimi_bodies() -> list[dict[str, Any]]:
    if not KIMI_RECORD.exists():
        return []
    return [json.loads(line) for line in KIMI_RECORD.read_text().splitlines() if line.strip()]


def _assistant_history(body: dict[str, Any]) -> list[str]:
    return [str(m.get("content")) for m in body.get("messages") or []
            if m.get("role") == "assistant"]


def consult(place: d.Household, prompt: str) -> tuple[dict[str, Any], str]:
    """Type PROMPT (the model consults, the human approves, it polls and shows the answer): the
    provider's last request and what the model was shown last."""
    since = len(kimi_bodies())
    place.turn(prompt, a.A_SHOWN, timeout=300)
    sent = d.wait_until(lambda: kimi_bodies()[since:] or None, 60, "the advisor's request")
    return sent[-1], d.last_tool_result()


def switch(place: d.Household) -> dict[str, Any]:
    """Ask for a rebuild; the operation it made, once settled."""
    before = (place.engine("status").get("operation") or {}).get("operation_id")
    place.turn(a.P_SWITCH, a.A_SWITCH_DONE)

    def probe() -> dict[str, Any] | None:
        found = place.engine("status").get("operation")
        return found if found and found["operation_id"] != before \
            and found["status"] in d.SETTLED else None
    return d.wait_until(probe, 180, "the advisor drill's rebuild to settle")


def advisor_drill(place: d.Household, result: dict[str, Any]) -> None:
    result["session_a"] = place.wait_ready()
    first, shown = consult(place, a.P_BLUEPRINT)
    result["kimi_session_a"] = first.get("prompt_cache_key")
    result["answer_a"] = shown
    if "consultation" not in shown:
        raise AssertionError(f"the model was not shown the advisor's answer: {shown}")

    op = switch(place)
    result["rebuild"] = {k: op.get(k) for k in ("operation_id", "status", "new_session_id")}
    if op["status"] != "activated":
        raise AssertionError(f"the rebuild ended {op['status']}: {op.get('error')}")
    result["session_b"] = place.wait_ready(op["new_session_id"])

    second, shown_b = consult(place, a.P_AGAIN)
    result["kimi_session_b"] = second.get("prompt_cache_key")
    result["answer_b"] = shown_b
    result["history_b"] = _assistant_history(second)
    if result["kimi_session_b"] != result["kimi_session_a"]:
        raise AssertionError(f"the consultation in {result['session_b']} reached Kimi session "
                             f"{result['kimi_session_b']}, not {result['kimi_session_a']}")
    if not result["history_b"]:
        raise AssertionError("the advisor was sent no history of the first consultation")


def main() -> None:
    args = d.arguments(__doc__).parse_args()
    if args.result is None:
        raise SystemExit("the advisor drill needs --result")
    place = d.Household(args.user, args.target, args.instance,
                        f"kael-thread-rebuild-{args.instance}",
                        f"/etc/kael-thread-rebuild/{args.instance}.toml")
    d.run_and_report(lambda result: advisor_drill(place, result), place, args.instance,
                     args.result)


if __name__ == "__main__":
    main()
