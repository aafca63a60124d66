"""The contenders of one lock across runtimes, all answering the same calls:

- Python, Node and Rust: a long-lived worker process (worker.py, worker.js,
  core/examples/interop_worker.rs) driven one line at a time;
- the CLI: one `rlock exec` process per holding, its command printing the
  fencing token and then waiting for a line on stdin before it ends.

`make test-interop` builds the `rlock` binary and the Rust worker first.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Dict, List, Optional, Tuple, Union

from rlock_test_support.keys import lock_key
from rlock_test_support.processes import Child, Lines
from rlock_test_support.servers import RedisServer

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TARGET = os.environ.get("CARGO_TARGET_DIR") or os.path.join(ROOT, "target")
RLOCK = os.path.join(TARGET, "debug", "rlock")
RUST_WORKER = os.path.join(TARGET, "debug", "examples", "interop_worker")

KINDS = ["python", "node", "rust", "cli"]
LONG_LIVED = ["python", "node", "rust"]
# Every reply has a deadline; a contender that hangs fails the test.
REPLY_WITHIN = 20.0


class Worker(Child):
    """A Python, Node or Rust worker process (see worker.py for the protocol)."""

    def __init__(self, kind: str, argv: List[str], url: str) -> None:
        super().__init__(argv, f"the {kind} worker", env={"REDIS_URL": url})
        self.kind = kind

    def reply(self, within: float = REPLY_WITHIN) -> str:
        line = self.line(within)
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
        assert proc.stdout is not None
        self.holding[name] = proc
        self.last = (name, Lines(proc.stdout, "rlock exec"))

    def acquired(self, within: float = REPLY_WITHIN) -> Optional[int]:
        assert self.last is not None
        name, lines = self.last
        line = lines.next(within)
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
            assert proc.stdout is not None
            self.loops.append((proc, Lines(proc.stdout, "an rlock exec loop")))

    def counted(self, within: float) -> List[Tuple[int, int]]:
        deadline = time.monotonic() + within
        seen = []
        for proc, lines in self.loops:
            while (line := lines.next(max(0.0, deadline - time.monotonic()))) is not None:
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
        channel = f"{lock_key(name)}:released"
        return int(self.server.redis.pubsub_numsub(channel)[0][1])
