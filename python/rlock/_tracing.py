"""OpenTelemetry spans of lock operations, when the application has the
OpenTelemetry API installed (``pip install redis-rlock[otel]``); without it
every function here does nothing and costs one attribute check.

- ``rlock.acquire``: the call, from asking to the grant or the refusal (its
  duration is the wait), a child of the caller's current span; attributes
  ``rlock.lock`` (the name), ``rlock.acquired`` and ``rlock.fencing_token``.
- ``rlock.hold``: from the grant to the release of that holding. Inside a
  ``with`` / ``async with`` block it is the current span, so the block's
  own spans are its children; after an explicit ``acquire()`` it is not made
  current (the release may come from elsewhere in the code).
"""

from __future__ import annotations

import threading
from typing import Any, Dict, List, Optional, Tuple

try:  # an optional dependency: the API only, never an SDK
    from opentelemetry import context as _context
    from opentelemetry import trace as _trace
except ImportError:  # pragma: no cover - exercised in a child without it
    _trace = None  # type: ignore[assignment]
    _context = None  # type: ignore[assignment]

from . import _native

_tracer: Any = _trace.get_tracer("rlock", _native.__version__) if _trace is not None else None

# The hold spans open per lock handle and owner, innermost last, each with
# the context token of a ``with`` block that made it current (else None).
_holds: Dict[Tuple[int, str], List[Tuple[Any, Any]]] = {}
_holds_lock = threading.Lock()


def enabled() -> bool:
    return _tracer is not None


def start_acquire(name: str) -> Any:
    """The ``rlock.acquire`` span of one call, or None."""
    if _tracer is None:
        return None
    return _tracer.start_span("rlock.acquire", attributes={"rlock.lock": name})


def end_acquire(span: Any, token: Optional[int], error: Optional[BaseException] = None) -> None:
    if span is None:
        return
    span.set_attribute("rlock.acquired", token is not None)
    if token is not None:
        span.set_attribute("rlock.fencing_token", token)
    if error is not None:
        span.record_exception(error)
        span.set_status(_trace.Status(_trace.StatusCode.ERROR, type(error).__name__))
    span.end()


def start_hold(native: object, unit: str, name: str, token: int, current: bool) -> None:
    """Opens the ``rlock.hold`` span of a grant (made current when asked)."""
    if _tracer is None:
        return
    span = _tracer.start_span(
        "rlock.hold", attributes={"rlock.lock": name, "rlock.fencing_token": token}
    )
    attached = _context.attach(_trace.set_span_in_context(span)) if current else None
    with _holds_lock:
        _holds.setdefault((id(native), unit), []).append((span, attached))


def end_hold(native: object, unit: str, error: Optional[BaseException] = None) -> None:
    """Closes the innermost ``rlock.hold`` span of this handle and owner."""
    if _tracer is None:
        return
    with _holds_lock:
        stack = _holds.get((id(native), unit))
        if not stack:
            return
        span, attached = stack.pop()
        if not stack:
            del _holds[(id(native), unit)]
    if error is not None:
        span.record_exception(error)
        span.set_status(_trace.Status(_trace.StatusCode.ERROR, type(error).__name__))
    span.end()
    if attached is not None:
        _context.detach(attached)
