"""The demo household's conversation and live switch (`.ci/demo`), typed into the pane as the
human would, with the live drill's tools (drill.py); the same arguments as drill.py.

`--phase prepare` (before the install): a picture in the companion folder, then every turn of
demo_script.conversation typed into the running Claude Code (tools approved as the human would).
`--phase drill` (after the install): Claude Code restarted with `--continue`, the rebuild asked
for (the model calls the request tool with REBUILD, the Stop hook schedules it, the daemon
switches the pane), then one message typed into the new session. The result (JSON, read by the
demo's report): the operation record, the stand-in's last request of the old session and the
first of the new one, the speech the new session must have been shown, the switch's downtime.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import demo_script as d

import drill
from drill import Household, bodies
from support.fidelity import conversation_texts, non_text_block_types, tiny_png


def put_picture(place: Household) -> None:
    """The photo the household asks about, owned by the user (Read returns it as an image)."""
    folder = place.home / "companion"
    path = folder / d.IMAGE_NAME
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(tiny_png(64, 48, (60, 160, 70)))
    shutil.chown(tmp, place.user, place.user)
    os.replace(tmp, path)


def talk(place: Household) -> None:
    """The household's weeks of talk, turn after turn."""
    put_picture(place)
    place.wait_ready()
    for turn in d.conversation(str(place.home)):
        place.turn(turn.prompt, turn.answer)


def switch(place: Household, start_command: str, result: dict[str, Any]) -> None:
    """Fills RESULT as it goes, so that a failure still shows how far the switch came."""
    place.restart_with_continue(start_command)
    result["old_session"] = place.wait_ready()
    place.turn(d.P_REBUILD, d.A_REBUILD_DONE)
    result["before_request"] = bodies()[-1]
    op = drill.settled(place)
    result["rebuild"] = op
    result["downtime_seconds"] = drill.seconds_between(op, "scheduled", "activated")
    if op["status"] != "activated":
        raise AssertionError(f"the rebuild ended {op['status']}: {op['error']}")
    result["new_session"] = place.wait_ready(op["new_session_id"])
    candidate = Path(op["candidate_path"] or "/nonexistent")
    result["candidate_bytes"] = candidate.stat().st_size if candidate.exists() else None
    since = len(bodies())
    place.turn(d.P_AFTER, d.A_AFTER)
    after = drill.request_with(d.P_AFTER, since)
    result["after_request"] = after
    result["after_texts"] = conversation_texts(after)
    result["after_non_text"] = sorted(non_text_block_types(after))
    said = [item for turn in [*d.conversation(str(place.home)), d.REBUILD] for item in turn.speech]
    result["expected_texts"] = [*said, ("user", d.P_AFTER)]


def main() -> None:
    args = drill.arguments(__doc__).parse_args()
    place = Household(args.user, args.target, args.instance, f"kael-thread-rebuild-{args.instance}",
                      f"/etc/kael-thread-rebuild/{args.instance}.toml")
    if args.phase == "prepare":
        with drill.shown_on_failure(place):
            talk(place)
        return
    if args.result is None:
        raise SystemExit("the drill needs --result")
    drill.run_and_report(lambda result: switch(place, args.start_command, result), place,
                   args.instance, Path(args.result))


if __name__ == "__main__":
    main()
