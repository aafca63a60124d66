"""Fresh interpreters of the same venv, for what one process cannot show
about itself: Ctrl-C, interpreter exit, imports from scratch."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Dict, Optional

from rlock_test_support.processes import Child
from rlock_test_support.servers import RedisServer


def run_python(code: str, env: Optional[Dict[str, str]] = None, timeout: float = 30) -> "subprocess.CompletedProcess[str]":
    """Runs `code` in a fresh interpreter and returns its result."""
    return subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def waiting_child(server: RedisServer, name: str, fair: bool = False) -> Child:
    """A child process blocked in `acquire()` of `name` that says "waiting"
    first, then "interrupted" on Ctrl-C (or "acquired"); after a line on its
    stdin, "owned <owned()> <locked()>"."""
    code = f"""
import signal, sys, rlock
# Python only turns SIGINT into KeyboardInterrupt when it starts with SIGINT
# at its default; a parent run in the background may have it ignored.
signal.signal(signal.SIGINT, signal.default_int_handler)
lock = rlock.lock({name!r}, fair={fair!r})
print("waiting")
try:
    lock.acquire()
    print("acquired")
except KeyboardInterrupt:
    print("interrupted")
sys.stdin.readline()  # stay alive: a leaked acquisition would be renewed
print("owned", lock.owned(), lock.locked())
"""
    return Child([sys.executable, "-u", "-c", code], "the child", env={"REDIS_URL": server.url})
