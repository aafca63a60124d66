"""The contenders of one lock across runtimes, all answering the same calls:

- Python, Node, Rust and Go: a long-lived worker process (worker.py,
  worker.js, core/examples/interop_worker.rs, go/internal/interopworker)
  driven one line at a time;
- the CLI: one `rlock exec` process per holding, its command printing the
  fencing token and then waiting for a line on stdin before it ends.

Each acquisition names which lock of a name it takes: the mutex, a side of
the read-write lock, or a permit of the semaphore.

Each also reads cache entries (`start_cached`, `go`, `cached_answer`, as
worker.py documents them; the CLI through one `rlock cached` process per
read) and invalidates them.

`make test-interop` builds the `rlock` binary and the Rust and Go workers first.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional, Tuple, Union

from rlock_test_support.keys import CacheKeys, lock_key
from rlock_test_support.processes import Child, Lines
from rlock_test_support.servers import RedisServer

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TARGET = os.environ.get("CARGO_TARGET_DIR") or os.path.join(ROOT, "target")
RLOCK = os.path.join(TARGET, "debug", "rlock")
RUST_WORKER = os.path.join(TARGET, "debug", "examples", "interop_worker")
GO_WORKER = os.path.join(TARGET, "debug", "go_interop_worker")

KINDS = ["python", "node", "rust", "go", "cli"]
LONG_LIVED = ["python", "node", "rust", "go"]
# Every reply has a deadline; a contender that hangs fails the test.
REPLY_WITHIN = 20.0

# Which lock of a name an acquisition takes (the workers' LOCK word): a
# mutex, a read-write lock and a semaphore of one name are three locks.
MUTEX, READ, WRITE = "mutex", "read", "write"


def permit_of(permits: int) -> str:
    """One permit of the name's semaphore of `permits` permits."""
    return f"semaphore:{permits}"


class Worker(Child):
    """A Python, Node, Rust or Go worker process (see worker.py for the protocol)."""

    def __init__(self, kind: str, argv: List[str], url: str) -> None:
        super().__init__(argv, f"the {kind} worker", env={"REDIS_URL": url})
        self.kind = kind

    def reply(self, within: float = REPLY_WITHIN) -> str:
        line = self.line(within)
        assert not line.startswith("err"), f"{self.kind}: {line}"
        return line

    def start_acquire(self, name: str, lock: str = MUTEX, ttl_ms: int = 30_000,
                      wait_ms: int = 10_000) -> None:
        self.send(f"acquire {lock} {name} {ttl_ms} {wait_ms}")

    def answer(self, within: float = REPLY_WITHIN) -> str:
        """The answer to the acquisition started last: `ok FENCE`, `busy`,
        `upgrade` or `invalid MESSAGE`."""
        return self.reply(within)

    def acquired(self, within: float = REPLY_WITHIN) -> Optional[int]:
        """The fencing token of the acquisition started last; None when busy."""
        return fence_of(self.answer(within), self.kind)

    def waiting(self) -> bool:
        """Whether the acquisition started last is still unanswered."""
        return not self.lines.pending()

    def release(self, name: str, lock: str = MUTEX) -> None:
        self.send(f"release {lock} {name}")
        assert self.reply() == "ok"

    def count(self, name: str, key: str, n: int, parallel: int) -> None:
        self.send(f"count {name} {key} {n} {parallel}")

    def counted(self, within: float) -> List[Tuple[int, int]]:
        return [parse_seen(s) for s in self.reply(within).split()[1:]]

    def start_cached(self, key: str, loader: str, counter: str, gate: str = "-") -> None:
        """Starts a read of the cache entry `key` (see worker.py): it waits
        for `go` once the worker is ready."""
        self.send(f"cached {key} {counter} {gate} {loader}")
        assert self.reply() == "ready"

    def go(self) -> None:
        self.send("go")

    def cached_answer(self, within: float = REPLY_WITHIN) -> str:
        return self.reply(within)

    def invalidate(self, key: str) -> Optional[bool]:
        """Whether there was an entry to delete."""
        self.send(f"invalidate {key}")
        answer = self.reply()
        assert answer in ("ok true", "ok false"), f"{self.kind}: {answer}"
        return answer == "ok true"

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
    # How `rlock exec` exits without running its command: the lock stayed
    # busy (EX_TEMPFAIL), or an argument was refused (EX_USAGE).
    BUSY, INVALID = 75, 64
    # The command of `rlock cached`: worker.py's loader in sh, its value on
    # stdout. Its status when the LOADER says fail, the message on stderr.
    LOAD = (
        'echo "$LOADING" >&2; redis-cli -u "$URL" INCR "$COUNTER" >/dev/null || exit 9; '
        'if [ "$GATE" != - ]; then i=0; '
        'until [ -n "$(redis-cli -u "$URL" LPOP "$GATE")" ]; do '
        'i=$((i + 1)); [ $i -lt 2000 ] || exit 9; sleep 0.01; done; fi; '
        'case $KIND in fail) printf "%s\\n" "$VALUE" >&2; exit $FAILED;; none) exit $NOTHING;; esac; '
        'printf %s "$VALUE"'
    )
    LOADING, FAILED = "loading", 3
    # How `rlock cached` exits: nothing found (EX_NOINPUT, which --none-exit
    # makes the command's "nothing found" too), the rebuild waited for failed
    # (EX_SOFTWARE), the wait timed out (EX_TEMPFAIL).
    NOTHING, LOADER_FAILED, TIMEOUT = 66, 70, 75

    def __init__(self, url: str) -> None:
        self.url = url
        # One process per holding (or wait), by (lock, name).
        self.holding: Dict[Tuple[str, str], "subprocess.Popen[str]"] = {}
        self.last: Optional[Tuple[Tuple[str, str], Lines]] = None
        self.loops: List[Tuple["subprocess.Popen[str]", Lines]] = []
        self.reading: Optional["subprocess.Popen[bytes]"] = None

    def exec_argv(self, *args: str) -> List[str]:
        return [RLOCK, "exec", "--url", self.url, *args]

    @staticmethod
    def lock_flags(lock: str) -> List[str]:
        if lock == READ:
            return ["--shared"]
        if lock == WRITE:
            return ["--exclusive"]
        if lock.startswith("semaphore:"):
            return ["--semaphore", lock.split(":")[1]]
        assert lock == MUTEX, lock
        return []

    def start_acquire(self, name: str, lock: str = MUTEX, ttl_ms: int = 30_000,
                      wait_ms: int = 10_000) -> None:
        wait = ["--no-wait"] if wait_ms == 0 else ["--timeout", str(wait_ms / 1000)]
        argv = self.exec_argv("--ttl", str(ttl_ms / 1000), *wait, *self.lock_flags(lock),
                              name, "--", "sh", "-c", self.HOLD)
        # stderr only ever holds the one line saying why the command did not run.
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        self.holding[(lock, name)] = proc
        self.last = ((lock, name), Lines(proc.stdout, "rlock exec"))

    def answer(self, within: float = REPLY_WITHIN) -> str:
        """As a worker answers: `ok FENCE` once the command runs, else `busy`
        or `invalid MESSAGE` from how `rlock exec` exited."""
        assert self.last is not None
        held, lines = self.last
        line = lines.next(within)
        if line is not None:
            return line
        proc = self.holding.pop(held)
        code = proc.wait(timeout=within)
        assert proc.stderr is not None
        said = proc.stderr.read().strip()
        if code == self.BUSY:
            return "busy"
        assert code == self.INVALID, f"rlock exec exited {code} without running its command: {said}"
        return f"invalid {said}"

    def acquired(self, within: float = REPLY_WITHIN) -> Optional[int]:
        return fence_of(self.answer(within), self.kind)

    def waiting(self) -> bool:
        assert self.last is not None
        return not self.last[1].pending()

    def release(self, name: str, lock: str = MUTEX) -> None:
        proc = self.holding.pop((lock, name))
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

    def start_cached(self, key: str, loader: str, counter: str, gate: str = "-") -> None:
        """As a worker's: one `rlock cached` that starts once told `go`,
        its command the loader (the LOADER's value as UTF-8 text, so
        `bytes:` of text only)."""
        kind, _, arg = loader.partition(":")
        env = {**os.environ, "URL": self.url, "COUNTER": counter, "GATE": gate, "KIND": kind,
               "VALUE": bytes.fromhex(arg).decode(), "LOADING": self.LOADING, "FAILED": str(self.FAILED), "NOTHING": str(self.NOTHING)}
        argv = [RLOCK, "cached", "--url", self.url, "--ttl", "60", "--none-exit", str(self.NOTHING),
                key, "--", "sh", "-c", self.LOAD]
        # Started now, so that `go` costs only rlock's own start.
        self.reading = subprocess.Popen(["sh", "-c", 'read -r _ && exec "$@"', "sh", *argv], env=env,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def go(self) -> None:
        assert self.reading is not None and self.reading.stdin is not None
        self.reading.stdin.write(b"go\n")
        self.reading.stdin.flush()

    def cached_answer(self, within: float = REPLY_WITHIN) -> str:
        """What worker.py answers, from how `rlock cached` ended: its stdout
        is the value; its loader said on stderr that it ran."""
        proc, self.reading = self.reading, None
        assert proc is not None
        try:
            out, err_bytes = proc.communicate(timeout=within)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise AssertionError(f"rlock cached still running after {within} s: {proc.communicate()[1]!r}") from None
        err = err_bytes.decode()
        got = "loaded" if self.LOADING in err.splitlines() else "got"
        said = err.strip().splitlines()[-1] if err.strip() else ""
        code = proc.returncode
        if code == 0:
            return f"{got} bytes {out.hex()}"
        if code == self.NOTHING:
            return f"{got} none"
        if code == self.FAILED:
            return f"failed {said}"
        if code == self.LOADER_FAILED:
            named = re.match(r'rlock: cache entry "([^"]*)"', said)
            assert named, f"rlock cached exited {code}: {err}"
            return f"loader-failed {named.group(1)} {said}"
        if code == self.TIMEOUT:
            return "timeout"
        return f"err rlock cached exited {code}: {err}"

    def invalidate(self, key: str) -> Optional[bool]:
        """None: `rlock invalidate` does not say whether there was an entry."""
        subprocess.run([RLOCK, "invalidate", "--url", self.url, key],
                       capture_output=True, timeout=REPLY_WITHIN, check=True)
        return None

    def close(self) -> None:
        if self.reading is not None:
            self.reading.kill()
            self.reading.wait()
        for proc in [*self.holding.values(), *(p for p, _ in self.loops)]:
            proc.kill()
            proc.wait()


Contender = Union[Worker, Cli]


def fence_of(answer: str, kind: str) -> Optional[int]:
    """The fencing token an acquisition answered; None when busy."""
    if answer == "busy":
        return None
    assert answer.startswith("ok "), f"{kind}: {answer}"
    return int(answer.split()[1])


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
        if kind == "go":
            return Worker(kind, [GO_WORKER], url)
        return Cli(url)

    def close(self) -> None:
        for c in self.started.values():
            c.close()

    def status(self, name: str) -> Dict[str, Any]:
        """`rlock status --json`: the name's locks as Redis has them."""
        out = subprocess.run([RLOCK, "status", "--url", self.server.url, "--json", name],
                             capture_output=True, text=True, timeout=REPLY_WITHIN, check=True)
        state: Dict[str, Any] = json.loads(out.stdout)
        return state

    def subscribers(self, name: str) -> int:
        """How many connections listen for the lock's release message."""
        channel = f"{lock_key(name)}:released"
        return int(self.server.redis.pubsub_numsub(channel)[0][1])

    def cache_waiters(self, key: str) -> int:
        """How many connections (one per process) wait for news of the
        cache entry `key`: each waits for another's load."""
        return int(self.server.redis.pubsub_numsub(CacheKeys(key).news)[0][1])
