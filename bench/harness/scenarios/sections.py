"""Who was inside at once, from the records' timestamps. A critical section
runs from `acquire()` returning to `release()` being called: inside the
holding as Redis saw it, so sections that may not share must not overlap,
on the one CLOCK_MONOTONIC every worker reads."""

from __future__ import annotations

from typing import Iterable, List, Tuple

# (entered, left, exclusive): a writer's or a mutex holder's section is exclusive.
Section = Tuple[int, int, bool]


def sections(records: Iterable[List[int]], exclusive: bool) -> List[Section]:
    """The critical sections of `[wanted, acquired, releasing, released]` records."""
    return [(r[1], r[2], exclusive) for r in records]


def _events(secs: Iterable[Section]) -> List[Tuple[int, int, bool]]:
    # At one instant a section leaving (0) sorts before one entering (1):
    # touching is not sharing.
    return sorted([(a, 1, x) for a, _, x in secs] + [(b, 0, x) for _, b, x in secs])


def most_inside(secs: Iterable[Section]) -> int:
    """The most sections open at one instant (a semaphore's: at most its permits)."""
    inside = most = 0
    for _, entering, _ in _events(secs):
        inside += 1 if entering else -1
        most = max(most, inside)
    return most


def breaches(secs: Iterable[Section]) -> int:
    """Sections entered while an exclusive one was open, or exclusive ones
    entered while any was open: 0 for a lock that keeps its promise."""
    inside = exclusive_inside = count = 0
    for _, entering, exclusive in _events(secs):
        if entering:
            if exclusive_inside or (exclusive and inside):
                count += 1
            inside += 1
            exclusive_inside += exclusive
        else:
            inside -= 1
            exclusive_inside -= exclusive
    return count
