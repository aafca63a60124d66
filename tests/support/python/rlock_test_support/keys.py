"""Where a lock lives in Redis, as the scripts name it: the test observes the
lock there, beside the client, not through it."""

from __future__ import annotations


def lock_key(name: str, prefix: str = "rlock") -> str:
    """The hash of lock `name`; its hash tag keeps the lock's keys in one
    Cluster slot."""
    return f"{prefix}:{{{name}}}"


class CacheKeys:
    """The keys of cache entry `key`, as the cache scripts name them
    (core/lua/cache/lib.lua): the entry (a hash), its rebuild lock (a mutex's
    hash), the last failed rebuild and the entry's channel."""

    def __init__(self, key: str, prefix: str = "rlock") -> None:
        self.entry = f"{prefix}:{{{key}}}:cached"
        self.rebuild = f"{prefix}:{{{key}}}:rebuild"
        self.failed = f"{self.entry}:failed"
        self.news = f"{self.entry}:news"
