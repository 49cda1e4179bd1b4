"""Selecting the conversation: one pass over the transcript into flat tables, the active
branch, turns, the startup snapshot, the budget and the dirty ledger."""
