"""Owners: the process plus the calling thread or asyncio task. Units are
serial numbers, never reused, so a new thread or task is never mistaken for
one that ended while holding a lock."""

from __future__ import annotations

import asyncio
import itertools
import os
import threading
import weakref
from typing import Any, Optional, Tuple

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
