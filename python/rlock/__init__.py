"""redis-rlock: a Redis distributed lock with a Rust core.

    import rlock

    with rlock.lock("product:1001"):          # $REDIS_URL or redis://127.0.0.1:6379
        rebuild_cache()

    client = rlock.Client("redis://localhost:6379/0")
    with client.lock("product:1001", ttl=10, blocking_timeout=3) as held:
        save(data, fence=held.fencing_token)      # an int: the lock is held

    client = rlock.Client.from_redis(r)           # the settings of a redis-py client

    with client.rw_lock("catalog").read():        # readers share, a writer is alone
        show_catalog()
    with client.semaphore("exports", permits=4):  # at most 4 holders at once
        export()

    product = client.cached("product:1001", load_product, ttl=60)  # one load per miss

    @rlock.cached("product:{0}", ttl=60)
    def product(id): ...

A lock is owned by the client, the process and the calling thread (sync
methods) or asyncio task (``async with`` and every awaited method): the same
owner re-acquiring a name nests, any other owner waits. Durations are seconds.
As in redis-py, ``ttl=`` (redis-py's ``timeout=``) is the lease and
``blocking_timeout=`` the wait; a lock factory refuses ``timeout=``.
"""

from __future__ import annotations

from typing import Optional

# One concept per module, in the order they build on each other: each imports
# only those above it here (and _owners, _tracing, _redis_py, which import none).
from . import _native
from ._errors import (
    CacheLoaderError,
    ClientClosed,
    ConnectionError,
    LockError,
    LockLost,
    LockNotOwned,
    LockTimeout,
    LockUpgradeError,
    LongTtlWarning,
)
from ._options import LockArguments
from ._lock import AsyncHeldLock, AsyncLock, HeldLock, Lock
from ._rwlock import AsyncRwLock, RwLock
from ._semaphore import AsyncSemaphore, Semaphore
from ._cache import AsyncCachedFunction, CacheArguments, CachedFunction, Serializer
from ._jobs import SKIPPED
from ._client import AsyncClient, Client
from ._default_client import cached, lock, run_once, synchronized

__all__ = [
    "AsyncClient",
    "AsyncHeldLock",
    "AsyncLock",
    "AsyncRwLock",
    "AsyncSemaphore",
    "AsyncCachedFunction",
    "CacheArguments",
    "CacheLoaderError",
    "CachedFunction",
    "Client",
    "ClientClosed",
    "ConnectionError",
    "HeldLock",
    "Lock",
    "LockArguments",
    "LockError",
    "LockLost",
    "LockNotOwned",
    "LockTimeout",
    "LockUpgradeError",
    "LongTtlWarning",
    "RwLock",
    "Semaphore",
    "SKIPPED",
    "Serializer",
    "cached",
    "lock",
    "run_once",
    "synchronized",
]

#: The version of this build (the native module's, as Cargo built it).
__version__: str = _native.__version__

#: The client of rlock.lock() and the decorators, made on first use
#: (_default_client.py). Kept here, where setting it to None is seen there.
_default: Optional[Client] = None

# Shown as rlock.<name>, where they are meant to be imported from, by repr,
# tracebacks and help(), and pickled by that name (an exception raised in one
# process and unpickled in another): the modules they are defined in are
# private.
for _name in __all__:
    _public = globals()[_name]
    if callable(_public):  # not SKIPPED, an instance
        _public.__module__ = __name__
del _name, _public
