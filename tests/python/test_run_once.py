"""Run-once jobs from Python: a job every process schedules runs on one of
them per period; the others get rlock.SKIPPED at once; the job's lock stays
taken until at_least after its start, also when the job raises."""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from typing import List

import pytest

import rlock
from rlock_test_support.keys import lock_key
from rlock_test_support.servers import RedisServer


def test_of_three_processes_scheduled_at_once_one_runs_and_the_others_skip_at_once(
    server: RedisServer, name: str
) -> None:
    clients = [rlock.Client(server.url) for _ in range(3)]
    ran: List[int] = []
    outcomes: List[object] = []
    skipped_after: List[float] = []

    def report(n: int) -> str:
        ran.append(n)
        time.sleep(0.5)
        return f"report {n}"

    def schedule(i: int) -> None:
        began = time.monotonic()
        outcome = clients[i].run_once(name, report, i, at_least=60)
        outcomes.append(outcome)
        if outcome is rlock.SKIPPED:
            skipped_after.append(time.monotonic() - began)

    threads = [threading.Thread(target=schedule, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    for c in clients:
        c.close()
    assert len(ran) == 1
    assert sorted(map(repr, outcomes)) == sorted([repr(f"report {ran[0]}"), "rlock.SKIPPED", "rlock.SKIPPED"])
    assert not rlock.SKIPPED
    # A skip never waits for the job.
    assert all(after < 0.4 for after in skipped_after), skipped_after


def test_the_lock_stays_taken_until_at_least_after_the_start_even_when_the_job_raises(
    client: rlock.Client, server: RedisServer, name: str
) -> None:
    def fails() -> None:
        raise RuntimeError("the report failed")

    with pytest.raises(RuntimeError, match="the report failed"):
        client.run_once(name, fails, at_least=2)
    left = server.redis.pttl(lock_key(name))
    assert 0 < left <= 2000, left
    assert client.run_once(name, lambda: "again", at_least=2) is rlock.SKIPPED
    deadline = time.monotonic() + 10
    while (outcome := client.run_once(name, lambda: "next period", at_least=2)) is rlock.SKIPPED:
        assert time.monotonic() < deadline, "never ran again"
        time.sleep(0.05)
    assert outcome == "next period"


def test_the_decorator_and_asyncio_run_once_too(server: RedisServer, name: str,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REDIS_URL", server.url)
    monkeypatch.setattr(rlock, "_default", None)
    calls: List[str] = []

    @rlock.run_once(name, at_least=30)
    def nightly() -> str:
        calls.append("sync")
        return "done"

    assert nightly() == "done"
    assert nightly() is rlock.SKIPPED

    @rlock.run_once(name + ":async", at_least=30)
    async def nightly_async() -> str:
        calls.append("async")
        return "done"

    async def main() -> List[object]:
        return list(await asyncio.gather(nightly_async(), nightly_async(), nightly_async()))

    outcomes = asyncio.run(main())
    assert sorted(map(repr, outcomes)) == ["'done'", "rlock.SKIPPED", "rlock.SKIPPED"]
    assert calls == ["sync", "async"]


def test_bad_bounds_are_refused(client: rlock.Client, name: str) -> None:
    with pytest.raises(ValueError, match="at_least"):
        client.run_once(name, lambda: None, at_least=20, at_most=10)
    with pytest.raises(ValueError, match="at_most"):
        client.run_once(name, lambda: None, at_most=0.001)
    with pytest.raises(TypeError):
        client.run_once(name, lambda: None, at_least="soon")  # type: ignore[arg-type]


def test_the_jobs_own_exception_propagates_with_the_loss_as_a_note(
    client: rlock.Client, name: str
) -> None:
    def overruns() -> None:
        time.sleep(0.4)
        raise ValueError("the report failed")

    with pytest.raises(ValueError, match="the report failed") as raised:
        client.run_once(name, overruns, at_most=0.2)
    notes = getattr(raised.value, "__notes__", [])
    assert any("lost" in n for n in notes) or sys.version_info < (3, 11), notes


def test_a_cancelled_async_run_leaves_the_job_to_the_others(
    aclient: rlock.AsyncClient, server: RedisServer, name: str
) -> None:
    async def main() -> object:
        # Cancelled before the job runs (every client of the server paused
        # for 300 ms by the test, its acquisition with them): its lock is
        # given back once the acquisition lands. (Not a script spinning
        # until TIME moves: on Redis 8.2 and Valkey 8.1 a script's TIME
        # stays where it started, and the spin never ends.)
        server.redis.client_pause(300, all=True)
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(aclient.run_once(name, lambda: "ran", at_least=60), 0.05)
        # The others run it, once the abandoned acquisition has landed and
        # been given back (not after its hour-long lease).
        deadline = time.monotonic() + 5
        while (outcome := await aclient.run_once(name, lambda: "ran", at_least=60)) is rlock.SKIPPED:
            assert time.monotonic() < deadline, "the lock of a job nobody ran stayed taken"
            await asyncio.sleep(0.02)
        return outcome

    assert asyncio.run(main()) == "ran"
