"""The default client, made on first use, and the functions and decorators
that use it: rlock.lock(), synchronized, run_once and cached."""

from __future__ import annotations

import functools
import inspect
import sys
import threading
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple, TypeVar, Union, cast

from . import _native
from ._cache import (
    CacheArguments,
    _CacheDecorator,
    _cache_plan,
    _cached,
    _cached_async,
    _callable_loader,
    _is_async,
    _key_maker,
    _template,
)
from ._client import Client
from ._jobs import _run_once, _run_once_async
from ._lock import Lock
from ._options import LockArguments, _lock_spec

if TYPE_CHECKING:
    # For the type checker only: no runtime dependency on typing_extensions.
    from typing_extensions import Unpack

_F = TypeVar("_F", bound=Callable[..., Any])

_default_guard = threading.Lock()


def _default_client() -> Client:
    # Kept as the package's ``rlock._default``: setting that to None (as the
    # tests do) makes the next call make a new client.
    package = sys.modules["rlock"]
    client: Optional[Client] = package._default
    if client is None:
        with _default_guard:
            client = package._default
            if client is None:
                client = Client()
                setattr(package, "_default", client)
    return client


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
