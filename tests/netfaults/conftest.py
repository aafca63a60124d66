"""Fixtures of the network-fault suite: one driver per session (its
deployments start on first use, its workers live for the whole session), the
seeds to run, and a summary of what ran: schedules per mode, faults injected
by kind, violations.

`RLOCK_NETFAULTS_SEED=<seed>` (or `--netfaults-seed`) runs just that schedule;
`--netfaults-schedules N` (default 200) runs N mutex seeds from
`--netfaults-first` (default 0), `--netfaults-shared M` (default 40) M
read-write lock and semaphore seeds from `schedule.SHARED_FIRST` plus that
first, and `--netfaults-nemesis K` (default 12: each of its kinds twice) K
nemesis seeds from `nemesis.NEMESIS_FIRST` plus that first.
`RLOCK_NETFAULTS_KEEP=DIR` keeps the records."""

from __future__ import annotations

import os
from typing import Any, Iterator, List

import pytest

from driver import Driver
from nemesis import NEMESIS_FIRST
from schedule import SHARED_FIRST

# The session's driver, for the summary.
DRIVERS: List[Driver] = []


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("netfaults")
    group.addoption("--netfaults-seed", type=int, default=None, help="replay one schedule")
    group.addoption("--netfaults-schedules", type=int, default=200, help="how many schedules")
    group.addoption("--netfaults-shared", type=int, default=40,
                    help="how many read-write lock and semaphore schedules")
    group.addoption("--netfaults-nemesis", type=int, default=12,
                    help="how many nemesis schedules (server and waiting-line faults)")
    group.addoption("--netfaults-first", type=int, default=0, help="the first seed")


def seeds(config: pytest.Config) -> List[int]:
    one = config.getoption("--netfaults-seed")
    if one is None and os.environ.get("RLOCK_NETFAULTS_SEED"):
        one = int(os.environ["RLOCK_NETFAULTS_SEED"])
    if one is not None:
        return [one]
    first = config.getoption("--netfaults-first")
    return (list(range(first, first + config.getoption("--netfaults-schedules")))
            + list(range(SHARED_FIRST + first, SHARED_FIRST + first + config.getoption("--netfaults-shared")))
            + list(range(NEMESIS_FIRST + first, NEMESIS_FIRST + first + config.getoption("--netfaults-nemesis"))))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "seed" in metafunc.fixturenames:
        metafunc.parametrize("seed", seeds(metafunc.config))


@pytest.fixture(scope="session")
def driver() -> Iterator[Driver]:
    d = Driver(keep=os.environ.get("RLOCK_NETFAULTS_KEEP"))
    DRIVERS.append(d)
    yield d
    d.close()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for d in DRIVERS:
        terminalreporter.section("network-fault schedules")
        for line in d.summary():
            terminalreporter.write_line(line)
