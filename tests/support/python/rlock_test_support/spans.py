"""Spans of one timeline, in CLOCK_MONOTONIC nanoseconds: when a lock was
busy, and the longest stretch a waiter saw it free."""

from __future__ import annotations

import bisect
from typing import List, Tuple

MS = 1_000_000  # nanoseconds


def merge(spans: List[Tuple[int, int]]) -> List[Tuple[int, int]]:
    """The spans sorted, overlapping ones joined into one."""
    out: List[Tuple[int, int]] = []
    for lo, hi in sorted(spans):
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def longest_free(busy: List[Tuple[int, int]], lo: int, hi: int) -> Tuple[int, int]:
    """The longest stretch of [lo, hi] outside every busy span (`busy`
    merged)."""
    best, at = (lo, lo), lo
    # Spans that end before `lo` cannot cut it: start at the last one begun by then.
    first = max(bisect.bisect_right(busy, (lo, lo)) - 1, 0)
    for b_lo, b_hi in busy[first:]:
        if b_lo >= hi:
            break
        if b_hi <= at:
            continue
        if b_lo - at > best[1] - best[0]:
            best = (at, b_lo)
        at = max(at, b_hi)
    if hi - at > best[1] - best[0]:
        best = (at, hi)
    return best
