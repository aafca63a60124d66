"""Locks: Lock and AsyncLock, and what ``with`` gives while one is held."""

from __future__ import annotations

from types import TracebackType
from typing import Optional, Type

from . import _native, _tracing
from ._errors import LockError, _note
from ._options import _suggesting, _waiting
from ._owners import _caller_units, _task_unit, _thread_unit


class _LockBase:
    __slots__ = ("_native", "__weakref__")

    def __init__(self, native: _native.Lock) -> None:
        self._native = native

    @property
    def name(self) -> str:
        return self._native.name

    @property
    def fencing_token(self) -> Optional[int]:
        """The calling owner's fencing token while it holds the lock, else None.

        Strictly larger on every fresh acquisition of the name; pass it to the
        storage you protect so it can refuse writes from a holder that lost
        the lock."""
        for unit in _caller_units():
            token = self._native.fencing_token(unit)
            if token is not None:
                return token
        return None

    @property
    def lost(self) -> bool:
        """Whether the calling owner's lease ended while it held the lock."""
        for unit in _caller_units():
            if self._native.fencing_token(unit) is not None:
                return self._native.lost(unit)
        return False

    async def _enter_task(self) -> int:
        """Acquires for the calling task (``async with``); the fencing token."""
        if not _tracing.enabled():
            acquisition = await self._native.enter_async(_task_unit())
            return acquisition.keep()
        unit = _task_unit()
        span = _tracing.start_acquire(self._native.name)
        try:
            token = (await self._native.enter_async(unit)).keep()
        except BaseException as e:
            _tracing.end_acquire(span, None, e)
            raise
        _tracing.end_acquire(span, token)
        _tracing.start_hold(self._native, unit, self._native.name, token, current=True)
        return token

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        unit = _task_unit()
        finished = self._native.finish_async(unit)
        try:
            if exc is None:
                await finished
            else:
                try:
                    await finished
                except LockError as error:
                    _note(exc, error)
        except BaseException as e:
            _tracing.end_hold(self._native, unit, e)
            raise
        _tracing.end_hold(self._native, unit, exc)

    def _traced_acquire(self, unit: str, acquired: bool) -> bool:
        """Ends the acquire span's bookkeeping for a sync or async acquire."""
        if acquired:
            token = self._native.fencing_token(unit)
            if token is not None:
                _tracing.start_hold(self._native, unit, self._native.name, token, current=False)
        return acquired

    def __repr__(self) -> str:
        n = self._native
        return (
            f"<{type(self).__module__}.{type(self).__qualname__} {n.name!r} ttl={n.ttl} "
            f"blocking_timeout={n.timeout} blocking={n.blocking} auto_renew={n.auto_renew} "
            f"max_hold={n.max_hold}>"
        )


class Lock(_LockBase):
    """A lock by name, made by ``Client.lock()`` or ``rlock.lock()``.

    Sync methods act for the calling thread; ``async with`` acts for the
    calling asyncio task and never blocks the event loop. One Lock object may
    be shared by threads and tasks: each is its own owner.
    """

    __slots__ = ()

    @_suggesting
    def acquire(
        self,
        blocking: Optional[bool] = None,
        timeout: Optional[float] = None,
        *,
        blocking_timeout: Optional[float] = None,
    ) -> bool:
        """Acquires; False when busy (blocking=False) or when ``timeout`` passed.

        ``blocking_timeout`` is ``timeout`` by redis-py's name (give one).
        Arguments left as None take the lock's own settings. The GIL is released
        while waiting, and Ctrl-C interrupts the wait."""
        timeout = _waiting(timeout, blocking_timeout)
        if not _tracing.enabled():
            return self._native.acquire(_thread_unit(), blocking, timeout)
        unit = _thread_unit()
        span = _tracing.start_acquire(self._native.name)
        try:
            acquired = self._native.acquire(unit, blocking, timeout)
        except BaseException as e:
            _tracing.end_acquire(span, None, e)
            raise
        _tracing.end_acquire(span, self._native.fencing_token(unit) if acquired else None)
        return self._traced_acquire(unit, acquired)

    def release(self) -> None:
        """Releases one acquisition; raises LockNotOwned if not held by this owner."""
        if not _tracing.enabled():
            self._native.release(_thread_unit())
            return
        unit = _thread_unit()
        try:
            self._native.release(unit)
        except BaseException as e:
            _tracing.end_hold(self._native, unit, e)
            raise
        _tracing.end_hold(self._native, unit)

    @_suggesting
    def extend(self, ttl: Optional[float] = None) -> None:
        """Resets the lease to ``ttl`` seconds (default: the lock's ttl)."""
        self._native.extend(_thread_unit(), ttl)

    def locked(self) -> bool:
        """Whether anyone holds the lock."""
        return self._native.locked()

    def owned(self) -> bool:
        """Whether the calling thread holds the lock."""
        return self._native.owned(_thread_unit())

    def __enter__(self) -> HeldLock:
        if not _tracing.enabled():
            return HeldLock(self._native, self._native.enter(_thread_unit()))
        unit = _thread_unit()
        span = _tracing.start_acquire(self._native.name)
        try:
            token = self._native.enter(unit)
        except BaseException as e:
            _tracing.end_acquire(span, None, e)
            raise
        _tracing.end_acquire(span, token)
        _tracing.start_hold(self._native, unit, self._native.name, token, current=True)
        return HeldLock(self._native, token)

    async def __aenter__(self) -> HeldLock:
        return HeldLock(self._native, await self._enter_task())

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        unit = _thread_unit()
        try:
            if exc is None:
                self._native.finish(unit)
            else:
                try:
                    self._native.finish(unit)
                except LockError as error:
                    _note(exc, error)
        except BaseException as e:
            _tracing.end_hold(self._native, unit, e)
            raise
        _tracing.end_hold(self._native, unit, exc)


class AsyncLock(_LockBase):
    """A lock by name for asyncio, made by ``AsyncClient.lock()``; every method
    acts for the calling task."""

    __slots__ = ()

    @_suggesting
    async def acquire(
        self,
        blocking: Optional[bool] = None,
        timeout: Optional[float] = None,
        *,
        blocking_timeout: Optional[float] = None,
    ) -> bool:
        """Acquires; False when busy (blocking=False) or when ``timeout`` passed.

        ``blocking_timeout`` is ``timeout`` by redis-py's name (give one).
        Cancelling the awaiting task stops the wait and leaves no lock behind."""
        timeout = _waiting(timeout, blocking_timeout)
        unit = _task_unit()
        span = _tracing.start_acquire(self._native.name)
        try:
            acquisition = await self._native.acquire_async(unit, blocking, timeout)
        except BaseException as e:
            _tracing.end_acquire(span, None, e)
            raise
        if acquisition is None:
            _tracing.end_acquire(span, None)
            return False
        token = acquisition.keep()
        _tracing.end_acquire(span, token)
        return self._traced_acquire(unit, True)

    async def release(self) -> None:
        """Releases one acquisition; raises LockNotOwned if not held by this task."""
        unit = _task_unit()
        try:
            await self._native.release_async(unit)
        except BaseException as e:
            _tracing.end_hold(self._native, unit, e)
            raise
        _tracing.end_hold(self._native, unit)

    @_suggesting
    async def extend(self, ttl: Optional[float] = None) -> None:
        """Resets the lease to ``ttl`` seconds (default: the lock's ttl)."""
        await self._native.extend_async(_task_unit(), ttl)

    async def locked(self) -> bool:
        """Whether anyone holds the lock."""
        return await self._native.locked_async()

    async def owned(self) -> bool:
        """Whether the calling task holds the lock."""
        return await self._native.owned_async(_task_unit())

    async def __aenter__(self) -> AsyncHeldLock:
        return AsyncHeldLock(self._native, await self._enter_task())


# What ``with`` and ``async with`` give while the lock is held: the same lock
# (every method acts for the calling owner, as the lock's do), whose fencing
# token is the one this acquisition got, so typed ``int``, not Optional.


class _Holding(_LockBase):
    __slots__ = ("_token",)

    def __init__(self, native: _native.Lock, token: int) -> None:
        super().__init__(native)
        self._token = token

    @property
    def fencing_token(self) -> int:
        """The fencing token of this acquisition (it stays this acquisition's
        after the release: the lock's own ``fencing_token`` answers for now)."""
        return self._token


class HeldLock(_Holding, Lock):
    """What ``with lock as held`` (and ``async with`` on a Lock) gives: the
    lock, with ``fencing_token`` the int this acquisition got."""

    __slots__ = ()


class AsyncHeldLock(_Holding, AsyncLock):
    """What ``async with lock as held`` gives on an AsyncLock: the lock, with
    ``fencing_token`` the int this acquisition got."""

    __slots__ = ()
