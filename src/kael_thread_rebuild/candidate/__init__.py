"""The new session: writing it and its manifest a record at a time (spec §7), and verifying
both from disk."""
