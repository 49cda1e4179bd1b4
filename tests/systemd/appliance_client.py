"""Run inside the appliance image by the systemd drill (standalone: no `tests` package there).

    python appliance_client.py '{"config": {...}, "sessions": ["<id>", ...], "timeout": 60}'

Builds the configured base, prints its identity, then switches to each session in turn and
waits until the unit's Claude Code reports it. Prints one JSON object: the identities and the
timings, or `{"error": "<the one-line KaelError>"}` (exit 3).
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from kael_thread_rebuild.config import Config
from kael_thread_rebuild.errors import KaelError
from kael_thread_rebuild.switching.factory import make_base


def main(raw: str) -> int:
    args = json.loads(raw)
    try:
        base = make_base(Config.model_validate(args["config"]))
        out: dict[str, Any] = {"before": base.identity().model_dump(), "switches": []}
        for session_id in args["sessions"]:
            started = time.monotonic()
            base.switch_to(session_id)
            switched = time.monotonic()
            deadline = switched + args["timeout"]
            while base.running_session() != session_id:
                if time.monotonic() > deadline:
                    raise KaelError(f"the unit did not report session {session_id} in time")
                time.sleep(0.1)
            out["switches"].append({
                "session_id": session_id,
                "switch_seconds": round(switched - started, 3),
                "reported_seconds": round(time.monotonic() - started, 3),
                "identity": base.identity().model_dump(),
            })
    except KaelError as exc:
        print(json.dumps({"error": str(exc)}))
        return 3
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
