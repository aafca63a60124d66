"""What one lock admits at once, which the checker holds every entry to: a
mutex one holder, a read-write lock any number of readers or one writer, a
semaphore holdings taking at most its permits between them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Protocol, Sequence


class Holding(Protocol):
    side: str  # read | write (a mutex's and a semaphore's holdings write)
    take: int  # the permits it holds (1 but for a semaphore's)


@dataclass(frozen=True)
class Capacity:
    kind: str = "mutex"  # mutex | rw | semaphore
    permits: int = 1

    @staticmethod
    def of(tasks: Dict[str, Dict[str, Any]]) -> "Capacity":
        """The lock a schedule's tasks take (one lock per schedule)."""
        task = next(iter(tasks.values()), {})
        kind = task.get("kind", "mutex")
        return Capacity(kind, task.get("permits", 1) if kind == "semaphore" else 1)

    @property
    def shared(self) -> bool:
        return self.kind != "mutex"

    def fits(self, holdings: Sequence[Holding]) -> bool:
        if self.kind == "rw":
            return len(holdings) <= 1 or all(h.side == "read" for h in holdings)
        return sum(h.take for h in holdings) <= self.permits

    def __str__(self) -> str:
        if self.kind == "semaphore":
            return f"a semaphore of {self.permits}"
        return "a read-write lock" if self.kind == "rw" else "a mutex"
