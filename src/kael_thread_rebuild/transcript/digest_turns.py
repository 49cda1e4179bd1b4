"""How often the interpreter hands the GIL over while a digest thread runs beside a reader.

The reader holds the GIL nearly all the time, and the digest thread needs it twice a chunk
(to check the file's size and after each hash), so by default (every 5 ms) it waits far longer
than it hashes: a 4 GiB plan read by one process finished reading at 15.7 s and waited until
19.6 s for its digest; handing over every millisecond, the digest is done when the reading is
(17.5 s in all; benchmarks/README.md, "Figures: issue 26, the file mapped"). The usual interval
comes back when the last digest ends, so a long-running server is left as it was.
"""

from __future__ import annotations

import sys
import threading

DIGEST_SWITCH_INTERVAL = 0.001

_lock = threading.Lock()
_running = 0
_usual = 0.0


def digest_started() -> None:
    """A digest thread starts: hand the GIL over every DIGEST_SWITCH_INTERVAL seconds."""
    global _running, _usual
    with _lock:
        if _running == 0:
            _usual = sys.getswitchinterval()
            sys.setswitchinterval(min(_usual, DIGEST_SWITCH_INTERVAL))
        _running += 1


def digest_ended() -> None:
    """A digest thread ends: the usual interval again once none runs."""
    global _running
    with _lock:
        _running -= 1
        if _running == 0:
            sys.setswitchinterval(_usual)
