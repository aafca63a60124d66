"""Fixtures of the Python suite: one redis-server for the session (from
rlock_test_support, the one place that starts Redis), clients of it, and a
lock name of each test's own."""

from __future__ import annotations

import uuid
from typing import Iterator

import pytest

import rlock
from rlock_test_support.servers import RedisServer


@pytest.fixture(scope="session")
def server() -> Iterator[RedisServer]:
    s = RedisServer()
    yield s
    s.stop()


@pytest.fixture
def client(server: RedisServer) -> Iterator[rlock.Client]:
    c = rlock.Client(server.url)
    yield c
    c.close()


@pytest.fixture
def aclient(server: RedisServer) -> Iterator[rlock.AsyncClient]:
    c = rlock.AsyncClient(server.url)
    yield c
    c.close()


@pytest.fixture
def name() -> str:
    """A lock name no other test uses."""
    return f"test:{uuid.uuid4().hex}"
