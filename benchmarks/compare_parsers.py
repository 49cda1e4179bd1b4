"""Which JSON reader could make `plan` cheaper than parsing every line with orjson (issue 11).

Each contender does, on every line of one transcript held in memory, the least a plan needs of
a record: its envelope (type, uuid, parent, timestamp, sidechain, session), its message's id,
role and model, the type of each content block, the words of each text block, and the UTF-8
size of every runtime payload (tool results, tool inputs, thinking) without keeping it. The
contenders:

- orjson: parse the whole line, read the fields from the dicts (the engine today);
- msgspec: typed decoding into Structs that skip unknown fields, runtime payloads kept as
  `msgspec.Raw` (never decoded) and measured from their bytes, each line's UTF-8 checked
  separately (msgspec does not check the bytes it skips);
- pysimdjson: simdjson's parser (every byte validated in C), fields read through its proxies.

Every contender's facts must equal orjson's, line for line, or it is reported as differing and
the script exits 1. CPU seconds, least of `--repeat` runs, and each as a ratio to orjson's in
the same run. msgspec and pysimdjson are in the project's dev dependencies; a contender whose
library is missing is reported and left out.

    .venv/bin/python benchmarks/compare_parsers.py --size-mb 200 --cache-dir DIR
"""

# No `from __future__ import annotations`: msgspec reads the annotations of the Structs
# defined inside `msgspec_reader`, which a string could not name.
import argparse
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import orjson

from bench_plan import MIB, ensure_transcript
from kael_thread_rebuild.conversation.records import payload_size

Facts = tuple[Any, ...] | None
RUNTIME_BLOCKS = ("tool_result", "tool_use", "thinking", "redacted_thinking")


def _block_facts(block_type: Any, text: Any, payloads: Iterable[Any]) -> tuple[Any, ...]:
    if block_type == "text":
        return (block_type, text)
    if block_type in RUNTIME_BLOCKS:
        return (block_type, sum(payloads))
    return (block_type,)


def orjson_facts(line: bytes) -> Facts:
    try:
        record = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    if type(record) is not dict:
        return None
    message = record.get("message")
    head = (record.get("type"), record.get("uuid"), record.get("parentUuid"),
            record.get("timestamp"), record.get("isSidechain"), record.get("sessionId"))
    if type(message) is not dict:
        return (*head, None)
    content = message.get("content")
    blocks: Any = None
    if isinstance(content, str):
        blocks = content
    elif isinstance(content, list):
        blocks = tuple(
            _block_facts(b.get("type"), b.get("text"), _orjson_payloads(b))
            if type(b) is dict else ("?",) for b in content)
    return (*head, message.get("id"), message.get("role"), message.get("model"), blocks)


def _orjson_payloads(block: dict[str, Any]) -> Iterable[int]:
    inner = block.get("content")
    if isinstance(inner, list):
        yield from (payload_size(item.get("text")) for item in inner if type(item) is dict)
    else:
        yield payload_size(inner)
    for name in ("input", "thinking", "signature"):
        yield payload_size(block.get(name))


def _raw_size(raw: bytes | memoryview) -> int:
    """`payload_size` of the JSON value RAW without decoding a string: a string's bytes less one
    for each two-byte escape (a run of 2k backslashes is k escapes); one with a `\\u` escape is
    decoded, as is anything that is not a string."""
    data = bytes(raw)
    if not data:
        return 0
    if data[0] != 0x22:
        return payload_size(orjson.loads(data))
    if b"\\u" in data:
        return payload_size(orjson.loads(data))
    return len(data) - 2 - data.count(b"\\") + data.count(b"\\\\")


def msgspec_reader() -> Callable[[bytes], Facts]:
    import msgspec  # optional: only this comparison uses it

    raw_none = msgspec.Raw(b"")

    class Block(msgspec.Struct):
        type: Any = None
        text: Any = None
        content: msgspec.Raw = raw_none
        input: msgspec.Raw = raw_none
        thinking: msgspec.Raw = raw_none
        signature: msgspec.Raw = raw_none

    class Message(msgspec.Struct):
        id: Any = None
        role: Any = None
        model: Any = None
        content: str | list[Block] | None = None

    class Record(msgspec.Struct):
        type: Any = None
        uuid: Any = None
        parentUuid: Any = None  # the transcript's field names
        timestamp: Any = None
        isSidechain: Any = None
        sessionId: Any = None
        message: Message | None = None

    decode = msgspec.json.Decoder(Record).decode
    errors = (msgspec.DecodeError, msgspec.ValidationError)

    def payloads(block: Block) -> Iterable[int]:
        inner = bytes(block.content)
        if inner[:1] == b"[":
            yield from (payload_size(item.get("text")) for item in orjson.loads(inner)
                        if type(item) is dict)
        else:
            yield _raw_size(inner)
        for raw in (block.input, block.thinking, block.signature):
            yield _raw_size(raw)

    def facts(line: bytes) -> Facts:
        if not line.isascii():
            try:
                line.decode()
            except UnicodeDecodeError:
                return None
        try:
            record = decode(line)
        except errors:
            return orjson_facts(line)  # not an object of this shape: read it whole
        head = (record.type, record.uuid, record.parentUuid, record.timestamp,
                record.isSidechain, record.sessionId)
        message = record.message
        if message is None:
            return (*head, None)
        content = message.content
        blocks: Any = content
        if isinstance(content, list):
            blocks = tuple(_block_facts(b.type, b.text, payloads(b)) for b in content)
        return (*head, message.id, message.role, message.model, blocks)

    return facts


def simdjson_reader() -> Callable[[bytes], Facts]:
    import simdjson  # optional: only this comparison uses it

    parser = simdjson.Parser()
    proxies = (simdjson.Object, simdjson.Array)

    def plain(value: Any) -> Any:
        return value.as_dict() if isinstance(value, simdjson.Object) else (
            value.as_list() if isinstance(value, simdjson.Array) else value)

    def payloads(block: Any) -> Iterable[int]:
        inner = block.get("content")
        if isinstance(inner, simdjson.Array):
            yield from (payload_size(plain(item.get("text"))) for item in inner
                        if isinstance(item, simdjson.Object))
        else:
            yield payload_size(plain(inner))
        for name in ("input", "thinking", "signature"):
            yield payload_size(plain(block.get(name)))

    def facts(line: bytes) -> Facts:
        try:
            record = parser.parse(line)
        except ValueError:
            return None
        try:
            if not isinstance(record, simdjson.Object):
                return None
            head = tuple(plain(record.get(name)) for name in (
                "type", "uuid", "parentUuid", "timestamp", "isSidechain", "sessionId"))
            message = record.get("message")
            if not isinstance(message, simdjson.Object):
                return (*head, None)
            content = message.get("content")
            blocks: Any = plain(content) if not isinstance(content, proxies) else None
            if isinstance(content, simdjson.Array):
                blocks = tuple(
                    _block_facts(plain(b.get("type")), plain(b.get("text")), payloads(b))
                    if isinstance(b, simdjson.Object) else ("?",) for b in content)
            return (*head, plain(message.get("id")), plain(message.get("role")),
                    plain(message.get("model")), blocks)
        finally:
            # The parser is reused only once no proxy of the last document is left.
            record = message = content = None

    return facts


CONTENDERS: dict[str, Callable[[], Callable[[bytes], Facts]]] = {
    "orjson": lambda: orjson_facts,
    "msgspec": msgspec_reader,
    "pysimdjson": simdjson_reader,
}


def cpu_of(read: Callable[[bytes], Facts], lines: list[bytes]) -> tuple[float, list[Facts]]:
    started = time.process_time()
    facts = [read(line) for line in lines]
    return time.process_time() - started, facts


def first_difference(ours: list[Facts], theirs: list[Facts]) -> int | None:
    for number, (mine, other) in enumerate(zip(ours, theirs, strict=True), start=1):
        if mine != other:
            return number
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--size-mb", type=float, default=200.0, help="transcript size in MiB")
    parser.add_argument("--repeat", type=int, default=3, help="runs per contender (least kept)")
    parser.add_argument("--seed", type=int, default=0, help="generator seed")
    parser.add_argument("--cache-dir", type=Path, help="generate into (and reuse from) DIR")
    parser.add_argument("--transcript", type=Path, help="read this file instead of generating")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    work = Path(tempfile.mkdtemp(prefix="ktr-parsers-"))
    try:
        if args.transcript is not None:
            path = args.transcript
        else:
            data = args.cache_dir.resolve() if args.cache_dir else work
            data.mkdir(parents=True, exist_ok=True)
            path, _ = ensure_transcript(data, args.size_mb, args.seed, "first-turn")
        try:
            lines = path.read_bytes().splitlines()
        except OSError as exc:
            parser.error(f"cannot read {path}: {exc.strerror or exc}")
        print(f"{path.stat().st_size / MIB:.1f} MiB, {len(lines)} lines, CPU seconds, least of "
              f"{args.repeat} (load average {os.getloadavg()[0]:.1f})")
        return compare(lines, args.repeat)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def compare(lines: list[bytes], repeat: int) -> int:
    baseline: list[Facts] = []
    floor = 0.0
    status = 0
    for name, make in CONTENDERS.items():
        try:
            read = make()
        except ImportError as exc:
            print(f"  {name:<11} not installed ({exc.name})")
            continue
        runs = [cpu_of(read, lines) for _ in range(repeat)]
        best = min(seconds for seconds, _ in runs)
        facts = runs[0][1]
        if name == "orjson":
            baseline, floor = facts, best
        differs = first_difference(baseline, facts)
        note = "" if differs is None else f"  DIFFERS from orjson at line {differs}"
        status = status or int(differs is not None)
        print(f"  {name:<11} {best:7.3f}  {best / floor:5.2f} x orjson{note}", flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
