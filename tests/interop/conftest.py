"""Fixtures of one lock across runtimes: a real redis-server for the session
and one contender of each kind on it (contenders.py)."""

from __future__ import annotations

import os
import uuid
from typing import Iterator

import pytest

from rlock_test_support.servers import RedisServer

from contenders import GO_WORKER, RLOCK, RUST_WORKER, Contenders


@pytest.fixture(scope="session")
def server() -> Iterator[RedisServer]:
    for binary in (RLOCK, RUST_WORKER, GO_WORKER):
        assert os.access(binary, os.X_OK), f"{binary} is missing: run `make test-interop`"
    s = RedisServer()
    yield s
    s.stop()


@pytest.fixture
def contenders(server: RedisServer) -> Iterator[Contenders]:
    c = Contenders(server)
    yield c
    c.close()


@pytest.fixture
def name() -> str:
    """A lock name no other test uses."""
    return f"interop:{uuid.uuid4().hex}"
