"""Read-write locks: made of the same Lock objects as the mutex, each side
over a native Lock of another kind (python/src/rwlock.rs), so waiting,
owners, ``with``, renewal and loss are the mutex's."""

from __future__ import annotations

from typing import Generic, TypeVar

from . import _native
from ._lock import AsyncLock, Lock

_L = TypeVar("_L", Lock, AsyncLock)


class _Sides(Generic[_L]):
    __slots__ = ("_read", "_write")

    def __init__(self, read: _L, write: _L) -> None:
        self._read: _L = read
        self._write: _L = write

    @property
    def name(self) -> str:
        return self._write.name

    def read(self) -> _L:
        """The read side: held by any number of readers at once, never
        with a writer. Re-enters inside this owner's read or write."""
        return self._read

    def write(self) -> _L:
        """The write side: nobody else inside. Re-enters inside this owner's
        write; raises LockUpgradeError while this owner holds only read."""
        return self._write

    def __repr__(self) -> str:
        return f"<{type(self).__module__}.{type(self).__qualname__} {self.name!r}>"


class RwLock(_Sides[Lock]):
    """A read-write lock by name, made by ``Client.rw_lock()``: ``read()``
    and ``write()`` are its sides, each a Lock acting for the calling thread
    (or, in ``async with``, task). Once a writer waits, new readers wait
    behind it, so writers never starve."""

    __slots__ = ()

    def __init__(self, native: _native.RwLock) -> None:
        super().__init__(Lock(native.read), Lock(native.write))


class AsyncRwLock(_Sides[AsyncLock]):
    """A read-write lock for asyncio, made by ``AsyncClient.rw_lock()``: its
    sides are AsyncLocks acting for the calling task."""

    __slots__ = ()

    def __init__(self, native: _native.RwLock) -> None:
        super().__init__(AsyncLock(native.read), AsyncLock(native.write))
