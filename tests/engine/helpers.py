"""Small helpers for engine tests: plan a builder's transcript and read what was carried."""

from __future__ import annotations

from pathlib import Path

from kael_thread_rebuild.config import Config
from kael_thread_rebuild.plan import Plan, build_plan
from tests.builder import TranscriptBuilder


def plan_of(builder: TranscriptBuilder, config: Config, name: str = "") -> Plan:
    path = config.project_dir / f"{name or builder.session_id}.jsonl"
    builder.write(path)
    return build_plan(config, path)


def carried(plan: Plan) -> list[tuple[str, str]]:
    return [(item.role.value, text) for item, text in zip(plan.items, plan.texts(), strict=True)]


def source_path(config: Config, builder: TranscriptBuilder) -> Path:
    return config.project_dir / f"{builder.session_id}.jsonl"
