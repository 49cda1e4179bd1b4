"""The MCP tools as the installer's permissions see them. Generated from the engine's table of
actions by `python -m kael_thread_rebuild.interfaces.actions --write-role-tools PATH`; do not
edit (tests/test_actions.py checks that it equals the table)."""

#: Read-only tools: allowed without asking.
READ_ONLY_TOOLS = (
    'thread_rebuild_doctor',
    'thread_rebuild_dirty',
    'thread_rebuild_plan',
    'thread_rebuild_status',
)
#: Tools that change something: they must keep asking the human (never added to allow).
PROMPTING_TOOLS = (
    'thread_rebuild_request',
    'thread_rebuild_reload',
    'thread_rebuild_cancel',
    'thread_rebuild_rollback_request',
)
