"""Copies of kael_thread_rebuild.claude_code's standard-library modules, written by `python -m
kael_thread_rebuild.claude_code.role_utils --write plugins/module_utils`; do not edit (the
installer tests check that they equal the package's files)."""
