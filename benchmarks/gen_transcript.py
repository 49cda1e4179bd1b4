#!/usr/bin/env python3
"""Write a realistic Claude Code 2.1.328 session transcript (JSONL) of a target size.

The output imitates a long `-p` / stream-json session (``entrypoint: "sdk-cli"``) as Claude Code
2.1.328 writes it, record shapes and linking included:

- every prompt is preceded by ``queue-operation`` enqueue/dequeue records;
- the first turn carries the start-up attachments (environment, model, deferred_tools_delta,
  agent_listing_delta, skill_listing, session_context, date, remote_session_change,
  prompt_snapshot), ``atis-latch``, ``api-request-shape`` and ``api-request-blob`` records;
- every API call writes an ``api-request`` record; its answer is one ``assistant`` record per
  content block (thinking, text, tool_use), all sharing ``message.id`` and ``requestRef``,
  with ``apiBlockIndex`` 0, 1, 2, ...;
- every tool call gets one ``user`` tool_result record whose ``parentUuid`` is the record of its
  own tool_use (parallel calls make the graph a tree); results are written in completion order
  and the chain continues under the one written last;
- after each turn: ``prompt_snapshot`` attachment, ``last-prompt``, ``system``
  ``stop_hook_summary`` and ``cost-state``;
- occasional pasted images (base64, with the ``isMeta`` companion record) and image reads.

Every record with a timestamp gets a strictly later one than the record before it. The chain
(``uuid`` / ``parentUuid``) follows 2.1.328: the first user record has ``parentUuid: null``, the
first assistant hangs under the last start-up attachment, each record otherwise under the last
chained record written. Tool-result sizes follow a truncated Pareto law (many small outputs, a
few huge ones) capped at 10 MB per line; one result at the cap is always written once the file
is big enough. Output is deterministic for a given ``--seed`` and size, and generation streams:
memory stays bounded by the largest single line.

Usage: gen_transcript.py --size-mb 200 [--seed 0] OUT.jsonl
       gen_transcript.py --messages 1000000 OUT.jsonl   (a chat of short messages)
       gen_transcript.py --line-mb 500 OUT.jsonl        (one 500 MiB command output line)
"""

from __future__ import annotations

import argparse
import base64
import io
import os
import random
import sys
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import orjson

VERSION = "2.1.328"
MODEL = "claude-opus-5-5"
MIB = 1024 * 1024
MAX_LINE_BYTES = 10_000_000  # "a single line can be 10 MB" (spec §3): stay at or below it
READ_MAX_LINE_BYTES = 600_000
SNAPSHOT_POLICIES = ("every-turn", "first-turn")

_B62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_DUMPS_OPT = orjson.OPT_APPEND_NEWLINE
_ASSISTANT_AFTER = {"effort": "medium", "perTurnEffort": "medium", "madeBy": "model"}

_WORDS_TEXT = (
    "the a an of to in for on with by from as at into over under after before about against "
    "between through during without within across behind beyond plus per via "
    "session transcript record parser buffer stream chunk line file path folder project config "
    "engine plan rebuild switch rollback manifest digest checksum verify candidate snapshot "
    "budget token limit queue worker hook signal process thread socket pane unit service "
    "timeout retry backoff cache index offset length header footer payload schema field value "
    "error warning notice failure success state transition lock lease owner version release "
    "branch commit merge diff patch test fixture assertion coverage benchmark profile memory "
    "latency throughput allocation pointer handle descriptor module package import export "
    "function method class object instance attribute property decorator generator iterator "
    "really quickly carefully probably exactly roughly already still again instead maybe "
    "fix add remove rename check read write parse emit load store skip keep drop carry count "
    "measure compare start stop resume restart wait poll scan walk build run deploy ship "
    "small large empty full stale fresh safe unsafe broken clean dirty slow fast new old "
    "first last next previous whole partial single double final open closed ready pending"
)
_WORDS = _WORDS_TEXT.split()

_CJK = (
    "我们先看一下这个问题",
    "这个会话已经运行了很久",
    "请帮我检查一下日志",
    "结果看起来不太对",
    "明天再继续吧",
    "这里的内存占用太高了",
    "能不能把它拆成两个步骤",
    "谢谢，已经好了",
    "我觉得应该先写测试",
    "为什么重建之后丢了一句话",
    "上下文里全是工具输出",
    "请保持原文不变",
    "这部分逻辑需要再确认",
    "先别动生产环境",
    "好的，按你的方案来",
    "今天的进度怎么样",
    "把配置文件发给我看看",
    "这个报错是什么意思",
    "我们需要一个回滚方案",
    "速度比预期慢了三倍",
)

_PATH_PARTS = (
    "src",
    "lib",
    "core",
    "engine",
    "transcript",
    "reader",
    "writer",
    "config",
    "tests",
    "utils",
    "io",
    "plan",
    "store",
    "hooks",
    "daemon",
    "cli",
    "server",
    "client",
    "models",
)


def _now_iso(ms: int) -> str:
    seconds, milli = divmod(ms, 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{milli:03d}Z"


@dataclass
class Stats:
    """What was written: returned by `generate` and printed as JSON by the command."""

    path: str = ""
    seed: int = 0
    target_bytes: int = 0
    bytes: int = 0
    lines: int = 0
    turns: int = 0
    api_calls: int = 0
    tool_calls: int = 0
    parallel_batches: int = 0
    images: int = 0
    max_line_bytes: int = 0
    lines_over_1mib: int = 0
    tool_result_bytes: int = 0
    record_types: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        out["record_types"] = dict(sorted(self.record_types.items()))
        return out


@dataclass
class _Call:
    """One tool call of an assistant message, with the record that carries it."""

    tool_id: str
    name: str
    record_uuid: str
    kind: str


class TranscriptWriter:
    """Streams one session to `out`; all randomness comes from one seeded generator."""

    def __init__(
        self, out: BinaryIO, target_bytes: int, seed: int, snapshot_policy: str = "first-turn"
    ) -> None:
        self.out = out
        self.target = target_bytes
        self.rng = random.Random(seed)
        self.snapshot_policy = snapshot_policy
        self.stats = Stats(seed=seed, target_bytes=target_bytes)
        self.session_id = self.uuid4()
        self.cwd = "/home/user/projects/" + self.rng.choice(("atlas", "harbor", "lumen", "quarry"))
        self.enc_cwd = "".join(c if c.isalnum() else "-" for c in self.cwd)
        self.clock_ms = 1_793_520_000_000  # 2026-11-01T08:00:00Z
        self.last_day = ""
        self.tip: str | None = None  # uuid of the last chained record
        self.env = {
            "userType": "external",
            "entrypoint": "sdk-cli",
            "cwd": self.cwd,
            "sessionId": self.session_id,
            "version": VERSION,
            "gitBranch": "main",
        }
        self.prompt_id = ""
        self.prompt_text = ""
        self.turn = 0
        self.last_request_id: str | None = None
        self.request_count = 0
        self.image_count = 0
        self.big_done = False
        self.cost = {"usd": 0.0, "api_ms": 0, "tool_ms": 0, "in": 0, "out": 0, "cache": 0}
        self.start_ms = self.clock_ms
        self.pending_tail: list[str] = []  # blob hashes for the next api-request
        self.shape_hash = ""
        self.pool = self._build_pool(6 * MIB)
        # JSON bytes per pool character (escapes, UTF-8): sizes tool outputs to a line target
        sample = self.pool[: 256 * 1024]
        self.pool_ratio = (len(orjson.dumps(sample)) - 2) / len(sample)

    # ---- primitives -------------------------------------------------------------------------

    def uuid4(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def hex(self, n: int) -> str:
        return f"{self.rng.getrandbits(4 * n):0{n}x}"

    def b62(self, n: int) -> str:
        return "".join(self.rng.choices(_B62, k=n))

    def tick(self, lo: int = 1, hi: int = 40) -> str:
        """Advance the clock (strictly) and return the ISO timestamp."""
        self.clock_ms += self.rng.randint(max(lo, 1), max(hi, lo, 1))
        return _now_iso(self.clock_ms)

    def emit(self, record: dict[str, Any]) -> int:
        """Write one record as one line; return its size in bytes."""
        return self.write_line(orjson.dumps(record, option=_DUMPS_OPT), str(record.get("type")))

    def write_line(self, data: bytes, record_type: str) -> int:
        self.out.write(data)
        size = len(data)
        st = self.stats
        st.bytes += size
        st.lines += 1
        st.record_types[record_type] += 1
        if size > st.max_line_bytes:
            st.max_line_bytes = size
        if size > MIB:
            st.lines_over_1mib += 1
        return size

    def chained(
        self,
        fields: dict[str, Any],
        after: dict[str, Any] | None = None,
        tick: tuple[int, int] = (1, 40),
    ) -> str:
        """Emit a uuid-carrying record under the current tip; it becomes the tip.

        Field order follows 2.1.328: parentUuid, isSidechain, FIELDS, uuid, timestamp, AFTER,
        then the envelope (userType, entrypoint, cwd, sessionId, version, gitBranch).
        """
        record_uuid = self.uuid4()
        record: dict[str, Any] = {"parentUuid": self.tip, "isSidechain": False}
        record.update(fields)
        record["uuid"] = record_uuid
        record["timestamp"] = self.tick(*tick)
        if after:
            record.update(after)
        record.update(self.env)
        self.emit(record)
        self.tip = record_uuid
        return record_uuid

    # ---- text -------------------------------------------------------------------------------

    def words(self, n: int) -> str:
        return " ".join(self.rng.choices(_WORDS, k=n))

    def sentence(self) -> str:
        text = self.words(self.rng.randint(4, 18))
        return text[0].upper() + text[1:] + self.rng.choice((".", ".", ".", "?", "!", ":"))

    def cjk_sentence(self) -> str:
        parts = self.rng.choices(_CJK, k=self.rng.randint(1, 3))
        text = "，".join(parts)
        if self.rng.random() < 0.4:
            text += " `" + self.rng.choice(_WORDS) + "_" + self.rng.choice(_WORDS) + "`"
        return text + self.rng.choice(("。", "？", "！", "。"))

    def path(self) -> str:
        depth = self.rng.randint(1, 4)
        parts = self.rng.choices(_PATH_PARTS, k=depth)
        name = self.rng.choice(_WORDS) + self.rng.choice((".py", ".py", ".md", ".toml", ".json"))
        return self.cwd + "/" + "/".join(parts) + "/" + name

    def user_prompt(self) -> str:
        r = self.rng.random()
        cjk = self.rng.random() < 0.18
        one = self.cjk_sentence if cjk else self.sentence
        if r < 0.55:
            return " ".join(one() for _ in range(self.rng.randint(1, 3)))
        if r < 0.85:
            paras = [
                " ".join(one() for _ in range(self.rng.randint(1, 4)))
                for _ in range(self.rng.randint(2, 4))
            ]
            if self.rng.random() < 0.3:
                paras.append("\n".join("- " + one() for _ in range(self.rng.randint(2, 5))))
            return "\n\n".join(paras)
        if r < 0.97:
            code = self.pool_slice(self.rng.randint(200, 2500))
            return one() + "\n\n```\n" + code + "\n```\n\n" + one()
        # a long paste (a log, a document)
        return one() + "\n\n" + self.pool_slice(self.rng.randint(5_000, 40_000))

    def assistant_text(self, final: bool) -> str:
        if not final:
            return (
                self.sentence()
                if self.rng.random() < 0.7
                else self.sentence() + " " + (self.sentence())
            )
        paras: list[str] = []
        cjk = self.rng.random() < 0.12
        for _ in range(self.rng.randint(1, 7)):
            r = self.rng.random()
            if r < 0.6:
                line = self.cjk_sentence if cjk else self.sentence
                paras.append(" ".join(line() for _ in range(self.rng.randint(1, 5))))
            elif r < 0.8:
                items = [f"- {self.sentence()}" for _ in range(self.rng.randint(2, 6))]
                paras.append("\n".join(items))
            elif r < 0.9:
                paras.append("## " + self.words(self.rng.randint(2, 5)).title())
            else:
                lang = self.rng.choice(("python", "bash", "toml", ""))
                code = self.pool_slice(self.rng.randint(100, 1500))
                paras.append(f"```{lang}\n{code}\n```")
        return "\n\n".join(paras)

    def _build_pool(self, size: int) -> str:
        """A block of source-, log- and data-like lines that tool outputs are cut from."""
        rng = self.rng
        buf = io.StringIO()
        total = 0
        indent = ("", "    ", "        ", "\t", "            ")
        while total < size:
            k = rng.random()
            w = rng.choices(_WORDS, k=6)
            if k < 0.35:
                pad = rng.choice(indent)
                n = rng.randint(0, 1 << 16)
                line = pad + rng.choice(
                    (
                        f"def {w[0]}_{w[1]}(self, {w[2]}: str) -> {w[3].title()}:",
                        f"{w[0]} = {w[1]}.{w[2]}({w[3]!r}, {n})",
                        f'raise ValueError(f"{w[0]} {w[1]}: {{{w[2]}!r}}")',
                        f"if {w[0]} is None or {w[1]} > {n}:",
                        f'return {{"{w[0]}": {w[1]}, "{w[2]}": [{w[3]}]}}',
                        f"# {w[0]} {w[1]} {w[2]} {w[3]} {w[4]} {w[5]}",
                        f'pattern = re.compile(r"^\\s*{w[0]}\\d+\\.(\\w+)$")',
                    )
                )
            elif k < 0.65:
                stamp = _now_iso(1_790_000_000_000 + rng.randint(0, 10**10))
                level = rng.choice(("INFO", "INFO", "DEBUG", "WARN", "ERROR"))
                tail = " ".join(w[2:])
                line = f"{stamp} {level} [{w[0]}.{w[1]}] {tail} id={rng.getrandbits(32):08x}"
            elif k < 0.8:
                line = orjson.dumps(
                    {
                        "id": rng.randint(1, 10**6),
                        w[0]: w[1],
                        "path": f"C:\\data\\{w[2]}",
                        "ok": rng.random() < 0.5,
                        "note": f'{w[3]} "{w[4]}"',
                    }
                ).decode()
            elif k < 0.88:
                line = rng.choice(_CJK) + "：" + " ".join(w[:3]) + " — " + rng.choice(_CJK)
            elif k < 0.95:
                where = f"{w[0]}/{w[1]}/{w[2]}.py:{rng.randint(1, 4000)}"
                line = f"{where}:{rng.choice(indent)}{w[3]}({w[4]})"
            else:
                line = ""
            buf.write(line)
            buf.write("\n")
            total += len(line) + 1
        return buf.getvalue()[:-1]

    def pool_slice(self, n: int) -> str:
        """About `n` characters of pool text starting at a line boundary."""
        pool = self.pool
        if n >= len(pool):
            reps, rest = divmod(n, len(pool))
            return pool * reps + pool[:rest]
        start = self.rng.randrange(0, len(pool) - n)
        nl = pool.find("\n", start, start + 200)
        if nl != -1 and nl + 1 + n <= len(pool):
            start = nl + 1
        return pool[start : start + n]

    def png_b64(self, raw_bytes: int) -> str:
        header = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"
        body = self.rng.randbytes(max(raw_bytes - len(header), 16))
        return base64.b64encode(header + body).decode()

    # ---- bookkeeping records ----------------------------------------------------------------

    def queue_ops(self, text: str) -> None:
        sid = self.session_id
        self.emit(
            {
                "type": "queue-operation",
                "operation": "enqueue",
                "timestamp": self.tick(),
                "sessionId": sid,
                "content": text,
            }
        )
        self.emit(
            {
                "type": "queue-operation",
                "operation": "dequeue",
                "timestamp": self.tick(1, 5),
                "sessionId": sid,
            }
        )

    def last_prompt(self) -> None:
        self.emit(
            {
                "type": "last-prompt",
                "lastPrompt": self.prompt_text,
                "leafUuid": self.tip,
                "sessionId": self.session_id,
            }
        )

    def atis_latch(self) -> None:
        self.emit({"type": "atis-latch", "atis": "", "sessionId": self.session_id})

    def cost_state(self) -> None:
        c = self.cost
        self.emit(
            {
                "type": "cost-state",
                "sessionId": self.session_id,
                "totalCostUSD": c["usd"],
                "totalAPIDuration": c["api_ms"],
                "totalAPIDurationWithoutRetries": c["api_ms"] - 7,
                "totalToolDuration": c["tool_ms"],
                "totalLinesAdded": self.rng.randint(0, 40),
                "totalLinesRemoved": self.rng.randint(0, 20),
                "totalDuration": self.clock_ms - self.start_ms,
                "startTime": self.start_ms,
                "modelUsage": {
                    MODEL: {
                        "inputTokens": c["in"],
                        "outputTokens": c["out"],
                        "thinkingTokens": 0,
                        "cacheReadInputTokens": c["cache"],
                        "cacheCreationInputTokens": 0,
                        "cacheCreationEphemeral5mInputTokens": 0,
                        "cacheCreationEphemeral1hInputTokens": 0,
                        "webSearchRequests": 0,
                        "costUSD": c["usd"],
                    }
                },
                "hasUnknownModelCost": False,
            }
        )

    def api_request_shape(self) -> str:
        shape_hash = self.hex(64)
        self.emit(
            {
                "type": "api-request-shape",
                "sessionId": self.session_id,
                "shapeHash": shape_hash,
                "timestamp": self.tick(),
                "version": VERSION,
                "shape": {
                    "system": [
                        {
                            "type": "text",
                            "text": "You are a Claude agent, built on Anthropic's Claude "
                            "Agent SDK.",
                        },
                        {"type": "text", "text": "\n" + self.words(900)},
                    ],
                    "tools": [
                        {
                            "name": name,
                            "description": self.words(120),
                            "input_schema": {
                                "type": "object",
                                "properties": {
                                    p: {"type": "string", "description": self.words(12)}
                                    for p in props
                                },
                                "required": [props[0]],
                                "additionalProperties": False,
                            },
                        }
                        for name, props in (
                            ("Bash", ("command", "description", "timeout")),
                            ("Read", ("file_path", "offset", "limit")),
                            ("Grep", ("pattern", "path", "output_mode")),
                            ("Edit", ("file_path", "old_string", "new_string")),
                        )
                    ],
                },
            }
        )
        return shape_hash

    def api_request_blob(self, role: str, text: str) -> str:
        blob_hash = self.hex(64)
        self.emit(
            {
                "type": "api-request-blob",
                "sessionId": self.session_id,
                "hash": blob_hash,
                "message": {"role": role, "content": [{"type": "text", "text": text}]},
            }
        )
        return blob_hash

    def api_request(self, shape_hash: str, tail: list[str]) -> str:
        request_id = self.uuid4()
        record: dict[str, Any] = {
            "type": "api-request",
            "sessionId": self.session_id,
            "id": request_id,
            "timestamp": self.tick(50, 400),
            "version": VERSION,
            "querySource": "sdk",
            "shapeHash": shape_hash,
            "params": {
                "model": MODEL,
                "betas": [
                    "claude-code-20250219",
                    "interleaved-thinking-2025-05-14",
                    "context-management-2025-06-27",
                    "per-turn-control-2026-07-01",
                    "mid-conversation-tool-changes-2026-07-01",
                    "thinking-token-count-2026-05-13",
                    "advanced-tool-use-2025-11-20",
                    "effort-2025-11-24",
                ],
                "max_tokens": 128000,
                "thinking": {"type": "adaptive", "display": "omitted"},
                "context_management": {
                    "edits": [{"type": "clear_thinking_20251015", "keep": "all"}]
                },
                "output_config": {"effort": "medium"},
            },
        }
        if self.last_request_id is not None:
            record["base"] = self.last_request_id
        record["keep"] = self.request_count * 2
        record["tail"] = tail or [self.hex(64) for _ in range(self.rng.randint(1, 3))]
        record["cacheControl"] = [
            {"path": ["system", 0], "value": {"type": "ephemeral"}},
            {"path": ["system", 1], "value": {"type": "ephemeral"}},
            {
                "path": ["messages", self.request_count * 2 + 1, "content", 0],
                "value": {"type": "ephemeral"},
            },
        ]
        record["requestDigest"] = self.hex(64)
        self.emit(record)
        self.last_request_id = request_id
        self.request_count += 1
        self.stats.api_calls += 1
        return request_id

    # ---- attachments ------------------------------------------------------------------------

    def attachment(
        self, body: dict[str, Any], rendered: str | None, role: str = "system", **extra: Any
    ) -> str:
        fields: dict[str, Any] = {"attachment": body, "type": "attachment"}
        if rendered is not None:
            fields["rendered"] = [{"content": f"<system-reminder>\n{rendered}\n</system-reminder>"}]
            fields["renderedRole"] = role
        fields.update(extra)
        return self.chained(fields)

    def startup_attachments(self) -> list[str]:
        """The first-turn attachments, in 2.1.328's order; returns the texts of the blobs."""
        day = _now_iso(self.clock_ms)[:10]
        self.last_day = day
        env_text = (
            "# Environment\nYou have been invoked in the following environment: \n"
            f" - Primary working directory: {self.cwd}\n - Is a git repository: true\n"
            " - Platform: linux\n - Shell: bash\n - OS Version: Linux 6.18.44\n - "
            + self.words(110)
        )
        self.attachment(
            {
                "type": "environment",
                "snapshot": {
                    "workingDirectory": self.cwd,
                    "isWorktree": False,
                    "isGitRepo": True,
                    "additionalWorkingDirectories": [],
                    "platform": "linux",
                    "shell": "bash",
                    "osVersion": "Linux 6.18.44",
                },
            },
            env_text,
        )
        model_text = (
            f"You are powered by the model named Opus 5.5. The exact model ID is {MODEL}. "
            "Assistant knowledge cutoff is June 2026."
        )
        identity = {"modelId": MODEL, "marketingName": "Opus 5.5", "knowledgeCutoff": "June 2026"}
        self.attachment({"type": "model", "identity": identity, "text": model_text}, model_text)
        tools = [
            "CronCreate",
            "CronDelete",
            "CronList",
            "EnterWorktree",
            "ExitWorktree",
            "Monitor",
            "NotebookEdit",
            "SendMessage",
            "TaskStop",
            "WebFetch",
            "WebSearch",
        ]
        self.attachment(
            {
                "type": "deferred_tools_delta",
                "addedNames": tools,
                "addedLines": tools,
                "removedNames": [],
                "wireHiddenNames": [],
                "readdedNames": [],
                "pendingMcpServers": [],
                "needsAuthMcpServers": [],
                "failedMcpServers": [],
            },
            "The following deferred tools are now available via ToolSearch. Their schemas are "
            "NOT loaded — calling them directly will fail with InputValidationError.\n"
            + "\n".join(tools),
        )
        agents = ["claude", "Explore", "general-purpose", "Plan", "statusline-setup"]
        agent_lines = [f"- {a}: {self.words(45)} (Tools: *)" for a in agents]
        self.attachment(
            {
                "type": "agent_listing_delta",
                "addedTypes": agents,
                "addedLines": agent_lines,
                "builtInTypes": agents,
                "builtInPluginTypes": [],
                "removedTypes": [],
                "isInitial": True,
                "showConcurrencyNote": True,
            },
            "Available agent types for the Agent tool:\n" + "\n".join(agent_lines),
        )
        skills = [
            "dataviz",
            "update-config",
            "keybindings-help",
            "code-review",
            "simplify",
            "fewer-permission-prompts",
            "loop",
            "claude-api",
            "workflow-authoring",
            "run",
            "plugin-authoring",
            "init",
            "security-review",
        ]
        skill_text = "\n".join(f"- {s}: {self.words(70)}" for s in skills)
        self.attachment(
            {
                "type": "skill_listing",
                "content": skill_text,
                "skillCount": len(skills),
                "isInitial": True,
                "names": skills,
                "digests": [self.hex(16) for _ in skills],
            },
            "The following skills are available for use with the Skill tool:\n\n" + skill_text,
        )
        self.atis_latch()
        self.attachment({"type": "session_context", "context": {}}, None)
        self.attachment({"type": "date", "date": day}, f"Today's date is {day}.")
        attribution = (
            "Attribution for git commits and pull requests you create from here on:\n"
            "- End git commit messages with:\nCo-Authored-By: Claude Opus 5.5 "
            "<noreply@anthropic.com>\n- End pull request descriptions with:\n"
            "🤖 Generated with [Claude Code](https://claude.com/claude-code)"
        )
        self.attachment(
            {
                "type": "remote_session_change",
                "url": None,
                "commit": "Co-Authored-By: Claude Opus 5.5 <noreply@anthropic.com>",
                "pr": "🤖 Generated with [Claude Code](https://claude.com/claude-code)",
                "sendUserFileHint": False,
                "managedCommit": False,
                "managedPr": False,
            },
            attribution,
            role="user",
            renderedBesideToolResult=True,
        )
        self.prompt_snapshot(with_tools=False)
        return [attribution, env_text]

    def prompt_snapshot(self, with_tools: bool) -> None:
        body: dict[str, Any] = {
            "type": "prompt_snapshot",
            "systemPrompt": ["\n" + self.words(300)] + [self.words(70) for _ in range(9)],
        }
        if with_tools:
            body["tools"] = [
                {
                    "name": name,
                    "description": self.words(90),
                    "schema": {
                        "name": name,
                        "description": self.words(90),
                        "input_schema": {
                            "$schema": "https://json-schema.org/draft/2020-12/schema",
                            "type": "object",
                            "properties": {
                                "command": {"description": self.words(10), "type": "string"}
                            },
                            "required": ["command"],
                            "additionalProperties": False,
                        },
                    },
                }
                for name in ("Agent", "Bash", "Edit", "Read")
            ]
            body["cliPrefix"] = "You are a Claude agent, built on Anthropic's Claude Agent SDK."
            body["systemTurns"] = True
            body["toolChangeHeader"] = True
            body["inlineTools"] = False
            body["keptReminders"] = False
        body["reminderFold"] = False
        body["echoWireToolInputs"] = False
        body["contextRendering"] = "announced"
        self.attachment(body, None)

    # ---- assistant and tools ----------------------------------------------------------------

    def usage(self) -> dict[str, Any]:
        out_tokens = self.rng.randint(5, 2500)
        cache_read = self.rng.randint(10_000, 180_000)
        self.cost["in"] += 3
        self.cost["out"] += out_tokens
        self.cost["cache"] += cache_read
        self.cost["usd"] = round(self.cost["usd"] + out_tokens * 25e-6 + cache_read * 5e-7, 6)
        return {
            "input_tokens": 3,
            "cache_creation_input_tokens": self.rng.randint(0, 4000),
            "cache_read_input_tokens": cache_read,
            "output_tokens": out_tokens,
            "output_tokens_details": {"thinking_tokens": 0},
            "server_tool_use": {"web_search_requests": 0, "web_fetch_requests": 0},
            "service_tier": "standard",
            "cache_creation": {"ephemeral_1h_input_tokens": 0, "ephemeral_5m_input_tokens": 0},
            "inference_geo": "",
            "iterations": [],
            "speed": "standard",
            "fallback_credit": None,
        }

    def assistant_message(self, blocks: list[dict[str, Any]], stop: str) -> list[str]:
        """One API answer: one record per content block, linear chain, shared message.id."""
        msg_id = "msg_01" + self.b62(22)
        request_id = self.api_request(self.shape_hash, self.pending_tail)
        self.pending_tail = []
        api_ms = self.rng.randint(800, 40_000)
        self.cost["api_ms"] += api_ms
        self.clock_ms += api_ms
        tool_names = sorted({b["name"] for b in blocks if b["type"] == "tool_use"})
        if tool_names:
            self.emit({"type": "tools-used", "tools": tool_names, "sessionId": self.session_id})
        usage = self.usage()
        uuids: list[str] = []
        for index, block in enumerate(blocks):
            message = {
                "id": msg_id,
                "type": "message",
                "role": "assistant",
                "model": MODEL,
                "content": [block],
                "stop_reason": stop,
                "stop_sequence": None,
                "usage": usage,
                "stop_details": None,
            }
            fields: dict[str, Any] = {"message": message}
            if block["type"] == "tool_use":
                fields["toolInputStreamMs"] = self.rng.randint(1, 900)
            elif block["type"] == "thinking":
                fields["thinkingDurationMs"] = self.rng.randint(100, 30_000)
                fields["thinkingDisplay"] = "omitted"
            fields.update(
                {
                    "apiBlockIndex": index,
                    "requestRef": request_id,
                    "requestedModel": MODEL,
                    "promptCacheRequested": "5m",
                    "type": "assistant",
                }
            )
            uuids.append(self.chained(fields, _ASSISTANT_AFTER, tick=(1, 3000)))
        return uuids

    def thinking_block(self) -> dict[str, Any]:
        text = (
            ""
            if self.rng.random() < 0.55
            else " ".join(self.sentence() for _ in range(self.rng.randint(2, 30)))
        )
        signature = base64.b64encode(self.rng.randbytes(self.rng.randint(200, 1400))).decode()
        return {"type": "thinking", "thinking": text, "signature": signature}

    def tool_use_block(self) -> tuple[dict[str, Any], str]:
        r = self.rng.random()
        tool_id = "toolu_01" + self.b62(22)
        if r < 0.003:
            png = f"{self.cwd}/docs/{self.rng.choice(_WORDS)}.png"
            return (
                {"type": "tool_use", "id": tool_id, "name": "Read", "input": {"file_path": png}},
                "read_image",
            )
        if r < 0.5:
            cmd = self.rng.choice(
                (
                    f"cd {self.cwd} && python -m pytest -q tests/test_{self.rng.choice(_WORDS)}.py",
                    f"git -C {self.cwd} log --oneline -n 40",
                    f"journalctl -u {self.rng.choice(_WORDS)}.service --since today --no-pager",
                    f"rg -n '{self.rng.choice(_WORDS)}' {self.cwd}/src | head -200",
                    f"cat {self.cwd}/logs/{self.rng.choice(_WORDS)}.log",
                    "ls -la " + self.path().rsplit("/", 1)[0],
                )
            )
            return (
                {
                    "type": "tool_use",
                    "id": tool_id,
                    "name": "Bash",
                    "input": {"command": cmd, "description": self.words(self.rng.randint(3, 8))},
                },
                "bash",
            )
        if r < 0.82:
            inp: dict[str, Any] = {"file_path": self.path()}
            if self.rng.random() < 0.2:
                inp["offset"] = self.rng.randint(1, 2000)
                inp["limit"] = self.rng.choice((100, 200, 500))
            return ({"type": "tool_use", "id": tool_id, "name": "Read", "input": inp}, "read")
        return (
            {
                "type": "tool_use",
                "id": tool_id,
                "name": "Grep",
                "input": {
                    "pattern": self.rng.choice(_WORDS) + "\\(",
                    "path": self.cwd + "/src",
                    "output_mode": "content",
                    "-n": True,
                },
            },
            "grep",
        )

    def result_line_target(self, kind: str) -> int:
        """Heavy-tailed size of the whole tool-result line (truncated Pareto)."""
        xmin = {"bash": 800.0, "read": 3_000.0, "grep": 1_500.0}.get(kind, 1_000.0)
        alpha = 1.0
        u = 1.0 - self.rng.random()
        # Read returns at most a couple of thousand lines; the huge outputs come from commands
        cap = READ_MAX_LINE_BYTES if kind == "read" else MAX_LINE_BYTES
        return int(min(xmin * u ** (-1.0 / alpha), cap))

    def tool_result(self, call: _Call, forced_bytes: int | None = None) -> str:
        """Write the result of `call` under the call's own record; return the result's uuid."""
        line_target = forced_bytes or self.result_line_target(call.kind)
        record = self._tool_result_record(call, line_target)
        data = orjson.dumps(record, option=_DUMPS_OPT)
        while len(data) > MAX_LINE_BYTES:  # escapes made it longer than planned: shrink
            line_target = int(line_target * MAX_LINE_BYTES / len(data) * 0.98)
            record = self._tool_result_record(call, line_target)
            data = orjson.dumps(record, option=_DUMPS_OPT)
        self.stats.tool_result_bytes += self.write_line(data, "user")
        self.cost["tool_ms"] += self.rng.randint(5, 20_000)
        return str(record["uuid"])

    def _tool_result_record(self, call: _Call, line_target: int) -> dict[str, Any]:
        content: Any
        extra: dict[str, Any]
        payload = max(int((line_target - 1_100) / (2 * self.pool_ratio)), 0)
        if call.kind == "bash":
            out = self.pool_slice(payload) if payload else ""
            content = out
            extra = {
                "toolUseResult": {
                    "stdout": out,
                    "stderr": "",
                    "interrupted": False,
                    "isImage": False,
                    "noOutputExpected": False,
                },
                "sandboxed": False,
            }
        elif call.kind == "read":
            raw = self.pool_slice(max(payload, 20))
            numbered = "\n".join(f"{i}\t{line}" for i, line in enumerate(raw.split("\n"), 1))
            content = numbered
            extra = {
                "toolUseResult": {
                    "type": "text",
                    "file": {
                        "filePath": self.path(),
                        "content": raw,
                        "numLines": numbered.count("\n") + 1,
                        "startLine": 1,
                        "totalLines": numbered.count("\n") + 1,
                    },
                }
            }
        elif call.kind == "grep":
            body = self.pool_slice(max(payload, 20))
            content = body
            extra = {
                "toolUseResult": {
                    "mode": "content",
                    "numFiles": self.rng.randint(1, 40),
                    "filenames": [],
                    "content": body,
                    "numLines": body.count("\n") + 1,
                }
            }
        else:  # read_image
            data = self.png_b64(self.rng.randint(20_000, 600_000))
            content = [
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": data},
                }
            ]
            extra = {
                "toolUseResult": {
                    "type": "image",
                    "file": {
                        "base64": data,
                        "type": "image/png",
                        "originalSize": len(data) * 3 // 4,
                        "dimensions": {
                            "originalWidth": 1600,
                            "originalHeight": 1000,
                            "displayWidth": 1600,
                            "displayHeight": 1000,
                        },
                    },
                }
            }
            self.stats.images += 1
        block: dict[str, Any] = {
            "tool_use_id": call.tool_id,
            "type": "tool_result",
            "content": content,
        }
        if call.kind == "bash":
            block["is_error"] = self.rng.random() < 0.05
        record: dict[str, Any] = {
            "parentUuid": call.record_uuid,
            "isSidechain": False,
            "promptId": self.prompt_id,
            "type": "user",
            "message": {"role": "user", "content": [block]},
            "uuid": self.uuid4(),
            "timestamp": self.tick(20, 5000),
        }
        record.update(extra)
        record["sourceToolAssistantUUID"] = call.record_uuid
        record["permissionDecision"] = {
            "decision": "accept",
            "source": "config",
            "reasonType": "rule",
            "ruleSource": "userSettings",
        }
        record.update(self.env)
        return record

    # ---- turns ------------------------------------------------------------------------------

    def user_record(self, text: str) -> None:
        self.turn += 1
        self.prompt_id = self.uuid4()
        self.prompt_text = text
        image = self.turn > 1 and self.rng.random() < 0.004
        content: Any = text
        fields: dict[str, Any] = {"promptId": self.prompt_id, "type": "user"}
        if image:
            self.image_count += 1
            self.stats.images += 1
            data = self.png_b64(self.rng.randint(30_000, 1_100_000))
            content = [
                {"type": "text", "text": text},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": data},
                },
            ]
        fields["message"] = {"role": "user", "content": content}
        after: dict[str, Any] = {}
        if image:
            after["imagePasteIds"] = [self.image_count]
        after.update(
            {
                "permissionMode": "default",
                "promptSource": "sdk",
                "turnOrigin": "sdk",
                "turnPosition": {"promptIndex": 0, "turnIndex": self.turn},
            }
        )
        self.chained(fields, after, tick=(1, 80))
        if image:
            path = (
                f"/tmp/claude-1000/{self.enc_cwd}/{self.session_id}/images/{self.image_count}.png"
            )
            self.chained(
                {
                    "promptId": self.prompt_id,
                    "type": "user",
                    "message": {
                        "role": "user",
                        "content": [{"type": "text", "text": f"[Image: source: {path}]"}],
                    },
                    "isMeta": True,
                    "turnCompanion": True,
                }
            )

    def run_turn(self) -> None:
        # the user thinks for a while between turns (a session that runs for weeks)
        self.clock_ms += int(self.rng.expovariate(1 / 420_000)) + 2_000
        text = self.user_prompt()
        self.queue_ops(text)
        self.user_record(text)
        blob_texts: list[str] = []
        if self.turn == 1:
            blob_texts = self.startup_attachments()
            self.shape_hash = self.api_request_shape()
        else:
            day = _now_iso(self.clock_ms)[:10]
            if day != self.last_day:
                self.last_day = day
                self.attachment({"type": "date", "date": day}, f"Today's date is {day}.")
                blob_texts.append(f"Today's date is {day}.")
            if self.rng.random() < 0.01:
                names = [f"mcp__{self.rng.choice(_WORDS)}__{self.rng.choice(_WORDS)}"]
                self.attachment(
                    {
                        "type": "deferred_tools_delta",
                        "addedNames": names,
                        "addedLines": names,
                        "removedNames": [],
                        "wireHiddenNames": [],
                        "readdedNames": [],
                        "pendingMcpServers": [],
                        "needsAuthMcpServers": [],
                        "failedMcpServers": [],
                    },
                    "The following deferred tools are now available via ToolSearch:\n"
                    + "\n".join(names),
                )
                blob_texts.append("\n".join(names))
        self.pending_tail = [
            self.api_request_blob("system" if i else "user", t) for i, t in enumerate(blob_texts)
        ]

        # tool rounds, then the final answer
        rounds = 0 if self.rng.random() < 0.3 else min(int(self.rng.expovariate(1 / 2.5)) + 1, 30)
        big_at = None
        if (
            not self.big_done
            and self.stats.bytes > self.target * 0.4
            and (self.target > 4 * MAX_LINE_BYTES)
        ):
            rounds = max(rounds, 1)
            big_at = 0
        for round_index in range(rounds):
            blocks: list[dict[str, Any]] = []
            if self.rng.random() < 0.45:
                blocks.append(self.thinking_block())
            if self.rng.random() < 0.5:
                blocks.append({"type": "text", "text": self.assistant_text(final=False)})
            n_calls = 1 if self.rng.random() < 0.72 else self.rng.choice((2, 2, 2, 3, 4))
            kinds: list[str] = []
            for _ in range(n_calls):
                block, kind = self.tool_use_block()
                blocks.append(block)
                kinds.append(kind)
            uuids = self.assistant_message(blocks, "tool_use")
            self.last_prompt()
            self.atis_latch()
            calls = [
                _Call(b["id"], b["name"], u, k)
                for b, u, k in zip(blocks[-n_calls:], uuids[-n_calls:], kinds, strict=True)
            ]
            self.stats.tool_calls += n_calls
            if n_calls > 1:
                self.stats.parallel_batches += 1
            order = list(range(n_calls))
            self.rng.shuffle(order)  # completion order
            last_result = ""
            for position in order:
                forced = None
                if big_at == round_index and position == order[-1]:
                    forced = MAX_LINE_BYTES - 64
                    calls[position].kind = "bash"
                    self.big_done = True
                last_result = self.tool_result(calls[position], forced)
            self.tip = last_result  # the chain continues under the result written last

        blocks = []
        if self.rng.random() < 0.35:
            blocks.append(self.thinking_block())
        blocks.append({"type": "text", "text": self.assistant_text(final=True)})
        self.assistant_message(blocks, "end_turn")
        if self.snapshot_policy == "every-turn" or self.turn == 1:
            self.prompt_snapshot(with_tools=True)
        self.last_prompt()
        if self.rng.random() < 0.3:
            self.emit({"type": "mode", "mode": "normal", "sessionId": self.session_id})
        self.atis_latch()
        self.chained(
            {
                "type": "system",
                "subtype": "stop_hook_summary",
                "hookCount": 1,
                "hookInfos": [
                    {
                        "command": "/usr/local/bin/kael-thread-rebuild hook stop",
                        "durationMs": self.rng.randint(40, 400),
                    }
                ],
                "hookErrors": [],
                "failedHookErrorIndexes": [],
                "hookAdditionalContext": [],
                "preventedContinuation": False,
                "stopReason": "",
                "hasOutput": False,
                "level": "suggestion",
            }
        )
        self.last_prompt()
        self.cost_state()

    def run(self) -> Stats:
        started = time.perf_counter()
        while self.stats.bytes < self.target:
            self.run_turn()
        self.stats.turns = self.turn
        self.stats.seconds = round(time.perf_counter() - started, 3)
        return self.stats


class ChatWriter(TranscriptWriter):
    """Sessions of the shapes the memory benchmark needs (`bench_memory.py`).

    - `run_chat(n)`: N short messages, a user prompt and a one-block answer in turn, as a chat
      of months over a channel leaves it (about 370 bytes a message, most of it envelope);
    - `run_single_line(n)`: one turn whose command output is a single line of about N bytes,
      written piece by piece (the generator never holds the line).
    """

    def short_text(self) -> str:
        if self.rng.random() < 0.15:
            return self.rng.choice(_CJK)
        return self.words(self.rng.randint(2, 9))

    def short_user(self) -> None:
        self.turn += 1
        fields = {"type": "user", "message": {"role": "user", "content": self.short_text()}}
        self.chained(fields, {"permissionMode": "default"}, tick=(2_000, 600_000))

    def short_answer(self) -> None:
        message = {
            "id": "msg_01" + self.b62(22),
            "type": "message",
            "role": "assistant",
            "model": MODEL,
            "content": [{"type": "text", "text": self.short_text()}],
        }
        self.chained({"message": message, "type": "assistant"}, tick=(500, 9_000))

    def run_chat(self, messages: int) -> Stats:
        started = time.perf_counter()
        for index in range(messages):
            if index % 2 == 0:
                self.short_user()
            else:
                self.short_answer()
        self.stats.turns = self.turn
        self.stats.seconds = round(time.perf_counter() - started, 3)
        return self.stats

    def run_single_line(self, line_bytes: int) -> Stats:
        started = time.perf_counter()
        self.user_record("Print the whole build log, please.")
        block, _ = self.tool_use_block()
        call_uuid = self.assistant_message([block], "tool_use")[-1]
        result_uuid = self.uuid4()
        head = orjson.dumps(
            {
                "parentUuid": call_uuid,
                "isSidechain": False,
                "type": "user",
                "uuid": result_uuid,
                "timestamp": self.tick(),
                **self.env,
                "message": {"role": "user", "content": [
                    {"tool_use_id": block["id"], "type": "tool_result", "content": ""}
                ]},
            }
        )
        opening, closing = head.split(b'"content":""', 1)
        size = len(head) + 1
        self.out.write(opening + b'"content":"')
        while size < line_bytes:
            piece = orjson.dumps(self.pool_slice(min(MIB, line_bytes - size)))[1:-1]
            if not piece:
                break
            self.out.write(piece)
            size += len(piece)
        self.out.write(b'"' + closing + b"\n")
        self.stats.bytes += size
        self.stats.lines += 1
        self.stats.max_line_bytes = size
        self.stats.lines_over_1mib += 1
        self.stats.record_types["user"] += 1
        self.tip = result_uuid
        self.assistant_message([{"type": "text", "text": "The build log is above."}], "end_turn")
        self.stats.turns = self.turn
        self.stats.seconds = round(time.perf_counter() - started, 3)
        return self.stats


def generate_shape(path: Path, shape: str, amount: int, seed: int = 0) -> Stats:
    """Write a `ChatWriter` session: SHAPE "chat" (AMOUNT messages) or "single-line" (one line
    of AMOUNT bytes), via `<path>.part` and a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(path.name + ".part")
    with open(part, "wb", buffering=8 * MIB) as out:
        writer = ChatWriter(out, 0, seed)
        stats = writer.run_chat(amount) if shape == "chat" else writer.run_single_line(amount)
        out.flush()
        os.fsync(out.fileno())
    os.replace(part, path)
    stats.path = str(path)
    return stats


def generate(
    path: Path, size_bytes: int, seed: int = 0, snapshot_policy: str = "first-turn"
) -> Stats:
    """Write the transcript to `path` (via `<path>.part` and a rename) and return its stats."""
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(path.name + ".part")
    with open(part, "wb", buffering=8 * MIB) as out:
        stats = TranscriptWriter(out, size_bytes, seed, snapshot_policy).run()
        out.flush()
        os.fsync(out.fileno())
    os.replace(part, path)
    stats.path = str(path)
    return stats


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("out", type=Path, help="where to write the transcript (.jsonl)")
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument(
        "--size-mb",
        type=float,
        help="target size in MiB (the file ends after the turn that reaches it)",
    )
    what.add_argument("--messages", type=int, help="a chat of this many short messages instead")
    what.add_argument("--line-mb", type=int, help="one turn whose output is one line of this size")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument(
        "--snapshot-policy",
        choices=SNAPSHOT_POLICIES,
        default="first-turn",
        help="write a prompt_snapshot attachment after every turn (default) or "
        "only after the first one",
    )
    args = parser.parse_args(argv)
    if min(x for x in (args.size_mb, args.messages, args.line_mb) if x is not None) <= 0:
        parser.error("the size must be positive")
    if args.messages is not None:
        stats = generate_shape(args.out, "chat", args.messages, args.seed)
    elif args.line_mb is not None:
        stats = generate_shape(args.out, "single-line", args.line_mb * MIB, args.seed)
    else:
        stats = generate(args.out, int(args.size_mb * MIB), args.seed, args.snapshot_policy)
    sys.stdout.write(orjson.dumps(stats.as_dict(), option=orjson.OPT_INDENT_2).decode() + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
