"""Clients: Client and AsyncClient, the factories of every lock, semaphore,
cache read and run-once job."""

from __future__ import annotations

import asyncio
import json
import os
from types import TracebackType
from typing import (
    TYPE_CHECKING,
    Any,
    Awaitable,
    Callable,
    Coroutine,
    Dict,
    Generator,
    List,
    Optional,
    Sequence,
    Type,
    TypeVar,
    Union,
    cast,
    overload,
)

from . import _native
from ._cache import (
    CacheArguments,
    _awaited,
    _cache_plan,
    _cached,
    _cached_async,
    _callable_loader,
    _is_async,
)
from ._jobs import _run_once, _run_once_async, _Skipped
from ._lock import AsyncLock, Lock
from ._options import LockArguments, _lock_spec, _named, _suggesting
from ._redis_py import servers_of
from ._rwlock import AsyncRwLock, RwLock
from ._semaphore import AsyncSemaphore, Semaphore

if TYPE_CHECKING:
    # For the type checker only: no runtime dependency on typing_extensions.
    from typing_extensions import Unpack

_T = TypeVar("_T")

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
