"""The demo's report, from what the household recorded: the live switch's result (demo_drill.py),
the operation record it holds, and the stand-in's log of what the model was shown."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

from kael_thread_rebuild.config import Config
from kael_thread_rebuild.conversation.tokens import estimate_tokens

from ..fidelity import conversation_texts, non_text_blocks, request_texts
from .household import STATE_DIR

DIVISOR = float(Config.model_fields["token_divisor"].default)
SHOWN = 72


class Request(BaseModel):
    """One Messages API request as the stand-in received it: the size of its messages, the
    words in them, the reminders Claude Code injected, the blocks that are not text."""

    bytes: int
    tokens: int
    words: int
    reminders: int
    runtime_blocks: int

    @classmethod
    def of(cls, body: dict[str, Any]) -> Request:
        text = json.dumps(body.get("messages") or [], ensure_ascii=False)
        texts = request_texts(body)
        return cls(bytes=len(text.encode()), tokens=estimate_tokens(text, DIVISOR),
                   words=sum(len(t.text.encode()) for t in texts if not t.injected),
                   reminders=sum(len(t.text.encode()) for t in texts if t.injected),
                   runtime_blocks=len(non_text_blocks(body)))

    def line(self) -> str:
        return (f"{self.bytes:,} bytes, ~{self.tokens:,} tokens: words {self.words:,} B, "
                f"Claude Code's reminders {self.reminders:,} B, "
                f"{self.runtime_blocks} runtime blocks")


class Report(BaseModel):
    operation_id: str
    status: str
    old_session: str
    new_session: str
    source_turns: int
    carried_turns: int
    source_speech_items: int
    carried_speech_items: int
    speech_as_source: bool
    transcript_bytes: int
    candidate_bytes: int | None
    before: Request
    after: Request
    dropped: dict[str, int]
    downtime_seconds: float | None
    first_words: list[tuple[str, str]]
    evidence: dict[str, str]

    @classmethod
    def of(cls, result: dict[str, Any]) -> Report:
        op: dict[str, Any] = result["rebuild"]
        counts: dict[str, int] = op.get("manifest_summary") or {}
        dirty: dict[str, Any] = op.get("dirty_at_prepare") or {}
        texts = [tuple(item) for item in result["after_texts"]]
        return cls(
            operation_id=op["operation_id"], status=op["status"],
            old_session=result["old_session"], new_session=result["new_session"],
            source_turns=counts.get("source_turns", 0),
            carried_turns=counts.get("selected_turns", 0),
            source_speech_items=counts.get("source_speech_items", 0),
            carried_speech_items=counts.get("carried_speech_items", 0),
            speech_as_source=texts == [tuple(item) for item in result["expected_texts"]],
            transcript_bytes=op.get("source_size") or 0,
            candidate_bytes=result.get("candidate_bytes"),
            before=Request.of(result["before_request"]),
            after=Request.of(result["after_request"]),
            dropped={k: v for k, v in (dirty.get("categories") or {}).items() if v},
            downtime_seconds=result.get("downtime_seconds"),
            first_words=conversation_texts(result["after_request"]),
            evidence={
                "operation record": f"{STATE_DIR}/operations/{op['operation_id']}.json",
                "backup of the old transcript": op.get("backup_path") or "-",
                "candidate (the new session)": op.get("candidate_path") or "-",
                "manifest": op.get("manifest_path") or "-",
            })

    def lines(self) -> list[str]:
        b, a = self.before, self.after
        out = [
            f"operation {self.operation_id}: {self.status}",
            f"session {self.old_session} -> {self.new_session}",
            f"turns carried           {self.carried_turns} of {self.source_turns}",
            f"speech items carried    {self.carried_speech_items} of {self.source_speech_items}"
            f" (the new session's model was shown them verbatim: "
            f"{'yes' if self.speech_as_source else 'NO'})",
            f"transcript              {self.transcript_bytes:,} bytes -> "
            + (f"{self.candidate_bytes:,} bytes" if self.candidate_bytes is not None else "?"),
            f"model's request before  {b.line()}",
            f"model's request after   {a.line()}",
            "                        (the old session's last request and the new one's first, "
            "as the stand-in got them)",
            "dropped by category     "
            + (", ".join(f"{k} {v:,} B" for k, v in sorted(self.dropped.items())) or "-"),
            "switch downtime         " + (f"{self.downtime_seconds:.2f} s (Stop hook -> new "
                                           "session running)" if self.downtime_seconds
                                           is not None else "?"),
            "the first words the new session received (from the stand-in's log):",
        ]
        words = self.first_words
        shown = [*words[:4], None, *words[-2:]] if len(words) > 7 else words
        for item in shown:
            if item is None:
                out.append(f"  … ({len(words) - 6} more)")
                continue
            role, text = item
            flat = text.replace("\n", " ")
            out.append(f"  {role:9} {flat[:SHOWN]}{'…' if len(flat) > SHOWN else ''}")
        out.append("evidence, inside the household (kept with --keep):")
        out += [f"  {what:29} {where}" for what, where in self.evidence.items()]
        return out
