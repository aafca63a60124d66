"""What the soak measured of each loop, printed as one table at the end of
the run."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import List, Optional


@dataclass
class Figures:
    loop: str
    ops: int = 0
    acquired: int = 0
    timeouts: int = 0
    seconds: float = 0.0
    rss_kb: List[int] = field(default_factory=list)
    threads: List[int] = field(default_factory=list)
    connections_before: int = 0
    connections_during: int = 0
    connections_after: int = -1
    threads_before: int = 0
    threads_after: int = -1
    live_allocations: List[int] = field(default_factory=list)
    # The JavaScript heap in use after a full collection (the Node worker's).
    js_heap_kb: List[int] = field(default_factory=list)
    # Tasks of the runtime after close (the Rust worker's own runtime).
    tasks_after: Optional[int] = None

    @property
    def growth_kb(self) -> int:
        return self.rss_kb[-1] - self.rss_kb[0]

    @property
    def steady_growth_kb(self) -> int:
        return steady_growth(self.rss_kb)

    @property
    def steady_js_heap_growth_kb(self) -> int:
        return steady_growth(self.js_heap_kb)

    def row(self) -> str:
        rss = " ".join(f"{kb / 1024:.1f}" for kb in self.rss_kb)
        line = (f"{self.loop:<26} {self.acquired:>9} acq {self.timeouts:>7} t/o "
                f"{self.seconds:6.1f} s  RSS MB {rss}  (+{self.growth_kb / 1024:.2f} MB "
                f"after warm-up)  conns {self.connections_before}/{self.connections_during}/"
                f"{self.connections_after}  threads {self.threads_before}/{max(self.threads)}/"
                f"{self.threads_after}")
        if self.live_allocations:
            line += "  live allocs " + " ".join(map(str, self.live_allocations))
        if self.js_heap_kb:
            line += "  JS heap kB " + " ".join(map(str, self.js_heap_kb))
        if self.tasks_after is not None:
            line += f"  tasks after {self.tasks_after}"
        return line


def steady_growth(samples: List[int]) -> int:
    """The growth over `samples` at a leak's pace: the median step between
    them (the lower one of an even count) times their number. A leak grows
    at every checkpoint; a one-off step (V8 resizing a space or settling its
    code for a loop, a compiler's zone left with the allocator), memory
    given back, or the first two steps of a loop still settling in, leave
    that median where it was."""
    steps = [b - a for a, b in zip(samples, samples[1:])]
    return statistics.median_low(steps) * len(steps) if steps else 0


FIGURES: List[Figures] = []
