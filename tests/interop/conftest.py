"""Test support for one lock across runtimes: a real redis-server (the Python
suite's helper), and one driver per kind of contender, all answering the
same calls:

- Python, Node and Rust: a long-lived worker process (tests/interop/worker.py,
  tests/interop/worker.js, core/examples/interop_worker.rs) driven one line at
  a time;
- the CLI: one `rlock exec` process per holding, its command printing the
  fencing token and then waiting for a line on stdin before it ends.

`make test-interop` builds the `rlock` binary and the Rust worker first.
"""

from __future__ import annotations

import importlib.util
import json
import os
import queue
import subprocess
import sys
import threading
import time
import uuid
from typing import Dict, Iterator, List, Optional, Tuple, Union

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TARGET = os.environ.get("CARGO_TARGET_DIR") or os.path.join(ROOT, "target")
RLOCK = os.path.join(TARGET, "debug", "rlock")
RUST_WORKER = os.path.join(TARGET, "debug", "examples", "interop_worker")

# The one helper that starts Redis for Python-driven tests lives with the
# Python suite; load it under its own module name.
_spec = importlib.util.spec_from_file_location(
    "python_suite_support", os.path.join(ROOT, "tests", "python", "conftest.py"))
assert _spec is not None and _spec.loader is not None
support = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(support)
RedisServer = support.RedisServer
eventually = support.eventually

KINDS = ["python", "node", "rust", "cli"]
LONG_LIVED = ["python", "node", "rust"]
# Every reply has a deadline; a contender that hangs fails the test.
REPLY_WITHIN = 20.0


class Lines:
    """A process's stdout lines, read into a queue so every read has a deadline."""

    def __init__(self, proc: "subprocess.Popen[str]") -> None:
        self.queue: "queue.Queue[Optional[str]]" = queue.Queue()
        threading.Thread(target=self._read, args=(proc,), daemon=True).start()

    def _read(self, proc: "subprocess.Popen[str]") -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            self.queue.put(line.rstrip("\n"))
        self.queue.put(None)

    def next(self, within: float, who: str) -> Optional[str]:
        """The next line; None when the output ended."""
        try:
            return self.queue.get(timeout=within)
        except queue.Empty:
            raise AssertionError(f"{who} said nothing within {within} s") from None

    def pending(self) -> bool:
        return not self.queue.empty()


class Worker:
    """A Python, Node or Rust worker process (see worker.py for the protocol)."""

    def __init__(self, kind: str, argv: List[str], url: str) -> None:
        self.kind = kind
        self.proc = subprocess.Popen(
            argv, env={**os.environ, "REDIS_URL": url},
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )
        self.lines = Lines(self.proc)

    def send(self, command: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()

    def reply(self, within: float = REPLY_WITHIN) -> str:
        line = self.lines.next(within, self.kind)
        assert line is not None, f"the {self.kind} worker exited ({self.proc.wait()})"
        assert not line.startswith("err"), f"{self.kind}: {line}"
        return line

    def start_acquire(self, name: str, ttl_ms: int = 30_000, wait_ms: int = 10_000) -> None:
        self.send(f"acquire {name} {ttl_ms} {wait_ms}")

    def acquired(self, within: float = REPLY_WITHIN) -> Optional[int]:
        """The fencing token of the acquisition started last; None when busy."""
        reply = self.reply(within)
        return None if reply == "busy" else int(reply.split()[1])

    def waiting(self) -> bool:
        """Whether the acquisition started last is still unanswered."""
        return not self.lines.pending()

    def release(self, name: str) -> None:
        self.send(f"release {name}")
        assert self.reply() == "ok"

    def count(self, name: str, key: str, n: int, parallel: int) -> None:
        self.send(f"count {name} {key} {n} {parallel}")

    def counted(self, within: float) -> List[Tuple[int, int]]:
        return [parse_seen(s) for s in self.reply(within).split()[1:]]

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class Cli:
    """The `rlock` binary: each holding is one `rlock exec` process whose
    command prints its fencing token and ends when it reads a line."""

    kind = "cli"
    HOLD = 'echo "ok $RLOCK_FENCING_TOKEN"; read -r _'

    def __init__(self, url: str) -> None:
        self.url = url
        self.holding: Dict[str, "subprocess.Popen[str]"] = {}
        self.last: Optional[Tuple[str, Lines]] = None
        self.loops: List[Tuple["subprocess.Popen[str]", Lines]] = []

    def exec_argv(self, *args: str) -> List[str]:
        return [RLOCK, "exec", "--url", self.url, *args]

    def start_acquire(self, name: str, ttl_ms: int = 30_000, wait_ms: int = 10_000) -> None:
        wait = ["--no-wait"] if wait_ms == 0 else ["--timeout", str(wait_ms / 1000)]
        proc = subprocess.Popen(
            self.exec_argv("--ttl", str(ttl_ms / 1000), *wait, name, "--", "sh", "-c", self.HOLD),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )
        self.holding[name] = proc
        self.last = (name, Lines(proc))

    def acquired(self, within: float = REPLY_WITHIN) -> Optional[int]:
        assert self.last is not None
        name, lines = self.last
        line = lines.next(within, "rlock exec")
        if line is None:
            code = self.holding.pop(name).wait(timeout=within)
            assert code == 75, f"rlock exec exited {code} without running its command"
            return None
        assert line.startswith("ok "), line
        return int(line.split()[1])

    def waiting(self) -> bool:
        assert self.last is not None
        return not self.last[1].pending()

    def release(self, name: str) -> None:
        proc = self.holding.pop(name)
        assert proc.stdin is not None
        proc.stdin.write("\n")
        proc.stdin.close()
        assert proc.wait(timeout=REPLY_WITHIN) == 0

    def count(self, name: str, key: str, n: int, parallel: int) -> None:
        # Each iteration is one `rlock exec` running a shell that reads the
        # counter and writes it back incremented.
        step = ('v=$(redis-cli -u "$URL" GET "$KEY"); redis-cli -u "$URL" SET "$KEY" $((${v:-0} + 1)) '
                '>/dev/null; echo "${v:-0}:$RLOCK_FENCING_TOKEN"')
        loop = f'for _ in $(seq {n}); do "$RLOCK" exec --url "$URL" --timeout 60 "$NAME" -- sh -c \'{step}\' || exit; done'
        env = {**os.environ, "RLOCK": RLOCK, "URL": self.url, "KEY": key, "NAME": name}
        for _ in range(parallel):
            proc = subprocess.Popen(["bash", "-c", loop], env=env, stdout=subprocess.PIPE, text=True)
            self.loops.append((proc, Lines(proc)))

    def counted(self, within: float) -> List[Tuple[int, int]]:
        deadline = time.monotonic() + within
        seen = []
        for proc, lines in self.loops:
            while (line := lines.next(max(0.0, deadline - time.monotonic()), "an rlock exec loop")) is not None:
                seen.append(parse_seen(line))
            assert proc.wait(timeout=within) == 0
        self.loops = []
        return seen

    def close(self) -> None:
        for proc in [*self.holding.values(), *(p for p, _ in self.loops)]:
            proc.kill()
            proc.wait()


Contender = Union[Worker, Cli]


def parse_seen(item: str) -> Tuple[int, int]:
    seen, fence = item.split(":")
    return int(seen), int(fence)


class Contenders:
    """One contender of each kind, started on first use, on one Redis."""

    def __init__(self, server: RedisServer) -> None:
        self.server = server
        self.started: Dict[str, Contender] = {}

    def __getitem__(self, kind: str) -> Contender:
        if kind not in self.started:
            self.started[kind] = self._start(kind)
        return self.started[kind]

    def _start(self, kind: str) -> Contender:
        url = self.server.url
        if kind == "python":
            return Worker(kind, [sys.executable, "-u", os.path.join(HERE, "worker.py")], url)
        if kind == "node":
            return Worker(kind, ["node", os.path.join(HERE, "worker.js")], url)
        if kind == "rust":
            return Worker(kind, [RUST_WORKER], url)
        return Cli(url)

    def close(self) -> None:
        for c in self.started.values():
            c.close()

    def status(self, name: str) -> Dict[str, object]:
        """`rlock status --json`: the lock as Redis has it."""
        out = subprocess.run([RLOCK, "status", "--url", self.server.url, "--json", name],
                             capture_output=True, text=True, timeout=REPLY_WITHIN, check=True)
        state: Dict[str, object] = json.loads(out.stdout)
        return state

    def subscribers(self, name: str) -> int:
        """How many connections listen for the lock's release message."""
        channel = f"rlock:{{{name}}}:released"
        return int(self.server.redis.pubsub_numsub(channel)[0][1])


@pytest.fixture(scope="session")
def server() -> Iterator[RedisServer]:
    for binary in (RLOCK, RUST_WORKER):
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
