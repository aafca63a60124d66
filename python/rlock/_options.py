"""A lock's options: declared, with their defaults, by the native LockSpec()
(python/src/lock.rs); typed here for every function that takes them. Also
the checks every face function makes of its arguments before any I/O."""

from __future__ import annotations

import functools
import inspect
import os
import sys
import warnings
from typing import Any, Callable, List, Mapping, Optional, Sequence, TypedDict, TypeVar, cast

from . import _native
from ._errors import LongTtlWarning

_F = TypeVar("_F", bound=Callable[..., Any])


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


#: The folder of the package's modules, whose frames _callers_level() skips.
_PACKAGE = os.path.dirname(__file__)


def _callers_level() -> int:
    """The ``stacklevel`` of the first frame outside this package, for a
    warning raised by a function of it: the line a user wrote."""
    level = 1
    frame = sys._getframe(1)
    while frame.f_back is not None and os.path.dirname(frame.f_code.co_filename) == _PACKAGE:
        frame = frame.f_back
        level += 1
    return level
