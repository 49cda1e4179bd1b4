"""Constants the Stop hook's fast path needs, kept free of heavy imports."""

from __future__ import annotations

DEFAULT_SPEECH_TOOLS = ("mcp__*companion*__reply", "mcp__*telegram*__reply")
# Tools whose finished answer, in their result, is words said in the conversation: the advisor's
# poll (docs/candidate-format.md, "Advisor answers").
DEFAULT_ANSWER_TOOLS = ("mcp__*advisor*__advisor_poll",)
# How such a result starts when the answer is finished (`kael_advisor.service`); a running,
# failed or interrupted consultation's result starts otherwise and stays runtime.
ANSWER_MARK = "\u2705 consultation #"
# The Stop hook's stdin is read up to this many bytes, for at most this long (it carries the
# last reply, so it can be long; a stdin that stays open must not hold Claude's Stop).
STOP_INPUT_MAX_BYTES = 8 << 20
STOP_INPUT_SECONDS = 5.0
# A rebuild request's reason: a sentence or two for the record (every Stop reads the records).
MAX_REASON_CHARS = 2000
