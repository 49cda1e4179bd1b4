"""Test support: a loopback stand-in for the Messages API and helpers that run the real binary."""
