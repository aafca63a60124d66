"""The Python worker of the memory soak: one loop of one kind, run against
$REDIS_URL, paused at every checkpoint so the driver can read this process'
memory, threads and connections from outside (see test_memory.py).

    python worker.py MODE WARM_UP OPERATIONS CHECKPOINTS

Modes (every contended one: 4 threads or tasks of one client on one lock):

    threads             sync threads, the default lock (queues waiters after 10 ms)
    threads-fair        sync threads, fair=True
    threads-line        sync threads, queue_after=0: every wait goes through the line
    threads-timeout     sync threads whose waits time out (fair and queue_after=0 mixed)
    threads-alone       sync threads, each on its own lock: no waiting at all
    asyncio             asyncio tasks of one AsyncClient, the default lock
    asyncio-fair        asyncio tasks, fair=True
    asyncio-cancel      asyncio tasks whose waits are cancelled or time out

Lines out, each answered by a line in before the worker goes on:

    baseline                 a first client made, used and closed: what stays in the process
    at OPS ACQUIRED TIMEOUTS a checkpoint (the first one ends the warm-up); the Rust
                             worker adds its live allocations, the Node worker
                             js=KB, its JavaScript heap in use after a collection
    closed                   the soak's client closed and dropped
"""

from __future__ import annotations

import asyncio
import gc
import os
import sys
import threading
import time
import uuid
from typing import Any, Callable, Dict, List, Tuple

import rlock

PARALLEL = 4
# How long a holder keeps the lock in the timeout modes, and how long the
# others wait for it: longer than the wait, so most waits end unsatisfied.
HOLD = 0.002
WAIT = 0.001


def pause(line: str) -> None:
    print(line, flush=True)
    if not sys.stdin.readline():
        sys.exit("the driver went away")


class Counts:
    def __init__(self) -> None:
        self.guard = threading.Lock()
        self.ops = 0
        self.acquired = 0
        self.timeouts = 0

    def add(self, acquired: int, timeouts: int) -> None:
        with self.guard:
            self.ops += acquired + timeouts
            self.acquired += acquired
            self.timeouts += timeouts

    def line(self) -> str:
        return f"at {self.ops} {self.acquired} {self.timeouts}"


def lock_options(mode: str) -> List[Dict[str, Any]]:
    """The options of the lock objects the units use, one per unit."""
    if mode.endswith("-fair"):
        return [{"fair": True}] * PARALLEL
    if mode == "threads-line":
        return [{"queue_after": 0}] * PARALLEL
    if mode in ("threads-timeout", "asyncio-cancel"):
        # One name, waiters of both kinds in one line.
        return [{"fair": True}, {"queue_after": 0}] * (PARALLEL // 2)
    return [{}] * PARALLEL


def names(mode: str) -> List[str]:
    base = f"soak:{uuid.uuid4().hex}"
    if mode == "threads-alone":
        return [f"{base}:{i}" for i in range(PARALLEL)]
    return [base] * PARALLEL


def sync_cycles(mode: str, lock: rlock.Lock, n: int) -> Tuple[int, int]:
    """(acquired, waits that ended unsatisfied)."""
    acquired = timeouts = 0
    for _ in range(n):
        if mode == "threads-timeout":
            if lock.acquire(timeout=WAIT):
                time.sleep(HOLD)
                lock.release()
                acquired += 1
            else:
                timeouts += 1
        else:
            with lock:
                acquired += 1
    return acquired, timeouts


async def async_cycles(mode: str, lock: rlock.AsyncLock, n: int) -> Tuple[int, int]:
    """(acquired, waits that ended unsatisfied)."""
    acquired = timeouts = 0
    for i in range(n):
        if mode == "asyncio-cancel":
            # Half the waits end by their own timeout, half by cancelling
            # the awaiting task (the core's acquire future is dropped).
            try:
                if i % 2:
                    got = await lock.acquire(timeout=WAIT)
                else:
                    # asyncio.timeout, not wait_for: wait_for (3.11) runs
                    # the acquire in a task of its own, another owner.
                    async with asyncio.timeout(WAIT):
                        got = await lock.acquire()
            except TimeoutError:
                got = False
            if got:
                await asyncio.sleep(HOLD)
                await lock.release()
                acquired += 1
            else:
                timeouts += 1
        else:
            async with lock:
                acquired += 1
    return acquired, timeouts


def run_threads(mode: str, per_unit: List[int], warm: int) -> None:
    """`warm` cycles per unit, then `per_unit[i]` per unit for checkpoint i."""
    client = rlock.Client(os.environ["REDIS_URL"])
    counts = Counts()
    locks = [client.lock(n, **o) for n, o in zip(names(mode), lock_options(mode))]
    gate = threading.Barrier(PARALLEL + 1)
    errors: List[BaseException] = []

    def unit(lock: rlock.Lock) -> None:
        try:
            for n in [warm, *per_unit]:
                counts.add(*sync_cycles(mode, lock, n))
                gate.wait()
                gate.wait()
        except BaseException as e:  # reported by the main thread
            errors.append(e)
            gate.abort()

    threads = [threading.Thread(target=unit, args=(lock,)) for lock in locks]
    for t in threads:
        t.start()
    for _ in range(len(per_unit) + 1):
        try:
            gate.wait()
        except threading.BrokenBarrierError:
            raise errors[0] from None
        gc.collect()
        pause(counts.line())
        gate.wait()
    for t in threads:
        t.join()
    client.close()


def run_asyncio(mode: str, per_unit: List[int], warm: int) -> None:
    async def soak() -> None:
        client = rlock.AsyncClient(os.environ["REDIS_URL"])
        counts = Counts()
        locks = [client.lock(n, **o) for n, o in zip(names(mode), lock_options(mode))]
        for n in [warm, *per_unit]:
            done = await asyncio.gather(*(async_cycles(mode, lock, n) for lock in locks))
            for acquired, timeouts in done:
                counts.add(acquired, timeouts)
            gc.collect()
            # Reading stdin blocks the loop: nothing of this client runs
            # meanwhile, as the driver reads the process from outside.
            pause(counts.line())
        client.close()

    asyncio.run(soak())


def first_use(mode: str) -> None:
    """What the process keeps once any client was used: the runtime and its
    threads, the bridge to asyncio."""
    if mode.startswith("asyncio"):
        async def use() -> None:
            async with rlock.AsyncClient(os.environ["REDIS_URL"]) as client:
                await async_cycles(mode, client.lock(names(mode)[0], **lock_options(mode)[0]), 10)

        asyncio.run(use())
    else:
        with rlock.Client(os.environ["REDIS_URL"]) as client:
            sync_cycles(mode, client.lock(names(mode)[0], **lock_options(mode)[0]), 10)


def main() -> None:
    mode, warm_up, total, checkpoints = sys.argv[1], *map(int, sys.argv[2:5])
    run: Callable[[str, List[int], int], None] = (
        run_asyncio if mode.startswith("asyncio") else run_threads
    )
    per_unit = [max(1, total // checkpoints // PARALLEL)] * checkpoints
    # The warm-up lets caches, pools and allocator arenas reach their working
    # size before the first reading.
    warm = max(1, warm_up // PARALLEL)
    # Each phase's objects go when its function returns; collected here so
    # that cycles (an asyncio loop's) go too.
    first_use(mode)
    gc.collect()
    pause("baseline")
    run(mode, per_unit, warm)
    gc.collect()
    pause("closed")


if __name__ == "__main__":
    main()
