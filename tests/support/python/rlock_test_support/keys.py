"""Where a lock lives in Redis, as the scripts name it: the test observes the
lock there, beside the client, not through it."""

from __future__ import annotations


def lock_key(name: str, prefix: str = "rlock") -> str:
    """The hash of lock `name`; its hash tag keeps the lock's keys in one
    Cluster slot."""
    return f"{prefix}:{{{name}}}"
