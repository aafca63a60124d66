"""Client.from_redis(r): a client of the server(s) a redis-py client talks to,
its host, port, db, user, password and TLS read off the redis-py client; the
connections are the rlock client's own. Real redis-py clients, real servers."""

from __future__ import annotations

import asyncio
import pathlib
from typing import Any, Iterator

import pytest
import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.cluster
import redis.sentinel

import rlock
from rlock_test_support.keys import lock_key
from rlock_test_support.servers import RedisCluster, RedisServer, Sentinel, free_port

PASSWORD = "s3cret:@/%"  # every character a URL would need encoded


@pytest.fixture(scope="module")
def guarded() -> Iterator[RedisServer]:
    """A server with a password, and a user `app` of its own password."""
    s = RedisServer("--requirepass", PASSWORD)
    s.redis.acl_setuser("app", enabled=True, passwords=["+app-pass"], keys=["*"], channels=["*"], commands=["+@all"])
    yield s
    s.stop()


def held_in(server: RedisServer, db: int, name: str) -> bool:
    return bool(redis.Redis(port=server.port, password=PASSWORD, db=db).exists(lock_key(name)))


def test_a_redis_client_with_password_and_db_is_reused(guarded: RedisServer, name: str) -> None:
    r = redis.Redis(host="127.0.0.1", port=guarded.port, db=3, password=PASSWORD)
    client = rlock.Client.from_redis(r, prefix="rlock")
    try:
        with client.lock(name, blocking_timeout=5) as held:
            assert held_in(guarded, 3, name) and not held_in(guarded, 0, name)
            assert held.fencing_token >= 1
        assert not held_in(guarded, 3, name)
        assert PASSWORD not in repr(client) and "/3" in repr(client)
    finally:
        client.close()
        r.close()


def test_a_user_given_in_a_redis_py_url_is_reused(guarded: RedisServer, name: str) -> None:
    r = redis.Redis.from_url(f"redis://app:app-pass@127.0.0.1:{guarded.port}/2")
    client = rlock.Client.from_redis(r)
    try:
        with client.lock(name, blocking_timeout=5):
            assert held_in(guarded, 2, name)
    finally:
        client.close()


def test_an_asyncio_redis_client_is_reused_by_either_client(guarded: RedisServer, name: str) -> None:
    async def main() -> None:
        r = redis.asyncio.Redis(host="127.0.0.1", port=guarded.port, db=1, password=PASSWORD)
        async with rlock.AsyncClient.from_redis(r) as client:
            async with client.lock(name, blocking_timeout=5) as held:
                assert held_in(guarded, 1, name)
                assert held.fencing_token >= 1
        await r.aclose()

    asyncio.run(main())
    sync_from_async = rlock.Client.from_redis(redis.asyncio.Redis(port=guarded.port, password=PASSWORD))
    with sync_from_async.lock(name, blocking_timeout=5):
        assert held_in(guarded, 0, name)
    sync_from_async.close()


def test_tls_and_its_ca_are_read_from_the_redis_client(name: str) -> None:
    server = RedisServer(tls=True)
    try:
        for r in (
            redis.Redis(port=server.port, ssl=True, ssl_ca_certs=server.ca_file),
            redis.Redis(port=server.port, ssl=True, ssl_ca_data=pathlib.Path(server.ca_file).read_text()),
        ):
            client = rlock.Client.from_redis(r)
            assert repr(client).startswith("rlock.Client('rediss://")
            with client.lock(name, blocking_timeout=5):
                assert server.redis.exists(lock_key(name))
            client.close()
    finally:
        server.stop()


@pytest.fixture(scope="module")
def cluster() -> Iterator[RedisCluster]:
    c = RedisCluster()
    yield c
    c.stop()


def test_a_redis_cluster_client_makes_a_cluster_client(cluster: RedisCluster, name: str) -> None:
    seed = cluster.nodes[0]
    rc = redis.cluster.RedisCluster(host="127.0.0.1", port=seed.port)
    client = rlock.Client.from_redis(rc)
    try:
        assert "cluster=True" in repr(client)
        with client.lock(name, blocking_timeout=5):
            assert cluster.master_of(lock_key(name)).redis.exists(lock_key(name))
    finally:
        client.close()
        rc.close()

    async def main() -> None:
        arc = redis.asyncio.cluster.RedisCluster(host="127.0.0.1", port=seed.port)
        async with rlock.AsyncClient.from_redis(arc) as aclient:
            async with aclient.lock(name, blocking_timeout=5):
                assert cluster.master_of(lock_key(name)).redis.exists(lock_key(name))
        await arc.aclose()

    asyncio.run(main())


def test_a_sentinel_managed_client_makes_a_sentinel_url() -> None:
    # Only the URL is checked here: the client connects on first use.
    one, two = free_port(), free_port()
    sentinel = redis.sentinel.Sentinel([("127.0.0.1", one), ("127.0.0.1", two)], password=PASSWORD, db=2)
    client = rlock.Client.from_redis(sentinel.master_for("mymaster"))
    assert repr(client) == f"rlock.Client('redis+sentinel://:***@127.0.0.1:{one},127.0.0.1:{two}/mymaster/2', prefix='rlock')"
    # Locks are taken on the master; what the URL cannot carry is refused, not dropped.
    with pytest.raises(ValueError, match="master"):
        rlock.Client.from_redis(sentinel.slave_for("mymaster"))
    with pytest.raises(ValueError, match="TLS"):
        rlock.Client.from_redis(sentinel.master_for("mymaster", ssl=True))
    guarded = redis.sentinel.Sentinel([("127.0.0.1", one)], sentinel_kwargs={"password": "sentinel-pass"})
    with pytest.raises(ValueError, match="Sentinels' own") as caught:
        rlock.Client.from_redis(guarded.master_for("mymaster"))
    assert "sentinel-pass" not in str(caught.value)


def test_a_sentinel_managed_client_locks_on_the_master_sentinel_names(name: str) -> None:
    master = RedisServer()
    sentinel = Sentinel(("mymaster", "127.0.0.1", master.port, 1))
    try:
        r = redis.sentinel.Sentinel([("127.0.0.1", sentinel.port)], db=1).master_for("mymaster")
        client = rlock.Client.from_redis(r)
        with client.lock(name, blocking_timeout=5) as held:
            assert held.fencing_token >= 1
            assert redis.Redis(port=master.port, db=1).exists(lock_key(name))
        assert not redis.Redis(port=master.port, db=1).exists(lock_key(name))
        client.close()
    finally:
        sentinel.stop()
        master.stop()


@pytest.mark.parametrize("make", [rlock.Client, rlock.AsyncClient], ids=lambda c: c.__name__)
def test_anything_else_is_a_TypeError_naming_what_is_accepted(make: Any) -> None:
    for other in ("redis://127.0.0.1:6379", object(), redis.ConnectionPool()):
        with pytest.raises(TypeError, match=r"redis\.Redis, redis\.asyncio\.Redis"):
            make.from_redis(other)
    # A redis-py client where a URL is expected: the message points to from_redis.
    with pytest.raises(TypeError, match=r"from_redis"):
        make(redis.Redis())
    with pytest.raises(ValueError, match="Unix socket"):
        make.from_redis(redis.Redis(unix_socket_path="/tmp/redis.sock"))
