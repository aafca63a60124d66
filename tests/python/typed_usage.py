"""Type-checked by test_packaging.py with `mypy --strict`: the public API as a
user writes it, with the types the stubs promise."""

from __future__ import annotations

import json
import warnings
from typing import Any, Dict, List, Optional

import redis
import redis.asyncio

import rlock

version: str = rlock.__version__


def rebuild_cache(fence: int) -> None:
    print(fence)


def readme_example() -> None:
    client = rlock.Client()
    with client.lock("product:1001", ttl=10, blocking_timeout=3) as held:
        rebuild_cache(fence=held.fencing_token)
    with client.lock("product:1001") as lock:
        same: rlock.HeldLock = lock
        also: rlock.Lock = lock
        assert same is also


def sync_usage() -> Optional[int]:
    client = rlock.Client("redis://127.0.0.1:6379", prefix="app")
    with client.lock("product:1001", ttl=10, blocking_timeout=3) as held:
        token: Optional[int] = held.fencing_token
        fence: int = held.fencing_token
        assert fence == token
        lost: bool = held.lost
        name: str = held.name
        assert not lost and name
    lock: rlock.Lock = client.lock("product:1001", blocking=False)
    got: bool = lock.acquire(timeout=1.5) or lock.acquire(blocking_timeout=1.5)
    if got:
        lock.extend(20)
        lock.extend()
        assert lock.owned() and lock.locked()
        lock.release()
    with rlock.lock("x", max_hold=60, auto_renew=True, sync_replicas=1):
        pass
    client.close()
    redlock = rlock.Client(["redis://a:6379", "redis://b:6379", "redis://c:6379"])
    cluster = rlock.Client(("redis://a:7000", "redis://b:7000"), cluster=True)
    private = rlock.Client("rediss://db:6380", tls_ca="/etc/ssl/db-ca.pem")
    pem = rlock.AsyncClient("rediss://db:6380", tls_ca=b"-----BEGIN CERTIFICATE-----")
    for c in (redlock, cluster, private):
        c.lock("x", sync_replicas=2).acquire()
    pem.close()
    return token


async def async_usage() -> bool:
    async with rlock.AsyncClient() as client:
        lock: rlock.AsyncLock = client.lock("product:1001", ttl=5.5)
        async with lock as held:
            token: Optional[int] = lock.fencing_token
            fence: int = held.fencing_token
            aheld: rlock.AsyncHeldLock = held
            assert token == fence and await aheld.owned()
        async with rlock.lock("sync-in-a-task") as sync_held:
            rebuild_cache(sync_held.fencing_token)
        got: bool = await lock.acquire(blocking=False)
        if got:
            await lock.extend(10)
            owned: bool = await lock.owned()
            await lock.release()
            return owned
        async with rlock.lock("sync-lock-in-a-task"):
            pass
        return await lock.locked()


def shared_locks() -> None:
    client = rlock.Client()
    rw: rlock.RwLock = client.rw_lock("catalog", ttl=10, fair=True)
    with rw.read() as reading:
        fence: int = reading.fencing_token
        rebuild_cache(fence)
    writing: rlock.Lock = rw.write()
    if writing.acquire(timeout=1):
        writing.release()
    sem: rlock.Semaphore = client.semaphore("exports", 4, blocking_timeout=3)
    size: int = sem.size
    with sem as held:
        rebuild_cache(held.fencing_token)
    got: bool = sem.acquire(blocking=False, n=2)
    several: rlock.Lock = sem.lock(2)
    free: int = sem.available()
    used: int = sem.held()
    assert got and several and size and free + used
    try:
        rw.write().acquire()
    except rlock.LockUpgradeError as e:
        base: rlock.LockError = e
        print(base.name)


async def async_shared_locks(client: rlock.AsyncClient) -> int:
    rw: rlock.AsyncRwLock = client.rw_lock("catalog")
    async with rw.write() as held:
        fence: int = held.fencing_token
        rebuild_cache(fence)
    sem: rlock.AsyncSemaphore = client.semaphore("exports", permits=4)
    async with sem:
        pass
    several: rlock.AsyncLock = sem.lock(2)
    got: bool = await sem.acquire(n=2) or await several.acquire()
    assert got
    return await sem.available() + await sem.held()


async def reuse_and_close(r: redis.asyncio.Redis) -> None:
    aclient: rlock.AsyncClient = rlock.AsyncClient.from_redis(r, prefix="app")
    await aclient.close()
    aclient.close()
    await aclient.aclose()
    client: rlock.Client = rlock.Client.from_redis(redis.Redis(), tls_ca=b"pem")
    client.close()


def long_leases() -> None:
    warnings.simplefilter("error", rlock.LongTtlWarning)
    rlock.lock("report", ttl=7200, allow_long_ttl=True)
    rlock.lock("report", ttl=7200, max_hold=7200)


@rlock.synchronized("job", ttl=10)
def job(n: int) -> str:
    return str(n)


@rlock.synchronized("ajob")
async def ajob(n: int) -> int:
    return n


def errors() -> None:
    try:
        sync_usage()
    except rlock.LockNotOwned as e:
        reason: Optional[str] = e.reason
        print(reason)
    except rlock.LockTimeout as e:
        timeout: TimeoutError = e
        print(timeout)
    except rlock.LockLost as e:
        print(e.name)
    except rlock.ConnectionError as e:
        conn: ConnectionError = e
        print(conn)
    except rlock.LockError:
        pass
    text: str = job(3)
    print(text)


def load_product() -> Dict[str, int]:
    return {"id": 1001, "price": 12}


async def fetch_product() -> Dict[str, int]:
    return {"id": 1001, "price": 12}


class JsonLines:
    format = "jsonl"

    def dumps(self, value: Any) -> bytes:
        return json.dumps(value).encode() + b"\n"

    def loads(self, data: bytes) -> Any:
        return json.loads(data)


def cache_usage() -> int:
    client = rlock.Client()
    product: Dict[str, int] = client.cached("product:1001", load_product, ttl=60)
    maybe: Optional[str] = client.cached("user:7", lambda: None, ttl=60, none_ttl=5)
    raw: bytes = client.cached(
        "avatar:7", lambda: b"png", ttl=60, stale=30, jitter=0.2, early=0, timeout=3,
        on_error="retry", lock_ttl=10, serializer="pickle",
    )
    mine: List[int] = client.cached("mine", lambda: [1], ttl=1, serializer=JsonLines())
    gone: bool = client.invalidate("product:1001")
    try:
        client.cached("broken", load_product, ttl=60)
    except rlock.CacheLoaderError as e:
        base: rlock.LockError = e
        print(base.name, e.reason)
    assert maybe is None and raw and mine and gone
    return product["price"]


async def async_cache_usage(aclient: rlock.AsyncClient, client: rlock.Client) -> int:
    a: Dict[str, int] = await aclient.cached("product:1001", fetch_product, ttl=60)
    b: Dict[str, int] = await aclient.cached("product:1001", load_product, ttl=60)
    c: Dict[str, int] = await client.cached("product:1001", fetch_product, ttl=60)
    gone: bool = await aclient.invalidate("product:1001")
    assert gone
    return a["price"] + b["price"] + c["price"]


@rlock.cached("product:{0}", ttl=60)
def product_by_id(id: int) -> Dict[str, int]:
    return {"id": id}


@rlock.cached(lambda id, lang="en": f"page:{id}:{lang}", ttl=60, stale=600)
async def page(id: int, lang: str = "en") -> str:
    return f"{id} {lang}"


async def decorated_usage() -> str:
    fn: rlock.CachedFunction[[int], Dict[str, int]] = product_by_id
    found: Dict[str, int] = fn(1001)
    gone: bool = product_by_id.invalidate(1001)
    text: str = await page(3, lang="fr")
    again: bool = await page.invalidate(3, lang="fr")
    assert found and gone and again
    return text
