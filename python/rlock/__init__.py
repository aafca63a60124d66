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

import asyncio
import builtins
import functools
import inspect
import itertools
import json
import logging
import os
import pickle
import string
import sys
import threading
import warnings
import weakref
from types import TracebackType
from typing import (
    TYPE_CHECKING,
    Any,
    Awaitable,
    Callable,
    Coroutine,
    Dict,
    Generator,
    Generic,
    List,
    Literal,
    Mapping,
    Optional,
    Protocol,
    Sequence,
    Set,
    Tuple,
    Type,
    TypedDict,
    TypeVar,
    Union,
    cast,
    overload,
)

from . import _native, _tracing
from ._redis_py import servers_of

if TYPE_CHECKING:
    # For the type checker only: no runtime dependency on typing_extensions.
    from typing_extensions import ParamSpec, Unpack

    _P = ParamSpec("_P")
else:
    # Python 3.9 has no ParamSpec; at run time the generics below need only
    # a type variable.
    _P = TypeVar("_P")

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

# --------------------------------------------------------------------------
# Exceptions (the native module raises these by name)


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


# --------------------------------------------------------------------------
# Owners: the process plus the calling thread or asyncio task. Units are
# serial numbers, never reused, so a new thread or task is never mistaken for
# one that ended while holding a lock.

_serials = itertools.count(1)
_thread = threading.local()
_tasks: "weakref.WeakKeyDictionary[asyncio.Task[Any], str]" = weakref.WeakKeyDictionary()


def _thread_unit() -> str:
    try:
        unit: str = _thread.unit
    except AttributeError:
        # The name as the thread had it first, for inspect() to show.
        name = threading.current_thread().name[:64]
        unit = _thread.unit = f"{os.getpid()}:t{next(_serials)}:{name}"
    return unit


def _forget_thread_units() -> None:
    """In a forked child: its threads' units name the parent process."""
    global _thread
    _thread = threading.local()


os.register_at_fork(after_in_child=_forget_thread_units)


def _running_task() -> Optional[asyncio.Task[Any]]:
    try:
        return asyncio.current_task()
    except RuntimeError:  # no running event loop in this thread
        return None


def _task_unit() -> str:
    task = _running_task()
    if task is None:  # a coroutine driven by something other than asyncio
        return _thread_unit()
    unit = _tasks.get(task)
    if unit is None:
        # Made once: a task renamed later (set_name) stays the same owner.
        unit = _tasks.setdefault(task, f"{os.getpid()}:a{next(_serials)}:{task.get_name()[:64]}")
    return unit


def _caller_units() -> Tuple[str, ...]:
    """Who may be asking about a holding: the current task, then the thread."""
    if _running_task() is None:
        return (_thread_unit(),)
    return (_task_unit(), _thread_unit())


def _note(exc: BaseException, error: LockError) -> None:
    # The block's own exception propagates; the lock's trouble rides along.
    add_note = getattr(exc, "add_note", None)
    if add_note is not None:
        add_note(f"rlock: {error}")


_F = TypeVar("_F", bound=Callable[..., Any])


# --------------------------------------------------------------------------
# A lock's options: declared, with their defaults, by the native LockSpec()
# (python/src/lock.rs); typed here for every function that takes them.


class LockArguments(TypedDict, total=False):
    """The keyword arguments of ``Client.lock()`` and every function like it.

    ttl: the lease in seconds, renewed every ttl/3 while held (auto_renew);
    redis-py's ``timeout=``.
    blocking_timeout: how long acquire() and ``with`` wait; None waits
    forever (redis-py's name and meaning). ``timeout=`` is refused: in
    redis-py it is the lease, and a port that kept it would wait instead.
    blocking: False makes acquire() and ``with`` try exactly once.
    auto_renew: renew the lease while held (the watchdog).
    max_hold: cap on the total hold time; the lease is not renewed beyond it.
    sync_replicas: after each acquisition and each extend(), wait (``WAIT``)
    until this many replicas have it; an acquisition fewer acknowledged is
    undone and retried, so a wait that ends that way is a timeout.
    fair: waiters queue in Redis and each release hands the lock to the
    next one in line (first come, first served; nobody barges in).
    queue_after: when not fair, seconds a waiter competes for releases
    before it takes a place in that line (None: 0.01; 0: at once).
    """

    ttl: float
    blocking_timeout: Optional[float]
    blocking: bool
    auto_renew: bool
    max_hold: Optional[float]
    sync_replicas: Optional[int]
    fair: bool
    queue_after: Optional[float]
    #: A ttl over an hour without max_hold warns once (LongTtlWarning)
    #: unless this says it is meant.
    allow_long_ttl: bool


def _lock_spec(name: str, options: Mapping[str, Any], made_by: str) -> _native.LockSpec:
    """``options`` checked (before any I/O) for a lock on ``name`` that
    ``made_by`` (``"client.lock()"``) makes. The wait is ``blocking_timeout=``
    (redis-py's name), the native LockSpec's ``timeout=``."""
    if "timeout" in options:
        raise TypeError(
            f"{made_by} takes no timeout=: the lease is ttl= (redis-py's timeout=), "
            "the wait is blocking_timeout= (as in redis-py)"
        )
    native = {("timeout" if k == "blocking_timeout" else k): v for k, v in options.items()}
    try:
        spec = _native.LockSpec(name, **native)
    except TypeError as e:
        _refuse_unknown_keywords(options, _LOCK_OPTIONS)
        raise _named(e, {"timeout": "blocking_timeout"}) from None
    warning = spec.long_ttl_warning()
    if warning is not None:
        warnings.warn(warning, LongTtlWarning, stacklevel=_callers_level())
    return spec


def _keywords(takes: Callable[..., Any]) -> List[str]:
    """The keywords ``takes`` accepts; its first positional parameter (the
    lock's name, or self) is never one."""
    parameters = list(inspect.signature(takes).parameters.values())
    if parameters and parameters[0].kind is not parameters[0].KEYWORD_ONLY:
        parameters = parameters[1:]
    return [p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


#: The options of a lock factory: the native LockSpec's, its ``timeout`` as
#: redis-py names the wait.
_LOCK_OPTIONS = [
    "blocking_timeout" if k == "timeout" else k for k in _keywords(_native.LockSpec)
]


def _refuse_unknown_keywords(given: Mapping[str, Any], known: Sequence[str]) -> None:
    """Raises the TypeError of the first keyword in ``given`` that ``known``
    does not name, naming the closest one it does (the core's choice), as a
    misspelt option would otherwise be a bare "unexpected keyword"."""
    for key in given:
        if key not in known:
            near = _native.closest_option(key, list(known))
            hint = f" (did you mean {near!r}?)" if near is not None else ""
            raise TypeError(f"unexpected keyword argument {key!r}{hint}") from None


_PROCESSING = "while processing '"


def _named(error: TypeError, spelled: Mapping[str, str] = {}) -> TypeError:
    """``error``, raised by the native module about an argument's value
    ("must be an int, got float"), with the argument named in front
    ("permits must be an int, got float"): PyO3 names it only in a note
    ("while processing 'permits'"), which a message shown alone loses.
    ``spelled`` maps a native parameter to the name the caller used."""
    for note in getattr(error, "__notes__", ()):
        if isinstance(note, str) and note.startswith(_PROCESSING) and note.endswith("'"):
            argument = note[len(_PROCESSING) : -1]
            argument = spelled.get(argument, argument)
            message = str(error)
            if message.startswith("must be "):
                return TypeError(f"{argument} {message}")
            return TypeError(f"{argument}: {message}")
    return error


def _suggesting(method: _F) -> _F:
    """``method`` (a function or a coroutine function), whose misspelt
    keywords raise the TypeError of _refuse_unknown_keywords, and whose
    arguments of a wrong type raise one naming the argument (_named)."""

    def refused(e: TypeError, kwargs: Mapping[str, Any]) -> TypeError:
        _refuse_unknown_keywords(kwargs, _keywords(method))
        return _named(e)

    @functools.wraps(method)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            result = method(*args, **kwargs)
        except TypeError as e:
            raise refused(e, kwargs) from None
        if not inspect.iscoroutine(result):
            return result

        # An async method's native call raises where it is awaited.
        async def awaited() -> Any:
            try:
                return await result
            except TypeError as e:
                raise refused(e, kwargs) from None

        return awaited()

    return cast(_F, call)


def _waiting(timeout: Optional[float], blocking_timeout: Optional[float]) -> Optional[float]:
    """The wait of one acquire(), given as ``timeout=`` (threading.Lock's
    name) or ``blocking_timeout=`` (redis-py's), never both."""
    if blocking_timeout is None:
        return timeout
    if timeout is not None:
        raise TypeError(
            "acquire() takes the wait as timeout= or blocking_timeout= (the same), not both"
        )
    return blocking_timeout


def _callers_level() -> int:
    """The ``stacklevel`` of the first frame outside this module, for a
    warning raised by a function of it: the line a user wrote."""
    level = 1
    frame = sys._getframe(1)
    while frame.f_back is not None and frame.f_code.co_filename == __file__:
        frame = frame.f_back
        level += 1
    return level


# --------------------------------------------------------------------------
# Locks


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


# --------------------------------------------------------------------------
# Read-write locks and semaphores: made of the same Lock objects as the mutex,
# each over a native Lock of another kind (python/src/rwlock.rs, semaphore.rs),
# so waiting, owners, ``with``, renewal and loss are the mutex's.

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


# --------------------------------------------------------------------------
# Cached: the cache-aside read with one load per miss. Who loads, who waits
# and what gets written are the core's (python/src/cache.rs); this face runs
# the loader, encodes its value and tags it with a format every face reads.

_log = logging.getLogger("rlock")

_T = TypeVar("_T")
_R = TypeVar("_R")
_R_co = TypeVar("_R_co", covariant=True)


class Serializer(Protocol):
    """A serializer of your own for ``cached(..., serializer=...)``: values
    are written with ``dumps`` tagged ``format`` (neither ``"bytes"`` nor
    ``"text"``), and entries of that tag read back with ``loads``. bytes and
    str values never reach it: they are stored as they are."""

    format: str

    def dumps(self, value: Any) -> bytes: ...

    def loads(self, data: bytes) -> Any: ...


class _CacheRequired(TypedDict):
    ttl: float


class CacheArguments(_CacheRequired, total=False):
    """The keyword arguments of ``Client.cached()``, ``AsyncClient.cached()``
    and ``rlock.cached()``; seconds as floats, checked before any I/O.

    ttl (required): how long an entry stays fresh, less a random share of
    up to ``jitter``.
    stale: after the ttl, how long the old value is still returned at once
    while one caller refreshes it in the background (None: no window).
    none_ttl: how long a loader's None ("nothing found") is kept (None: 10 s,
    at most the ttl).
    jitter: the share of the ttl taken off at random, 0 to below 1 (None: 0.1).
    early: early refresh (XFetch's beta; 0: never early; None: 1.0).
    timeout: how long a caller waits for another caller's load, then
    LockTimeout (None: as long as it takes).
    on_error: what waiters of a failed load do: ``"share"`` its failure
    (CacheLoaderError) or ``"retry"`` (one of them loads next).
    lock_ttl: the lease of the rebuild lock, renewed while the loader runs
    (None: 30 s).
    serializer: how values other than bytes and str are stored: ``"json"``,
    ``"pickle"`` (read back only by callers that say ``"pickle"`` too), or
    a Serializer of your own.
    """

    stale: Optional[float]
    none_ttl: Optional[float]
    jitter: Optional[float]
    early: Optional[float]
    timeout: Optional[float]
    on_error: Literal["share", "retry"]
    lock_ttl: Optional[float]
    serializer: Union[Literal["json", "pickle"], Serializer]


class CachedFunction(Protocol[_P, _R_co]):
    """A function decorated with ``rlock.cached``: called as before, plus
    ``invalidate()`` of the entry the same arguments read."""

    __name__: str
    __qualname__: str

    def __call__(self, *args: _P.args, **kwargs: _P.kwargs) -> _R_co: ...

    def invalidate(self, *args: _P.args, **kwargs: _P.kwargs) -> bool: ...


class AsyncCachedFunction(Protocol[_P, _R_co]):
    """An async function decorated with ``rlock.cached``: awaited as before,
    plus an awaitable ``invalidate()``."""

    __name__: str
    __qualname__: str

    def __call__(self, *args: _P.args, **kwargs: _P.kwargs) -> Coroutine[Any, Any, _R_co]: ...

    def invalidate(self, *args: _P.args, **kwargs: _P.kwargs) -> Coroutine[Any, Any, bool]: ...


class _CacheDecorator(Protocol):
    # An async function is also a function returning an awaitable: the first
    # overload wins for it, as meant.
    @overload
    def __call__(  # type: ignore[overload-overlap]
        self, fn: Callable[_P, Awaitable[_R]]
    ) -> AsyncCachedFunction[_P, _R]: ...

    @overload
    def __call__(self, fn: Callable[_P, _R]) -> CachedFunction[_P, _R]: ...


class _Codec:
    """A serializer, and the format tag it writes."""

    __slots__ = ("format", "dumps", "loads")

    def __init__(
        self, format: str, dumps: Callable[[Any], Any], loads: Callable[[bytes], Any]
    ) -> None:
        self.format = format
        self.dumps = dumps
        self.loads = loads

    def encode(self, key: str, value: Any) -> Tuple[Optional[bytes], str]:
        """``value`` as stored: bytes and str as they are, None as nothing
        found, anything else by this serializer. TypeError for a value it
        cannot encode."""
        if value is None:
            return None, self.format
        try:
            if isinstance(value, (bytes, bytearray)):
                return bytes(value), "bytes"
            if isinstance(value, str):
                return value.encode("utf-8"), "text"
            data = self.dumps(value)
            if isinstance(data, str):
                data = data.encode("utf-8")
            if not isinstance(data, bytes):
                raise TypeError(f"dumps() gave {type(data).__name__}, not bytes")
            return data, self.format
        except Exception as e:
            raise TypeError(
                f"cache entry {key!r}: the loader's value ({type(value).__name__}) "
                f"cannot be stored as {self.format}: {e}"
            ) from e

    def decode(self, key: str, data: Optional[bytes], format: str) -> Any:
        """An entry as stored, by its format tag."""
        if data is None:
            return None
        if format == "bytes":
            return data
        if format == "text":
            return data.decode("utf-8")
        if format == self.format:
            return self.loads(data)
        if format == "json":
            return json.loads(data)
        if format == "pickle":
            raise ValueError(
                f"cache entry {key!r} holds a pickle: read it with serializer=\"pickle\" "
                "(unpickling can run any code, so it is never done unasked)"
            )
        raise ValueError(
            f"cache entry {key!r} holds format {format!r}, which this reader cannot decode "
            f"(its serializer reads {self.format!r})"
        )


def _json_dumps(value: Any) -> bytes:
    # Strict JSON (no NaN): what JSON.parse in Node reads.
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


def _pickle_dumps(value: Any) -> bytes:
    return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)


_JSON = _Codec("json", _json_dumps, json.loads)
_PICKLE = _Codec("pickle", _pickle_dumps, pickle.loads)


def _codec(serializer: Any) -> _Codec:
    if isinstance(serializer, str):
        if serializer == "json":
            return _JSON
        if serializer == "pickle":
            return _PICKLE
        raise ValueError(
            f"serializer must be \"json\", \"pickle\" or an object with format, dumps() "
            f"and loads(), got {serializer!r}"
        )
    format = getattr(serializer, "format", None)
    dumps = getattr(serializer, "dumps", None)
    loads = getattr(serializer, "loads", None)
    if not (isinstance(format, str) and callable(dumps) and callable(loads)):
        raise TypeError(
            "serializer must be \"json\", \"pickle\" or an object with a str format, "
            f"dumps() and loads(), got {type(serializer).__name__}"
        )
    if format in ("", "bytes", "text"):
        raise ValueError(
            f"a serializer's format must be a name other than \"bytes\" and \"text\" "
            f"(bytes and str values are stored as they are), got {format!r}"
        )
    return _Codec(format, dumps, loads)


def _cache_plan(options: Mapping[str, Any]) -> Tuple[_native.CacheSpec, _Codec]:
    """``options`` checked (before any I/O): the entry's, and the serializer."""
    rest = dict(options)
    codec = _codec(rest.pop("serializer", "json"))
    try:
        spec = _native.CacheSpec(**rest)
    except TypeError as e:
        _refuse_unknown_keywords(options, _keywords(_native.CacheSpec) + ["serializer"])
        raise _named(e) from None
    return spec, codec


def _callable_loader(loader: object) -> None:
    if not callable(loader):
        raise TypeError(
            f"loader must be callable with no arguments, got {type(loader).__name__}"
        )


def _is_async(fn: object) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)
    )


def _fail(rebuild: _native.Rebuild, error: BaseException) -> None:
    """Tells the callers waiting for ``rebuild`` that its loader raised
    ``error``; trouble telling them rides along on ``error``."""
    try:
        rebuild.fail(f"{type(error).__name__}: {error}")
    except LockError as trouble:
        _note(error, trouble)


async def _fail_async(rebuild: _native.Rebuild, error: BaseException) -> None:
    try:
        await rebuild.fail_async(f"{type(error).__name__}: {error}")
    except LockError as trouble:
        _note(error, trouble)


def _cached(cache: _native.Cache, loader: Callable[[], Any], codec: _Codec) -> Any:
    """The entry's value: from the cache, or from ``loader`` in this thread
    when this caller is the one to load (a refresh runs it in a thread of
    its own while this caller returns the current value)."""
    kind, data, format, _fence, rebuild = cache.read()
    if rebuild is None:
        return codec.decode(cache.key, data, format)
    if kind == "load":
        return _load(cache.key, rebuild, loader, codec)
    try:
        current = codec.decode(cache.key, data, format)
    except BaseException:
        rebuild.abandon()
        raise
    threading.Thread(
        target=_refresh,
        args=(cache.key, rebuild, loader, codec),
        name=f"rlock-refresh {cache.key}",
        daemon=True,
    ).start()
    return current


def _load(key: str, rebuild: _native.Rebuild, loader: Callable[[], Any], codec: _Codec) -> Any:
    try:
        value = loader()
        if inspect.isawaitable(value):
            close = getattr(value, "close", None)
            if close is not None:
                close()  # never awaited, and it says nothing of it
            raise TypeError(
                "the loader returned an awaitable: pass an async def function "
                "(or an AsyncClient) to await it"
            )
        data, format = codec.encode(key, value)
    except Exception as e:
        _fail(rebuild, e)
        raise
    except BaseException:
        # Interrupted: nothing to tell the waiters, who try again.
        rebuild.abandon()
        raise
    # The value goes to this caller whatever became of the write.
    _stored(key, rebuild.store(data, format))
    return value


def _stored(key: str, outcome: str) -> None:
    if outcome == "unknown":
        _log.warning("rlock: cache entry %r may not have been stored: Redis did not answer", key)


def _refresh(key: str, rebuild: _native.Rebuild, loader: Callable[[], Any], codec: _Codec) -> None:
    try:
        _load(key, rebuild, loader, codec)
    except Exception as e:
        _log.warning("rlock: refreshing cache entry %r failed: %s: %s", key, type(e).__name__, e)


async def _cached_async(
    cache: _native.Cache, loader: Callable[[], Awaitable[Any]], codec: _Codec
) -> Any:
    """``_cached`` for asyncio: the refresh runs as a task of its own."""
    kind, data, format, _fence, rebuild = await cache.read_async()
    if rebuild is None:
        return codec.decode(cache.key, data, format)
    if kind == "load":
        return await _load_async(cache.key, rebuild, loader, codec)
    try:
        current = codec.decode(cache.key, data, format)
    except BaseException:
        rebuild.abandon()
        raise
    task = asyncio.get_running_loop().create_task(
        _refresh_async(cache.key, rebuild, loader, codec)
    )
    # The loop keeps only a weak reference to a task.
    _refreshing.add(task)
    task.add_done_callback(_refreshing.discard)
    return current


_refreshing: "Set[asyncio.Task[None]]" = set()


async def _load_async(
    key: str, rebuild: _native.Rebuild, loader: Callable[[], Awaitable[Any]], codec: _Codec
) -> Any:
    try:
        value = await loader()
        data, format = codec.encode(key, value)
    except Exception as e:
        await _fail_async(rebuild, e)
        raise
    except BaseException:
        # Cancelled: nothing to tell the waiters, who try again.
        rebuild.abandon()
        raise
    _stored(key, await rebuild.store_async(data, format))
    return value


async def _refresh_async(
    key: str, rebuild: _native.Rebuild, loader: Callable[[], Awaitable[Any]], codec: _Codec
) -> None:
    try:
        await _load_async(key, rebuild, loader, codec)
    except Exception as e:
        _log.warning("rlock: refreshing cache entry %r failed: %s: %s", key, type(e).__name__, e)


def _awaited(loader: Callable[[], Any]) -> Callable[[], Awaitable[Any]]:
    """``loader`` as a coroutine function: itself if it is one; else called
    in a worker thread (a sync loader's database call must not stop the
    event loop), its result awaited if it is awaitable."""
    if _is_async(loader):
        return cast(Callable[[], Awaitable[Any]], loader)

    async def in_a_thread() -> Any:
        value = await asyncio.to_thread(loader)
        if inspect.isawaitable(value):
            value = await value
        return value

    return in_a_thread


def _template(key: object) -> str:
    """``key`` if it is a key template; TypeError if it is neither that nor
    a function."""
    if not isinstance(key, str):
        raise TypeError(
            f"key must be a str template such as \"product:{{0}}\" or a callable, "
            f"got {type(key).__name__}"
        )
    return key


def _key_maker(key: object, fn: Callable[..., Any]) -> Callable[[Tuple[Any, ...], Dict[str, Any]], str]:
    """How the decorated ``fn`` names the entry of one call: ``key(*args,
    **kwargs)``, or the template ``key`` formatted with the call's arguments
    (by position and by parameter name, defaults applied)."""
    if callable(key):
        make = key
        return lambda args, kwargs: make(*args, **kwargs)
    template = _template(key)
    signature = inspect.signature(fn)
    params = list(signature.parameters.values())
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    spreads = {p.kind for p in params} & {inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD}
    for _, field, _, _ in string.Formatter().parse(template):  # ValueError if malformed
        if not field:
            continue
        root = field.split(".", 1)[0].split("[", 1)[0]
        known = (int(root) < len(positional)) if root.isdigit() else root in signature.parameters
        if not known and not spreads:
            raise ValueError(
                f"key template {template!r} names {{{root}}}, which is no parameter "
                f"of {getattr(fn, '__qualname__', fn)}{signature}"
            )

    def make_key(args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> str:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        named = dict(bound.arguments)
        for p in params:
            if p.kind is p.VAR_KEYWORD:
                named.update(named.pop(p.name, {}))
        return template.format(*bound.args, **named)

    return make_key


# --------------------------------------------------------------------------
# Clients


_Urls = Union[str, Sequence[str]]
_TlsCa = Union[str, "os.PathLike[str]", bytes]


def _url_list(url: Optional[_Urls]) -> Optional[List[str]]:
    if url is None:
        return None
    if isinstance(url, str):
        return [url]
    if not isinstance(url, (list, tuple)):
        hint = ""
        if type(url).__module__.split(".")[0] == "redis":
            hint = " (for the settings of a redis-py client: Client.from_redis(r))"
        raise TypeError(f"url must be a str or a list of str, got {type(url).__name__}{hint}")
    for item in url:
        if not isinstance(item, str):
            raise TypeError(f"every URL must be a str, got {type(item).__name__}")
    return list(url)


def _pem(tls_ca: Optional[_TlsCa]) -> Optional[bytes]:
    if tls_ca is None or isinstance(tls_ca, bytes):
        return tls_ca
    if isinstance(tls_ca, (str, os.PathLike)):
        with open(tls_ca, "rb") as f:
            return f.read()
    raise TypeError(
        f"tls_ca must be a path (str or os.PathLike) or PEM bytes, got {type(tls_ca).__name__}"
    )


_C = TypeVar("_C", bound="_ClientBase")


def _semaphore(client: _native.Client, spec: _native.LockSpec, permits: int) -> _native.Semaphore:
    """The native semaphore of ``permits`` (checked before any I/O)."""
    try:
        return client.semaphore(spec, permits)
    except TypeError as e:
        raise _named(e) from None


# --------------------------------------------------------------------------
# Run-once jobs (docs/behaviour.md#run-once-jobs): the core takes the job's
# lock in one attempt and keeps it until at_least; this runs the function.


class _Skipped:
    """What a run-once job's call returns when the job ran elsewhere this
    period: ``rlock.SKIPPED``, false in a boolean test."""

    _made = False

    def __new__(cls) -> "_Skipped":
        if cls._made:
            raise TypeError("rlock.SKIPPED is the one value of its kind")
        cls._made = True
        return super().__new__(cls)

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "rlock.SKIPPED"


#: Returned by ``run_once`` when the job ran elsewhere this period.
SKIPPED = _Skipped()


def _run_once(native: Any, name: str, fn: Callable[..., _T], args: Sequence[Any],
              kwargs: Mapping[str, Any], at_least: Optional[float], at_most: Optional[float]) -> Any:
    job = native.start_job(name, at_least, at_most)
    if job is None:
        return SKIPPED
    try:
        value = fn(*args, **kwargs)
    except BaseException as exc:
        # The job's lock is kept all the same: the next run is next period's.
        # The job's own exception propagates; the lock's trouble rides along.
        try:
            job.finish()
        except LockError as e:
            _note(exc, e)
        raise
    job.finish()
    return value


async def _run_once_async(native: Any, name: str, fn: Callable[..., Any], args: Sequence[Any],
                          kwargs: Mapping[str, Any], at_least: Optional[float],
                          at_most: Optional[float]) -> Any:
    job = await native.start_job_async(name, at_least, at_most)
    if job is None:
        return SKIPPED
    try:
        value = fn(*args, **kwargs)
        if inspect.isawaitable(value):
            value = await value
    except BaseException as exc:
        try:
            await job.finish_async()
        except LockError as e:
            _note(exc, e)
        raise
    await job.finish_async()
    return value


class _ClientBase:
    __slots__ = ("_native",)

    @_suggesting
    def __init__(
        self,
        url: Optional[_Urls] = None,
        *,
        prefix: str = "rlock",
        cluster: bool = False,
        tls_ca: Optional[_TlsCa] = None,
    ) -> None:
        """``url``: ``redis://[[user]:password@]host[:port][/db]``, ``rediss://``
        (TLS) or ``redis+sentinel://host:port[,host:port]/service[/db]``; None
        reads ``$REDIS_URL``, else ``redis://127.0.0.1:6379``. A list of URLs
        is a Redlock over independent masters (a lock is held on a majority),
        or with ``cluster=True`` the seed nodes of one Redis Cluster.
        ``tls_ca``: the CA certificate that signed the servers' (a PEM file's
        path, or its bytes) for ``rediss://`` servers with a private CA.
        Checked here; the connection is made on first use."""
        self._native = _native.Client(_url_list(url), prefix, cluster, _pem(tls_ca))

    @classmethod
    @_suggesting
    def from_redis(
        cls: Type[_C], r: object, *, prefix: str = "rlock", tls_ca: Optional[_TlsCa] = None
    ) -> _C:
        """A client of the server(s) the redis-py client ``r`` talks to:
        ``redis.Redis``, ``redis.asyncio.Redis``, ``redis.cluster.RedisCluster``,
        ``redis.asyncio.cluster.RedisCluster`` or a Sentinel-managed
        ``Sentinel(...).master_for(name)``, whose host, port, db, user,
        password and TLS (and CA certificate, unless ``tls_ca`` is given) it
        reads. It opens connections of its own: ``r``'s pool is not shared."""
        urls, cluster, ca = servers_of(r)
        return cls(urls, prefix=prefix, cluster=cluster, tls_ca=ca if tls_ca is None else tls_ca)

    @property
    def closed(self) -> bool:
        return self._native.closed

    def stats(self) -> Dict[str, Any]:
        """What this client counted since it connected (no I/O): ``acquisitions``,
        ``contended_acquisitions``, ``timeouts``, ``releases``, ``renewals``,
        ``renewal_round_trips``, ``renewal_failures``, ``reconnects``, ``lost``
        (by reason), and the ``wait`` and ``hold`` histograms (``count``,
        ``sum_ms``, ``buckets``: ``[le_seconds, cumulative]`` pairs, the last
        bound None for +Inf)."""
        return cast(Dict[str, Any], json.loads(self._native.stats()))

    def prometheus(self) -> str:
        """stats() in the Prometheus text exposition format (``rlock_*``), to
        serve beside an application's own metrics."""
        return self._native.prometheus()

    def __repr__(self) -> str:
        n = self._native
        cluster = ", cluster=True" if n.cluster else ""
        return f"rlock.{type(self).__name__}({n.server!r}, prefix={n.prefix!r}{cluster})"


class Client(_ClientBase):
    """A connection to Redis shared by every lock made from it. Thread-safe."""

    __slots__ = ()

    def lock(self, name: str, **options: Unpack[LockArguments]) -> Lock:
        """A lock on ``name``, made to ``options`` (see LockArguments)."""
        return Lock(self._native.lock(_lock_spec(name, options, "client.lock()")))

    def rw_lock(self, name: str, **options: Unpack[LockArguments]) -> RwLock:
        """A read-write lock on ``name``; options as lock(), for each side."""
        return RwLock(self._native.rw_lock(_lock_spec(name, options, "client.rw_lock()")))

    def semaphore(self, name: str, permits: int, **options: Unpack[LockArguments]) -> Semaphore:
        """A semaphore on ``name`` of ``permits`` permits (1 to 1 000 000;
        every user of the name must give the same while anyone holds it);
        options as lock(), for each holding."""
        spec = _lock_spec(name, options, "client.semaphore()")
        return Semaphore(_semaphore(self._native, spec, permits))

    # One signature serves both kinds of loader: an async def loader's _T is
    # the coroutine, which is what this returns for it.
    def cached(self, key: str, loader: Callable[[], _T], **options: Unpack[CacheArguments]) -> _T:
        """The value of the cache entry ``key``: from Redis, or from
        ``loader()`` (no arguments), which one caller across every process
        runs on a miss while the others wait for the value it stores. A
        loader returning None stores "nothing found" (for ``none_ttl``); one
        that raises stores nothing: its exception reaches this caller, and
        the callers waiting for it get CacheLoaderError. Options: see
        CacheArguments (``ttl`` required). Checked before any I/O.

        As the loader is, so is the call: with an ``async def`` loader it
        returns an awaitable of the value (waiting without blocking the
        event loop)."""
        _callable_loader(loader)
        spec, codec = _cache_plan(options)
        cache = self._native.cache(key, spec)
        if _is_async(loader):
            return cast(_T, _cached_async(cache, cast(Callable[[], Awaitable[Any]], loader), codec))
        return cast(_T, _cached(cache, loader, codec))

    def inspect(self, name: str) -> Dict[str, Any]:
        """Who holds the lock ``name`` and who waits for it, as Redis has it
        now: ``held``, ``owner``, ``ttl_ms`` (lease left), ``count``
        (re-entries), ``fence``, ``held_ms`` (since the holding began),
        ``waiting``, and ``holder`` and ``waiters`` as parties: ``owner``,
        ``client_id``, ``waited_ms`` (a waiter's time in line; None for a holder), ``unit`` (``pid:tN:thread-name`` or ``pid:aN:task-name``
        in Python; a handle's or scope's serial in Node) and ``client``, what
        that client registered (``host``, ``pid``, ``process``, ``face``,
        ``version``, ``since_ms``), None once its registration ran out."""
        return cast(Dict[str, Any], json.loads(self._native.inspect(name)))

    def invalidate(self, key: str) -> bool:
        """Deletes the cache entry ``key``, so the next read loads it again;
        a load running meanwhile (which may have read older data) never
        writes. Whether there was an entry."""
        return self._native.invalidate(key)

    def run_once(self, name: str, fn: Callable[..., _T], *args: Any, at_least: Optional[float] = None,
                 at_most: Optional[float] = None, **kwargs: Any) -> Union[_T, _Skipped]:
        """Runs ``fn(*args, **kwargs)`` as the run-once job ``name``: here,
        if this process takes the job's lock (one attempt, never a wait),
        returning its value; else at once ``rlock.SKIPPED``. The lock stays
        taken until ``at_least`` seconds after the start (default 0), also
        when ``fn`` raises, so nobody runs the job again this period; it is
        taken for ``at_most`` seconds (default 3600), not renewed: past it
        while ``fn`` runs, it is lost (LockLost, raised after ``fn`` returns)
        and another process may run the job, and a process that dies while
        its job runs holds it that long. Checked before any I/O."""
        return _run_once(self._native, name, fn, args, kwargs, at_least, at_most)

    def close(self) -> None:
        """Closes the client: locks still held are released (best effort: one
        Redis does not release within 2 s expires with its lease) and count as
        lost (``lock.lost``; a ``with`` block still open raises LockLost), waits
        in progress end, renewals stop, the connections close, and every later
        call of the client or its locks raises rlock.ClientClosed. Returns
        once the releases are done. Closing again does nothing."""
        self._native.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        self.close()


class AsyncClient(_ClientBase):
    """Like Client, for asyncio: its locks' methods are coroutines."""

    __slots__ = ()

    def lock(self, name: str, **options: Unpack[LockArguments]) -> AsyncLock:
        """A lock on ``name``; the arguments are those of Client.lock()."""
        return AsyncLock(self._native.lock(_lock_spec(name, options, "client.lock()")))

    def rw_lock(self, name: str, **options: Unpack[LockArguments]) -> AsyncRwLock:
        """A read-write lock on ``name``; the arguments are those of Client.rw_lock()."""
        return AsyncRwLock(self._native.rw_lock(_lock_spec(name, options, "client.rw_lock()")))

    def semaphore(
        self, name: str, permits: int, **options: Unpack[LockArguments]
    ) -> AsyncSemaphore:
        """A semaphore on ``name``; the arguments are those of Client.semaphore()."""
        spec = _lock_spec(name, options, "client.semaphore()")
        return AsyncSemaphore(_semaphore(self._native, spec, permits))

    @overload
    def cached(
        self,
        key: str,
        loader: Callable[[], Awaitable[_T]],
        **options: Unpack[CacheArguments],
    ) -> Coroutine[Any, Any, _T]: ...

    @overload
    def cached(
        self, key: str, loader: Callable[[], _T], **options: Unpack[CacheArguments]
    ) -> Coroutine[Any, Any, _T]: ...

    def cached(
        self, key: str, loader: Callable[[], Any], **options: Any
    ) -> Coroutine[Any, Any, Any]:
        """A coroutine of the value of the cache entry ``key``, as
        Client.cached() gives it. An ``async def`` loader is awaited; a sync
        one runs in a worker thread (``asyncio.to_thread``), so a blocking
        database call never stops the event loop. A refresh runs as a task of
        its own. The arguments are checked here, before any I/O."""
        _callable_loader(loader)
        spec, codec = _cache_plan(options)
        return _cached_async(self._native.cache(key, spec), _awaited(loader), codec)

    async def inspect(self, name: str) -> Dict[str, Any]:
        """Client.inspect(), awaited."""
        return cast(Dict[str, Any], json.loads(await self._native.inspect_async(name)))

    async def invalidate(self, key: str) -> bool:
        """Client.invalidate(), awaited."""
        return await self._native.invalidate_async(key)

    async def run_once(self, name: str, fn: Callable[..., Any], *args: Any,
                       at_least: Optional[float] = None, at_most: Optional[float] = None,
                       **kwargs: Any) -> Any:
        """Client.run_once(), awaited: ``fn`` an ``async def`` (awaited) or
        a plain function (called on the event loop's thread)."""
        return await _run_once_async(self._native, name, fn, args, kwargs, at_least, at_most)

    def close(self) -> Awaitable[None]:
        """Closes the client as Client.close() does, at once, and returns an
        awaitable of the releases' end: ``await aclient.close()`` waits for
        them without blocking the event loop (as aclose() does); the client is
        closed even if it is never awaited. Called with no event loop running,
        it returns once the releases are done."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            self._native.close()
            return _Done()
        return self._native.close_async()

    async def aclose(self) -> None:
        """close(), awaited."""
        await self.close()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        await self.aclose()


class _Done:
    """An awaitable of what already happened."""

    __slots__ = ()

    def __await__(self) -> Generator[Any, None, None]:
        yield from ()


# --------------------------------------------------------------------------
# The default client

_default: Optional[Client] = None
_default_guard = threading.Lock()


def _default_client() -> Client:
    global _default
    if _default is None:
        with _default_guard:
            if _default is None:
                _default = Client()
    return _default


def lock(name: str, **options: Unpack[LockArguments]) -> Lock:
    """A lock from the default client (``$REDIS_URL``, else
    ``redis://127.0.0.1:6379``, created on first use); arguments as Client.lock()."""
    spec = _lock_spec(name, options, "rlock.lock()")
    return Lock(_default_client()._native.lock(spec))


def synchronized(name: str, **options: Unpack[LockArguments]) -> Callable[[_F], _F]:
    """Runs each call of the decorated function (sync or async) under the lock
    ``name`` of the default client; arguments as Client.lock(), checked here."""
    spec = _lock_spec(name, options, "rlock.synchronized()")

    def decorate(fn: _F) -> _F:
        made: List[Lock] = []

        def the_lock() -> Lock:
            # Made on the first call, so the default client reads $REDIS_URL then.
            if not made:
                made.append(Lock(_default_client()._native.lock(spec)))
            return made[0]

        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def run_async(*args: Any, **kwargs: Any) -> Any:
                async with the_lock():
                    return await fn(*args, **kwargs)

            return cast(_F, run_async)

        @functools.wraps(fn)
        def run(*args: Any, **kwargs: Any) -> Any:
            with the_lock():
                return fn(*args, **kwargs)

        return cast(_F, run)

    return decorate


def run_once(name: str, *, at_least: Optional[float] = None,
             at_most: Optional[float] = None) -> Callable[[_F], _F]:
    """Runs each call of the decorated function (sync or async) as the
    run-once job ``name`` of the default client (see Client.run_once()): the
    function's value where it ran, ``rlock.SKIPPED`` elsewhere, at once. For
    a job every process schedules (a cron line on each machine, a timer in
    each replica) that must run once per period: ``at_least`` a little below
    the period."""
    def decorate(fn: _F) -> _F:
        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def run_async(*args: Any, **kwargs: Any) -> Any:
                native = _default_client()._native
                return await _run_once_async(native, name, fn, args, kwargs, at_least, at_most)

            return cast(_F, run_async)

        @functools.wraps(fn)
        def run(*args: Any, **kwargs: Any) -> Any:
            return _run_once(_default_client()._native, name, fn, args, kwargs, at_least, at_most)

        return cast(_F, run)

    return decorate


def cached(key: Union[str, Callable[..., str]], **options: Unpack[CacheArguments]) -> _CacheDecorator:
    """Caches the decorated function's result (sync or async) in the entry
    that ``key`` names for each call, through the default client: see
    Client.cached(). ``key`` is a template formatted with the call's
    arguments by position and by parameter name (``"product:{0}"``,
    ``"user:{id}"``), or a function of them returning the key. Options as
    Client.cached(), checked here. The decorated function's
    ``invalidate(*args, **kwargs)`` deletes the entry of those arguments
    (awaitable for an async function)."""
    if not callable(key):
        _template(key)
    spec, codec = _cache_plan(options)

    def decorate(fn: Callable[..., Any]) -> Any:
        _callable_loader(fn)
        key_of = _key_maker(key, fn)

        def cache(args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> _native.Cache:
            # The default client made on the first call, so it reads $REDIS_URL then.
            return _default_client()._native.cache(key_of(args, kwargs), spec)

        def invalidate(*args: Any, **kwargs: Any) -> bool:
            return _default_client().invalidate(key_of(args, kwargs))

        if _is_async(fn):

            @functools.wraps(fn)
            async def run_async(*args: Any, **kwargs: Any) -> Any:
                load = functools.partial(fn, *args, **kwargs)
                return await _cached_async(cache(args, kwargs), load, codec)

            async def invalidate_async(*args: Any, **kwargs: Any) -> bool:
                client = _default_client()._native
                return await client.invalidate_async(key_of(args, kwargs))

            cast(Any, run_async).invalidate = invalidate_async
            return run_async

        @functools.wraps(fn)
        def run(*args: Any, **kwargs: Any) -> Any:
            return _cached(cache(args, kwargs), functools.partial(fn, *args, **kwargs), codec)

        cast(Any, run).invalidate = invalidate
        return run

    return cast(_CacheDecorator, decorate)
