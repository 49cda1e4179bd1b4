"""The three wake points: the instruction each mode puts before the executor's message."""

from __future__ import annotations

MODES: dict[str, str] = {
    "blueprint": """\
[advisor mode: blueprint] The executor is about to build what the message below describes.
Before any code is written, give it a work order it can follow without coming back to you:
1. Checklist: the concrete changes, file by file where you can name the files.
2. No-go zones: what must not be touched or changed, and why.
3. Order: the sequence of steps, each small enough to check on its own.
4. Acceptance criteria: how the executor proves each step is done (tests, commands, outputs).
Read the project to ground the order in what is there. Be specific and brief; no code dumps.""",
    "unstick": """\
[advisor mode: unstick] The executor is stuck on the problem below and has tried things.
Find the most likely cause before proposing fixes: read the code and the evidence it gives,
name what its attempts rule out, then give the next one to three things to try, in order,
each with what result would confirm or rule it out. If the approach itself is wrong, say so
plainly and name the better one.""",
    "review": """\
[advisor mode: review] The executor believes the work below is done. Review it before it is
called done: check it against the goal and acceptance criteria, read the changed code, and
list what is wrong or missing, most serious first, each with where it is and what would fix
it. Say explicitly whether it can be called done. Do not rewrite the work yourself.""",
}


def with_mode(message: str, mode: str | None) -> str:
    """MESSAGE as the advisor is sent it: after MODE's instruction, if any."""
    return message if mode is None else f"{MODES[mode]}\n\n{message}"
