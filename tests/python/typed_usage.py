"""Type-checked by test_packaging.py with `mypy --strict`: the public API as a
user writes it, with the types the stubs promise."""

from __future__ import annotations

from typing import Optional

import rlock


def sync_usage() -> Optional[int]:
    client = rlock.Client("redis://127.0.0.1:6379", prefix="app")
    with client.lock("product:1001", ttl=10, timeout=3) as held:
        token: Optional[int] = held.fencing_token
        lost: bool = held.lost
        name: str = held.name
        assert not lost and name
    lock: rlock.Lock = client.lock("product:1001", blocking=False)
    got: bool = lock.acquire(timeout=1.5)
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
        async with lock:
            token: Optional[int] = lock.fencing_token
            assert token is not None
        got: bool = await lock.acquire(blocking=False)
        if got:
            await lock.extend(10)
            owned: bool = await lock.owned()
            await lock.release()
            return owned
        async with rlock.lock("sync-lock-in-a-task"):
            pass
        return await lock.locked()


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
