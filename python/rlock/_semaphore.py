"""Semaphores: made of the same Lock objects as the mutex, each over a
native Lock of another kind (python/src/semaphore.rs), so waiting, owners,
``with``, renewal and loss are the mutex's."""

from __future__ import annotations

from typing import Optional

from . import _native
from ._lock import AsyncLock, Lock, _LockBase
from ._options import _named, _suggesting, _waiting


class _Permits(_LockBase):
    """The lock taking one permit, and the semaphore it belongs to."""

    __slots__ = ("_permits",)

    def __init__(self, native: _native.Semaphore) -> None:
        super().__init__(native.lock(1))
        self._permits = native

    @property
    def size(self) -> int:
        """The permits it has."""
        return self._permits.size

    def __repr__(self) -> str:
        # The lock's, with the size.
        return f"{super().__repr__()[:-1]} size={self.size}>"


def _permits_taking(permits: _native.Semaphore, n: int) -> _native.Lock:
    """The native lock taking ``n`` of ``permits`` (checked before any I/O)."""
    try:
        return permits.lock(n)
    except TypeError as e:
        raise _named(e, {"take": "n"}) from None


class Semaphore(_Permits, Lock):
    """A counting semaphore by name, made by ``Client.semaphore()``: at most
    ``size`` permits held at once, each holding under its own lease.

    It is the Lock taking one permit (``with sem:``, release(), extend(),
    owned(), fencing_token, lost: for the calling thread or task), and
    ``lock(n)`` is the one taking n. An owner holds once: acquiring again
    re-enters its holding and takes no more permits. ``locked()`` says
    whether no permit is free."""

    __slots__ = ()

    def lock(self, n: int) -> Lock:
        """The Lock taking ``n`` permits (1 to size) for the calling owner."""
        return Lock(_permits_taking(self._permits, n))

    @_suggesting
    def acquire(
        self,
        blocking: Optional[bool] = None,
        timeout: Optional[float] = None,
        *,
        n: int = 1,
        blocking_timeout: Optional[float] = None,
    ) -> bool:
        """Acquires ``n`` permits as Lock.acquire() does; False when busy
        (blocking=False) or when ``timeout`` passed."""
        return self.lock(n).acquire(blocking, _waiting(timeout, blocking_timeout))

    def available(self) -> int:
        """Permits free now."""
        return self._permits.available()

    def held(self) -> int:
        """Permits held now, by every holder."""
        return self._permits.held()


class AsyncSemaphore(_Permits, AsyncLock):
    """A semaphore for asyncio, made by ``AsyncClient.semaphore()``: the
    AsyncLock taking one permit, acting for the calling task."""

    __slots__ = ()

    def lock(self, n: int) -> AsyncLock:
        """The AsyncLock taking ``n`` permits (1 to size) for the calling task."""
        return AsyncLock(_permits_taking(self._permits, n))

    @_suggesting
    async def acquire(
        self,
        blocking: Optional[bool] = None,
        timeout: Optional[float] = None,
        *,
        n: int = 1,
        blocking_timeout: Optional[float] = None,
    ) -> bool:
        """Acquires ``n`` permits as AsyncLock.acquire() does."""
        return await self.lock(n).acquire(blocking, _waiting(timeout, blocking_timeout))

    async def available(self) -> int:
        """Permits free now."""
        return await self._permits.available_async()

    async def held(self) -> int:
        """Permits held now, by every holder."""
        return await self._permits.held_async()
