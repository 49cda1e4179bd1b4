"""Operations: the durable record and state machine, the service the interfaces call, the worker
that prepares and switches, and recovery (spec §8)."""
