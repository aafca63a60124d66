"""What the documentation's samples run against: one redis-server for the
whole run, emptied before each sample so that no sample relies on another, and
a Node project where `require('redis-rlock')` finds this repository."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Dict, Iterator

import pytest

from pages import ROOT

try:
    from rlock_test_support.servers import RedisServer
except ImportError:  # not installed into this virtualenv: use it from the tree
    sys.path.insert(0, str(ROOT / "tests" / "support" / "python"))
    from rlock_test_support.servers import RedisServer


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    server = RedisServer()
    yield server
    server.stop()


@pytest.fixture
def sample_env(redis_server: RedisServer) -> Dict[str, str]:
    """The environment a reader's shell would have: `REDIS_URL` naming the
    test's server, emptied, and `rlock` (a debug build) on the PATH."""
    redis_server.redis.flushall()
    env = dict(os.environ)
    env["REDIS_URL"] = redis_server.url
    env["PATH"] = f"{ROOT / 'target' / 'debug'}{os.pathsep}{env.get('PATH', '')}"
    return env


@pytest.fixture(scope="session")
def node_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder outside the repository whose `node_modules/redis-rlock` is
    the repository itself, as `npm install /path/to/redis-rlock` leaves it."""
    project = tmp_path_factory.mktemp("node-project")
    (project / "node_modules").mkdir()
    (project / "node_modules" / "redis-rlock").symlink_to(ROOT, target_is_directory=True)
    return project
