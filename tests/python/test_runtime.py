"""How the binding lives inside Python: the GIL, Ctrl-C, fork, and what goes
over the wire."""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any, List

import rlock
from rlock_test_support.keys import lock_key
from rlock_test_support.servers import RedisServer
from rlock_test_support.waiting import eventually

from children import waiting_child


def wait_for_waiter(server: RedisServer, name: str) -> None:
    """Returns once some client listens for the lock's release (it waits)."""
    channel = f"{lock_key(name)}:released"
    assert eventually(lambda: server.redis.pubsub_numsub(channel)[0][1] >= 1, within=10)


def test_the_gil_is_released_while_waiting(client: rlock.Client, server: RedisServer, name: str) -> None:
    count = 0
    stop = threading.Event()

    def counter() -> None:
        nonlocal count
        while not stop.is_set():
            count += 1

    thread = threading.Thread(target=counter)
    thread.start()
    try:
        before = count
        time.sleep(0.3)
        alone = (count - before) / 0.3  # the counter's rate while nothing waits
        other = rlock.Client(server.url)
        with other.lock(name):
            before = count
            start = time.monotonic()
            assert client.lock(name).acquire(timeout=1) is False
            during = (count - before) / (time.monotonic() - start)
        other.close()
    finally:
        stop.set()
        thread.join()
    # Held GIL: the counter would stand still for the whole second.
    assert during > 0.3 * alone, f"{during:.0f}/s while waiting vs {alone:.0f}/s alone"


def test_a_waiting_thread_sleeps_it_polls_only_for_replies(
    client: rlock.Client, server: RedisServer, name: str
) -> None:
    # The calling thread stays awake for a reply (a round trip of its own),
    # never for a release message: a wait costs next to no CPU.
    other = rlock.Client(server.url)
    try:
        with other.lock(name):
            waiter = client.lock(name)
            start, cpu = time.monotonic(), time.thread_time()
            assert waiter.acquire(timeout=1) is False
            cpu, waited = time.thread_time() - cpu, time.monotonic() - start
    finally:
        other.close()
    assert waited >= 0.9
    # Polling through the wait would take about the whole second.
    assert cpu < 0.1, f"{cpu * 1000:.0f} ms of CPU in a {waited * 1000:.0f} ms wait"


def test_ctrl_c_interrupts_a_blocked_acquire_quickly_and_leaves_no_lock(
    client: rlock.Client, server: RedisServer, name: str
) -> None:
    child = waiting_child(server, name, fair=False)
    try:
        held = client.lock(name)
        held.acquire()
        assert child.line() == "waiting"
        wait_for_waiter(server, name)
        sent = time.monotonic()
        child.proc.send_signal(signal.SIGINT)
        assert child.line(within=2) == "interrupted"
        assert time.monotonic() - sent < 0.3
        held.release()
        assert client.lock(name).acquire(timeout=2), "the interrupted wait left a lock behind"
        client.lock(name).release()
        child.send("")
        assert child.line().split() == ["owned", "False", "False"]
        assert child.proc.wait(10) == 0
    finally:
        child.kill()


def _in_forked_child(client: rlock.Client, name: str, url: str, results: Any) -> None:
    try:
        out: List[Any] = []
        parents = client.lock(name)
        out.append(parents.fencing_token)  # the parent's holding is not ours
        out.append(parents.acquire(blocking=False))  # another owner holds it
        try:
            parents.release()
            out.append("released the parent's lock")
        except rlock.LockNotOwned as e:
            out.append(e.reason)
        with client.lock(f"{name}:child") as held:  # fresh runtime and connections
            # A token of its own (the slot's counter: other names may have
            # raised it, so not necessarily 1).
            out.append(held.fencing_token >= 1)
        out.append(rlock.Client(url).lock(f"{name}:child").acquire(timeout=1))
        results.put(out)
        # Stay alive past the parent's lease: were the parent's locks renewed
        # from here, its lock would outlive it.
        time.sleep(2)
    except BaseException as e:  # reported to the parent, which asserts on it
        results.put(repr(e))


def test_a_forked_child_gets_its_own_runtime_and_never_touches_the_parents_locks(
    client: rlock.Client, server: RedisServer, name: str
) -> None:
    parents = client.lock(name, ttl=1)
    parents.acquire()
    token = parents.fencing_token
    ctx = multiprocessing.get_context("fork")
    results = ctx.Queue()
    child = ctx.Process(target=_in_forked_child, args=(client, name, server.url, results))
    child.start()
    try:
        assert results.get(timeout=20) == [None, False, "not acquired by this owner", True, True]
        assert parents.owned() and parents.fencing_token == token
        # Stop the parent's renewals without releasing: the lease must run out
        # while the child lives on.
        client.close()
        assert eventually(lambda: not server.redis.exists(lock_key(name)), within=1.5)
        child.join(10)
        assert child.exitcode == 0
    finally:
        child.kill()
        child.join()


def test_an_uncontended_with_cycle_sends_exactly_two_commands(
    client: rlock.Client, server: RedisServer, name: str
) -> None:
    lock = client.lock(name)
    with lock:  # connects and loads the scripts
        pass
    monitor = server.monitor()
    try:
        monitor.mark()
        with lock:
            pass
        assert monitor.mark() == ["evalsha", "evalsha"]
    finally:
        monitor.close()


def test_a_program_ending_right_after_awaited_calls_exits_cleanly(server: RedisServer, name: str) -> None:
    # The last awaited result is handed over from a runtime thread that may
    # still hold the GIL as the interpreter starts to finalize; it must be
    # let finish first (a crash here shows as an abort or a segfault).
    code = f"""
import asyncio, rlock

async def main():
    lock = rlock.AsyncClient().lock({name!r})
    for _ in range(3):
        async with lock:
            pass

asyncio.run(main())
"""
    procs = [
        subprocess.Popen([sys.executable, "-c", code], env={**os.environ, "REDIS_URL": server.url},
                         stderr=subprocess.PIPE, text=True)
        for _ in range(60)
    ]
    failures = []
    for p in procs:
        _, err = p.communicate(timeout=60)
        if p.returncode != 0:
            failures.append(f"exit {p.returncode}: {err[-300:]}")
    assert not failures, failures
