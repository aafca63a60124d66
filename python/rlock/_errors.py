"""The exceptions. The native module raises them by name, looking each up on
the rlock package (python/src/error.rs), so every one stays a name of it."""

from __future__ import annotations

import builtins
from typing import Optional


class LockError(Exception):
    """Base of every rlock error. Bad arguments raise ValueError / TypeError."""

    def __init__(
        self, message: str = "", *, name: Optional[str] = None, reason: Optional[str] = None
    ) -> None:
        super().__init__(message)
        #: The lock's name, when the error is about one lock.
        self.name = name
        #: Why, when the error has a reason (see LockNotOwned and LockLost).
        self.reason = reason


class LockTimeout(LockError, TimeoutError):
    """The lock was not acquired before the deadline, or was held by someone
    else on a single attempt (``blocking=False``); raised by ``with``."""


class LockNotOwned(LockError):
    """release()/extend() of a lock this owner does not hold.

    ``reason`` is ``"not acquired by this owner"`` (it never held it, or not
    since its last release), ``"already released"`` (it released it already),
    ``"expired"`` (it held it and the key is gone), ``"held by another
    owner"`` (it held it and another owner holds it now) or ``"forced"`` (it
    held it and an operator ended that holding: ``rlock unlock --force``).
    """


class LockLost(LockError):
    """The lease ended while the lock was held; raised when the ``with`` block exits.

    ``reason`` says how (key deleted or expired, max_hold reached, the ttl passed
    with auto_renew off, Redis unreachable past the lease, an operator's
    ``rlock unlock --force``).
    """


class LockUpgradeError(LockError):
    """write() of a read-write lock by an owner that holds only its read side.

    Refused at once: two owners doing so would wait on each other for ever.
    Release the read first; the other way round (write, then read, then
    release the write) is a downgrade, and allowed."""


class CacheLoaderError(LockError):
    """The rebuild of a cache entry that this caller waited for failed: its
    loader raised, in another caller (maybe another process or language),
    and nothing was stored (``on_error="share"``). ``name`` is the cache key,
    ``reason`` the loader's failure (``"ValueError: ..."`` from Python). The
    caller whose own loader raised gets that exception instead."""


class ConnectionError(LockError, builtins.ConnectionError):
    """Redis unreachable, authentication refused, or a protocol error."""


class ClientClosed(ConnectionError):
    """The client was closed: every later operation of it and of its locks
    raises this (a ConnectionError, as the client has no connection any more)."""


class LongTtlWarning(UserWarning):
    """A lock's ttl is over an hour with no max_hold: most likely milliseconds
    given where seconds are counted. Warned once per process; pass max_hold
    or allow_long_ttl=True when such a lease is meant."""


def _note(exc: BaseException, error: LockError) -> None:
    # The block's own exception propagates; the lock's trouble rides along.
    add_note = getattr(exc, "add_note", None)
    if add_note is not None:
        add_note(f"rlock: {error}")
