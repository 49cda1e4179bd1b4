"""The household's loopback stand-in for the advisor's provider (Molecule only): the OpenAI-style
chat API the Kimi Code CLI calls (tests/support/standin_openai.py), on 127.0.0.1:PORT, appending
the body of every `POST /v1/chat/completions` to a JSON-lines file. Its echo names the last
words it was sent; its log is the ground truth of the Kimi session (`prompt_cache_key`) and the
history each consultation carried, which the advisor drill reads back.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from standin import BodyLog, serve

from support.standin_openai import StandinOpenAI


class RecordingProvider(StandinOpenAI):
    """The stand-in, appending each chat body to RECORD as it arrives."""

    def __init__(self, record: Path, port: int) -> None:
        super().__init__(port=port)
        self._log = BodyLog(record, "/chat/completions")

    def _record(self, method: str, path: str, headers: dict[str, str], body: Any) -> None:
        super()._record(method, path, headers, body)
        self._log(method, path, body)


if __name__ == "__main__":
    serve(RecordingProvider, 8766, __doc__)
