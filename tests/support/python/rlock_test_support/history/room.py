"""What one lock admits at once, which every entry is held to: a mutex one
holder, a read-write lock any number of readers or one writer, a semaphore
holdings taking at most its permits between them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Protocol, Sequence, Tuple

from rlock_test_support.spans import merge


class Share(Protocol):
    side: str  # read | write (a mutex's and a semaphore's holdings write)
    take: int  # the permits it holds (1 but for a semaphore's)


@dataclass(frozen=True)
class Room:
    family: str = "mutex"  # mutex | rw | semaphore
    permits: int = 1

    @staticmethod
    def of(tasks: Dict[str, Dict[str, Any]]) -> "Room":
        """The lock a schedule's tasks take (one lock per schedule)."""
        task = next(iter(tasks.values()), {})
        family = task.get("kind", "mutex")
        return Room(family, task.get("permits", 1) if family == "semaphore" else 1)

    @property
    def shared(self) -> bool:
        return self.family != "mutex"

    def fits(self, holdings: Sequence[Share]) -> bool:
        if self.family == "rw":
            return len(holdings) <= 1 or all(h.side == "read" for h in holdings)
        return sum(h.take for h in holdings) <= self.permits

    def __str__(self) -> str:
        if self.family == "semaphore":
            return f"a semaphore of {self.permits}"
        return "a read-write lock" if self.family == "rw" else "a mutex"


def over(load: List[Tuple[int, int, int]], room: int) -> List[Tuple[int, int]]:
    """The spans where the load (spans with weights) is above `room`, merged."""
    events = sorted([(lo, n) for lo, hi, n in load if hi > lo] + [(hi, -n) for lo, hi, n in load if hi > lo],
                    key=lambda e: (e[0], e[1]))
    spans: List[Tuple[int, int]] = []
    total, since = 0, None
    for t, n in events:
        total += n
        if total > room and since is None:
            since = t
        elif total <= room and since is not None:
            spans.append((since, t))
            since = None
    return merge(spans)
