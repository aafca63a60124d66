"""Fixtures of the memory soak: a real redis-server for the session, and the
figures table (figures.py) printed at the end of the run."""

from __future__ import annotations

from typing import Iterator

import pytest

from rlock_test_support.servers import RedisServer

from figures import FIGURES


def pytest_terminal_summary(terminalreporter: "pytest.TerminalReporter") -> None:
    if not FIGURES:
        return
    tr = terminalreporter
    tr.section("memory soak figures")
    tr.write_line("loop, acquisitions, waits that ended unsatisfied, time, RSS at the checkpoints "
                  "(the first after warm-up), connections to Redis before/during/after, "
                  "threads before/most/after")
    for f in FIGURES:
        tr.write_line(f.row())
    tr.write_line(f"total: {sum(f.acquired for f in FIGURES)} acquisitions, "
                  f"{sum(f.ops for f in FIGURES)} operations")


@pytest.fixture(scope="session")
def server() -> Iterator[RedisServer]:
    s = RedisServer()
    yield s
    s.stop()
