"""Fixtures of the fault suite, and its summary: the figures of every
scenario, then a last line `N passed, N failed`.

`make test-faults` builds the Python package, the Node addon and the `rlock`
binary first. Redis comes from the Python suite's one helper."""

from __future__ import annotations

import importlib.util
import os
import tempfile
from typing import Any, Dict, Iterator, List

import pytest

from background import Background
from harness import ROOT, Scenario
from proxy import Proxy

_spec = importlib.util.spec_from_file_location(
    "python_suite_support", os.path.join(ROOT, "tests", "python", "conftest.py"))
assert _spec is not None and _spec.loader is not None
support = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(support)
RedisServer = support.RedisServer

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
def server(request: pytest.FixtureRequest) -> Iterator[Any]:
    marker = request.node.get_closest_marker("redis_args")
    s = RedisServer(*(marker.args if marker else ()))
    yield s
    s.stop()


@pytest.fixture
def proxy(background: Background, server: Any) -> Iterator[Proxy]:
    p = Proxy(background, server.port)
    yield p
    p.close()


@pytest.fixture
def scenario(request: pytest.FixtureRequest, server: Any, background: Background) -> Iterator[Scenario]:
    label = request.node.name.removeprefix("test_")
    keep = os.environ.get("FAULTS_KEEP")  # a directory to keep the records in
    if keep:
        dir = os.path.join(keep, label)
        os.makedirs(dir, exist_ok=True)
        with Scenario(label, dir, server, background) as sc:
            yield sc
        return
    with tempfile.TemporaryDirectory(prefix="rlock-faults-") as dir:
        with Scenario(label, dir, server, background) as sc:
            yield sc


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
