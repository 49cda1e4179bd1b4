"""`plan` and `dirty` on the command line from a config validated before (`checked_config`):
without pydantic or the action table, so that they cost little more than reading the file.

`reading` declares the two actions; both faces make the plan with `plan_of` and print its
facts, the command line here from the record, the actions from the validated config.
"""

from __future__ import annotations

import argparse
import tomllib
from typing import TYPE_CHECKING

from ..checked_config import recall
from ..paths import resolve_transcript
from ..plan import Plan, build_plan
from ..state_layout import config_path, peeked_state_dir, read_config_file
from .output import emit
from .prestart import CACHED_COMMANDS

if TYPE_CHECKING:
    from ..config import Config
    from ..conversation.scan import SecondHalf
    from ..reading_settings import ReadingSettings


def plan_of(settings: Config | ReadingSettings, transcript: str | None,
            started: SecondHalf | None) -> Plan:
    """The plan of TRANSCRIPT (inside project_dir; None: the newest there), taken up from the
    scan cache when it can be."""
    return build_plan(settings, resolve_transcript(settings, transcript), started=started,
                      cached=True)


def run_checked(args: argparse.Namespace, started: SecondHalf | None) -> int | None:
    """ARGS' `plan` or `dirty` from the record of its config; None (nothing done) when the
    command is another, or its config has no record: it must be validated first."""
    given = config_path(getattr(args, "config", None))
    if args.command not in CACHED_COMMANDS or not given:
        return None
    try:
        raw = read_config_file(given)
        state_dir = peeked_state_dir(tomllib.loads(raw.decode("utf-8")))
    except (OSError, ValueError, RuntimeError):  # the validator says what is wrong
        return None
    settings = recall(raw, state_dir)
    if settings is None:
        return None
    facts = plan_of(settings, args.transcript, started).facts
    emit(facts if args.command == "plan" else facts["dirty"], args.json)
    return 0
