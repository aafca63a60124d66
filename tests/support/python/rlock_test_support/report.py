"""What a checker found in one run: the promises it saw broken (the first
ones in full) and the figures that say how close the run came."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List


@dataclass
class Report:
    problems: List[str] = field(default_factory=list)
    figures: Dict[str, Any] = field(default_factory=dict)
    # Past this many a broken promise is only counted: the first explain the run.
    shown: int = 30

    def count(self, key: str, n: int = 1) -> None:
        self.figures[key] = self.figures.get(key, 0) + n

    def peak(self, key: str, value: float) -> None:
        self.figures[key] = max(self.figures.get(key, 0), round(value, 1))

    def fail(self, problem: str) -> None:
        if len(self.problems) < self.shown:
            self.problems.append(problem)
        self.count("violations")

    @property
    def violations(self) -> int:
        return int(self.figures.get("violations", 0))
