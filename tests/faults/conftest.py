"""Fixtures of the fault suite, and its summary: the figures of every
scenario, then a last line `N passed, N failed`.

`make test-faults` builds the Python package, the Node addon and the `rlock`
binary first."""

from __future__ import annotations

import os
import tempfile
from typing import Any, Dict, Iterator, List, Optional

import pytest

from rlock_test_support.background import Background
from rlock_test_support.proxy import FaultProxy
from rlock_test_support.servers import RedisCluster, RedisServer

from harness import Scenario

FIGURES: Dict[str, Dict[str, Any]] = {}
OUTCOMES: Dict[str, int] = {"passed": 0, "failed": 0}


@pytest.fixture(scope="session")
def background() -> Iterator[Background]:
    bg = Background()
    yield bg
    bg.close()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "redis_args(*args): extra redis-server arguments for the scenario")


@pytest.fixture
def server(request: pytest.FixtureRequest) -> Iterator[RedisServer]:
    marker = request.node.get_closest_marker("redis_args")
    s = RedisServer(*(marker.args if marker else ()))
    yield s
    s.stop()


@pytest.fixture
def proxy(background: Background, server: RedisServer) -> Iterator[FaultProxy]:
    p = background.run(FaultProxy(background.loop, server.port).start())
    yield p
    background.run(p.close())


@pytest.fixture
def masters() -> Iterator[List[RedisServer]]:
    """Three independent redis-servers: the masters of a Redlock."""
    servers: List[RedisServer] = []
    try:
        for _ in range(3):
            servers.append(RedisServer())
        yield servers
    finally:
        for s in servers:
            s.stop()


@pytest.fixture
def cluster() -> Iterator[RedisCluster]:
    """A Redis Cluster of three masters (no replicas)."""
    c = RedisCluster(3)
    yield c
    c.stop()


def _scenario(
    request: pytest.FixtureRequest, servers: List[RedisServer], background: Background,
    cluster: Optional[RedisCluster] = None,
) -> Iterator[Scenario]:
    label = request.node.name.removeprefix("test_")
    keep = os.environ.get("FAULTS_KEEP")  # a directory to keep the records in
    if keep:
        dir = os.path.join(keep, label)
        os.makedirs(dir, exist_ok=True)
        with Scenario(label, dir, servers, background, cluster) as sc:
            yield sc
        return
    with tempfile.TemporaryDirectory(prefix="rlock-faults-") as dir:
        with Scenario(label, dir, servers, background, cluster) as sc:
            yield sc


@pytest.fixture
def scenario(request: pytest.FixtureRequest, server: RedisServer, background: Background) -> Iterator[Scenario]:
    yield from _scenario(request, [server], background)


@pytest.fixture
def redlock_scenario(
    request: pytest.FixtureRequest, masters: List[RedisServer], background: Background
) -> Iterator[Scenario]:
    """Workers on a Redlock over the three `masters`."""
    yield from _scenario(request, masters, background)


@pytest.fixture
def cluster_scenario(
    request: pytest.FixtureRequest, cluster: RedisCluster, background: Background
) -> Iterator[Scenario]:
    """Workers in cluster mode on the three-master `cluster`."""
    yield from _scenario(request, cluster.nodes, background, cluster)


def record(label: str, figures: Dict[str, Any]) -> None:
    """Keeps a scenario's figures for the summary."""
    FIGURES[label] = figures


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        OUTCOMES["passed" if report.outcome == "passed" else "failed"] += 1


def pytest_terminal_summary(terminalreporter: Any) -> None:
    tr = terminalreporter
    tr.section("fault scenarios")
    for label, figures in FIGURES.items():
        tr.write_line(f"{label}:")
        for key, value in figures.items():
            tr.write_line(f"    {key}: {value}")


def pytest_unconfigure(config: pytest.Config) -> None:
    # After pytest's own summary, so this is the last line.
    if FIGURES or sum(OUTCOMES.values()):
        lines: List[str] = [f"{OUTCOMES['passed']} passed, {OUTCOMES['failed']} failed"]
        print("\n".join(lines))
