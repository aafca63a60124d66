"""Beyond one Redis: a Redlock client over three independent masters (which
refuses read-write locks and semaphores), a Redis Cluster client, and
sync_replicas against a primary with a replica. Every
server is a real redis-server started (and stopped) here."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Iterator, List

import pytest

import rlock
from rlock_test_support.keys import lock_key
from rlock_test_support.servers import RedisCluster, RedisServer
from rlock_test_support.waiting import eventually

# --------------------------------------------------------------------------
# Redlock


@pytest.fixture
def masters() -> Iterator[List[RedisServer]]:
    servers = [RedisServer() for _ in range(3)]
    yield servers
    for s in servers:
        s.stop()


def urls(servers: List[RedisServer]) -> List[str]:
    return [s.url for s in servers]


def held_on(servers: List[RedisServer], name: str) -> int:
    return sum(1 for s in servers if s.running and s.redis.exists(lock_key(name)))


def connected(client: rlock.Client) -> rlock.Client:
    # The client connects on first use, to every master: make that use now,
    # while all of them are up.
    with client.lock("warm-up", blocking_timeout=5):
        pass
    return client


def test_a_redlock_client_holds_the_lock_on_a_majority_and_releases_it_everywhere(
    masters: List[RedisServer], name: str
) -> None:
    client = rlock.Client(urls(masters))
    rival = rlock.Client(urls(masters))
    try:
        with client.lock(name, blocking_timeout=5) as held:
            first = held.fencing_token
            assert first is not None
            # Acquisition returns once a majority granted it.
            assert held_on(masters, name) >= 2
            assert rival.lock(name, blocking=False).acquire() is False
        assert held_on(masters, name) == 0
        with rival.lock(name, blocking=False) as again:
            assert again.fencing_token is not None and again.fencing_token > first
    finally:
        client.close()
        rival.close()


def test_one_master_of_three_down_still_locks(masters: List[RedisServer], name: str) -> None:
    client = connected(rlock.Client(urls(masters)))
    try:
        masters[2].stop()
        lock = client.lock(name, blocking_timeout=5)
        assert lock.acquire() is True
        assert held_on(masters, name) == 2
        assert rlock.Client(urls(masters[:2])).lock(name, blocking=False).acquire() is False
        lock.release()
        assert held_on(masters, name) == 0
    finally:
        client.close()


def test_two_masters_of_three_down_is_a_timeout_naming_the_missed_quorum(
    masters: List[RedisServer], name: str
) -> None:
    client = connected(rlock.Client(urls(masters)))
    try:
        masters[1].stop()
        masters[2].stop()
        assert client.lock(name, blocking_timeout=0.5).acquire() is False
        with pytest.raises(rlock.LockTimeout, match="quorum") as caught:
            with client.lock(name, blocking=False):
                pytest.fail("the block ran without a quorum")
        assert isinstance(caught.value, TimeoutError)
        assert held_on(masters, name) == 0, "the one grant it got was given back"
    finally:
        client.close()


def test_two_masters_of_three_down_makes_async_acquire_return_false(
    masters: List[RedisServer], name: str
) -> None:
    async def scenario() -> None:
        client = rlock.AsyncClient(urls(masters))
        try:
            async with client.lock("warm-up", blocking_timeout=5):
                pass
            masters[0].stop()
            masters[1].stop()
            assert await client.lock(name, blocking_timeout=0.5).acquire() is False
            with pytest.raises(rlock.LockTimeout, match="quorum"):
                async with client.lock(name, blocking=False):
                    pytest.fail("the block ran without a quorum")
        finally:
            client.close()

    asyncio.run(scenario())


def test_a_redlock_client_refuses_read_write_locks_and_semaphores(
    masters: List[RedisServer], name: str
) -> None:
    # Independent masters would each count a different set of holders.
    client = rlock.Client(urls(masters))
    try:
        for use in (client.rw_lock(name).read().acquire, client.semaphore(name, 2).acquire):
            with pytest.raises(ValueError, match="not Redlock"):
                use()
        assert held_on(masters, name) == 0
    finally:
        client.close()


# --------------------------------------------------------------------------
# Redis Cluster (one cluster for the module: it costs seconds to build)


@pytest.fixture(scope="module")
def cluster() -> Iterator[RedisCluster]:
    c = RedisCluster(3)
    yield c
    c.stop()


def test_a_cluster_client_locks_names_on_every_master(cluster: RedisCluster, name: str) -> None:
    client = rlock.Client(cluster.urls, cluster=True)
    try:
        masters = set()
        for i in range(30):
            item = f"{name}:{i}"
            masters.add(cluster.master_of(lock_key(item)).port)
            with client.lock(item, blocking=False) as held:
                assert held.fencing_token is not None and held.fencing_token >= 1
                assert cluster.master_of(lock_key(item)).redis.exists(lock_key(item))
            assert not cluster.master_of(lock_key(item)).redis.exists(lock_key(item))
        assert len(masters) == 3, "the names spread over every master"
    finally:
        client.close()


def test_a_cluster_client_shares_read_write_locks_and_semaphores(cluster: RedisCluster, name: str) -> None:
    client = rlock.Client(cluster.urls, cluster=True)
    other = rlock.Client(cluster.urls, cluster=True)
    try:
        with client.rw_lock(name).read() as reading:
            with other.rw_lock(name, blocking=False).read() as also:
                assert also.fencing_token > reading.fencing_token
            assert not other.rw_lock(name).write().acquire(blocking=False)
        sem = client.semaphore(name, 2)
        with sem.lock(2):
            assert not other.semaphore(name, 2).acquire(blocking=False)
            assert sem.held() == 2
            node = cluster.master_of(lock_key(name))
            assert node.redis.exists(f"{lock_key(name)}:semaphore")
        assert sem.available() == 2
    finally:
        client.close()
        other.close()


def test_a_cluster_waiter_is_woken_by_the_sharded_release_message(
    cluster: RedisCluster, name: str
) -> None:
    holder = rlock.Client(cluster.urls, cluster=True)
    waiter = rlock.Client(cluster.urls, cluster=True)
    channel = f"{lock_key(name)}:released"
    node = cluster.master_of(lock_key(name))
    try:
        held = holder.lock(name, ttl=30)
        assert held.acquire(blocking=False)
        got: List[bool] = []
        thread = threading.Thread(target=lambda: got.append(waiter.lock(name).acquire(timeout=20)))
        thread.start()
        assert eventually(
            lambda: dict(node.redis.pubsub_shardnumsub(channel)).get(channel) == 1, within=5
        ), "the waiter subscribed on the slot's node"
        released = time.monotonic()
        held.release()
        thread.join(10)
        # The holder's lease had ~30 s left: only the message explains this.
        assert got == [True]
        assert time.monotonic() - released < 5
    finally:
        holder.close()
        waiter.close()


# --------------------------------------------------------------------------
# sync_replicas


def test_sync_replicas_acquires_what_a_replica_has_and_times_out_without_one(name: str) -> None:
    # Diskless sync starts after a 5 s delay by default (waiting for more
    # replicas to share one transfer); there is only one here.
    primary = RedisServer("--repl-diskless-sync-delay", "0")
    replica = RedisServer("--replicaof", "127.0.0.1", str(primary.port))
    client = rlock.Client(primary.url)
    try:
        assert eventually(
            lambda: replica.redis.info("replication").get("master_link_status") == "up",
            within=20,
        ), "the replica never synced"
        with client.lock(name, ttl=2, sync_replicas=1, blocking_timeout=5):
            # WAIT returned only once the replica acknowledged the write.
            assert replica.redis.exists(lock_key(name))

        replica.stop()
        unreplicated = f"{name}:alone"
        with pytest.raises(rlock.LockTimeout, match="replicas"):
            with client.lock(unreplicated, ttl=2, sync_replicas=1, blocking_timeout=1):
                pytest.fail("held without the replica")
        assert client.lock(unreplicated, ttl=2, sync_replicas=1, blocking=False).acquire() is False
        assert not primary.redis.exists(lock_key(unreplicated)), "the unreplicated grant was undone"
    finally:
        client.close()
        replica.stop()
        primary.stop()
