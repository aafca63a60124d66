"""Run-once jobs (docs/behaviour.md#run-once-jobs): the core takes the job's
lock in one attempt and keeps it until at_least; this runs the function."""

from __future__ import annotations

import inspect
from typing import Any, Callable, Mapping, Optional, Sequence, TypeVar

from ._errors import LockError, _note

_T = TypeVar("_T")


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
