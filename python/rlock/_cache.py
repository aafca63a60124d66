"""Cached: the cache-aside read with one load per miss. Who loads, who waits
and what gets written are the core's (python/src/cache.rs); this face runs
the loader, encodes its value and tags it with a format every face reads."""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import pickle
import string
import threading
from typing import (
    TYPE_CHECKING,
    Any,
    Awaitable,
    Callable,
    Coroutine,
    Dict,
    Literal,
    Mapping,
    Optional,
    Protocol,
    Set,
    Tuple,
    TypedDict,
    TypeVar,
    Union,
    cast,
    overload,
)

from . import _native
from ._errors import LockError, _note
from ._options import _keywords, _named, _refuse_unknown_keywords

if TYPE_CHECKING:
    # For the type checker only: no runtime dependency on typing_extensions.
    from typing_extensions import ParamSpec

    _P = ParamSpec("_P")
else:
    # Python 3.9 has no ParamSpec; at run time the generics below need only
    # a type variable.
    _P = TypeVar("_P")

_log = logging.getLogger("rlock")

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
