"""Read-only engine commands: plan, dirty, candidate (the preview/export of a rebuild)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..config import Config
from ..errors import Refused, UsageError
from ..paths import check_path_text, resolve_transcript, shown
from ..plan import build_plan
from .output import emit

TRANSCRIPT_HELP = ("the transcript to read (inside project_dir); default: the newest transcript "
                   "in project_dir that is not a candidate")


def _plan(config: Config, args: argparse.Namespace) -> int:
    plan = build_plan(config, resolve_transcript(config, args.transcript),
                      started=args.started)
    emit(plan.report, args.json)
    return 0


def _dirty(config: Config, args: argparse.Namespace) -> int:
    plan = build_plan(config, resolve_transcript(config, args.transcript),
                      started=args.started)
    emit(plan.report.dirty, args.json)
    return 0


def _candidate(config: Config, args: argparse.Namespace) -> int:
    try:
        check_path_text(str(args.output_dir))
        output_dir: Path = args.output_dir.expanduser().absolute()
    except (ValueError, RuntimeError) as exc:  # RuntimeError: `~user` of no one
        raise UsageError(f"--output-dir {shown(args.output_dir)} {exc}") from None
    if not output_dir.is_dir():
        raise UsageError(f"--output-dir {output_dir} does not exist or is not a directory")
    from ..candidate.writer import write_candidate  # only this command writes

    plan = build_plan(config, resolve_transcript(config, args.transcript),
                      started=args.started)
    if plan.blocked:
        raise Refused(f"plan blocked: {plan.report.blocked_reason}")
    result = write_candidate(plan, output_dir, config)
    report = plan.report
    summary = {
        "new_session_id": result.new_session_id,
        "candidate_path": str(result.candidate_path),
        "manifest_path": str(result.manifest_path),
        "candidate_sha256": result.candidate_sha256,
        "verification": result.verification.model_dump(mode="json"),
        "source_path": report.source_path,
        "source_sha256": report.source_sha256,
        "source_session_id": report.source_session_id,
        "source_turns": report.source_turns,
        "selected_turns": report.selected_turns,
        "open_tail_turns": report.open_tail_turns,
        "dropped_oldest_turns": report.dropped_oldest_turns,
        "source_speech_items": report.source_speech_items,
        "carried_speech_items": report.carried_speech_items,
        "estimated_tokens": report.estimated_tokens,
        "startup_frozen": report.startup_frozen,
        "resume_hint": f"claude --resume {result.new_session_id}",
    }
    emit(summary, args.json)
    if not result.verification.ok:
        raise Refused(f"verification failed: {result.verification.errors[0]}")
    return 0


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser],
             parent: argparse.ArgumentParser) -> None:
    plan = commands.add_parser(
        "plan", parents=[parent], help="show what a rebuild would carry (read-only)",
        description="Read a transcript and report what a rebuild would carry: turns, speech by "
                    "origin, the startup snapshot, budget, poison score, the dirty ledger and "
                    "why it would be blocked. Changes nothing.")
    plan.add_argument("--transcript", type=Path, help=TRANSCRIPT_HELP)
    plan.set_defaults(handler=_plan)

    dirty = commands.add_parser(
        "dirty", parents=[parent], help="runtime bytes by category and whether to rebuild",
        description="Report the runtime bytes (tool results, tool calls, thinking, images, "
                    "injections, attachments, sidechains, system) against dirty_budget_bytes, "
                    "and whether a rebuild is advised. It only advises; it never requests.")
    dirty.add_argument("--transcript", type=Path, help=TRANSCRIPT_HELP)
    dirty.set_defaults(handler=_dirty)

    candidate = commands.add_parser(
        "candidate", parents=[parent], help="write and verify a rebuilt session (preview/export)",
        description="Write DIR/<new id>.jsonl and DIR/<new id>.manifest.json, verify them from "
                    "disk, and print the result. Refuses (exit 1) when the plan is blocked. The "
                    "source transcript is never written. To try it: copy the file into Claude "
                    "Code's project folder and run `claude --resume <new id>`.")
    candidate.add_argument("--transcript", type=Path, help=TRANSCRIPT_HELP)
    candidate.add_argument("--output-dir", type=Path, required=True, metavar="DIR",
                           help="an existing directory for the candidate and its manifest")
    candidate.set_defaults(handler=_candidate)
