"""The advisor's errors: each is one line a tool or the CLI shows as it is (the rebuild's
`KaelError`, so control characters are escaped the same way)."""

from __future__ import annotations

from kael_thread_rebuild.errors import KaelError


class AdvisorError(KaelError):
    """A refusal or failure the user is told about in one line."""


class TableError(AdvisorError):
    """The binding table cannot be read or written; the file is left as it is."""


class SessionLost(AdvisorError):
    """The Kimi Code CLI no longer knows the binding's session (`Session "…" not found`)."""
