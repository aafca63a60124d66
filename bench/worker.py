"""The Python worker of the benchmark: one process, driven by the harness over
JSON lines (one request per line on stdin, one reply per line on stdout).

    python worker.py URL [URL...]

Contenders (each on the same key name; each library keys it its own way):
  floor            redis-py sending the bare cycle: SET NX PX, then EVALSHA compare-and-delete
  rlock            redis-rlock (this project's release wheel); rlock-fair: in fair mode
  redispy-0.1      redis-py's Lock, default sleep=0.1
  redispy-0.001    redis-py's Lock, sleep=0.001
  python-redis-lock
  pottery          pottery's Redlock (one master, or every URL given)
  sem:rlock        one permit of a redis-rlock semaphore of `permits` permits
  sem:py-redis-semaphore  one permit of py-redis-semaphore's Semaphore (limit `permits`)
  read:rlock, write:rlock the two sides of a redis-rlock read-write lock

Requests: s1 (uncontended cycles), s2 (a block of acquire / hold / release
loops on one key), s7 (a handoff block between threads of this one
process), idle (holders and many blocked waiters). Timestamps are
time.monotonic_ns(), the CLOCK_MONOTONIC the Node and Rust workers read too.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from typing import Any, Callable, Dict, List, Tuple

import redis

COMPARE_AND_DELETE = (
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) "
    "else return 0 end"
)
TOKEN = "rlock-bench-floor"

URLS: List[str] = sys.argv[1:]
_clients: Dict[str, Any] = {}


def _redis(i: int = 0) -> redis.Redis:
    key = f"redis{i}"
    if key not in _clients:
        _clients[key] = redis.Redis.from_url(URLS[i])
    return _clients[key]


def _rlock_client() -> Any:
    if "rlock" not in _clients:
        import rlock

        _clients["rlock"] = rlock.Client(URLS[0] if len(URLS) == 1 else URLS)
    return _clients["rlock"]


# A contender is (acquire, release): acquire() waits until held and returns
# True (the floor makes one attempt: it only runs uncontended).
Contender = Tuple[Callable[[], bool], Callable[[], None]]


def make(name: str, key: str, ttl: float, permits: int = 1) -> Contender:
    if name == "floor":
        r = _redis()
        if "sha" not in _clients:
            _clients["sha"] = r.script_load(COMPARE_AND_DELETE)
        sha = _clients["sha"]

        def floor_acquire() -> bool:
            return bool(r.set(key, TOKEN, nx=True, px=int(ttl * 1000)))

        def floor_release() -> None:
            if r.evalsha(sha, 1, key, TOKEN) != 1:
                raise RuntimeError("floor: the key was not ours")

        return floor_acquire, floor_release
    if name in ("rlock", "rlock-fair"):
        fair = {"fair": True} if name == "rlock-fair" else {}
        lk = _rlock_client().lock(key, ttl=ttl, **fair)
        return lk.acquire, lk.release
    if name == "sem:rlock":
        sem = _rlock_client().semaphore(key, permits, ttl=ttl)
        return sem.acquire, sem.release
    if name in ("read:rlock", "write:rlock"):
        rw = _rlock_client().rw_lock(key, ttl=ttl)
        side = rw.read() if name == "read:rlock" else rw.write()
        return side.acquire, side.release
    if name == "sem:py-redis-semaphore":
        from redis_semaphore import Semaphore, SemaphoreConfig

        # blpop_timeout below redis-py's 5 s socket timeout: the library
        # caps its waits there itself, and warns unless told so.
        config = SemaphoreConfig(name=key, limit=permits, lock_timeout=ttl, blpop_timeout=4.0)
        peer = Semaphore(_redis(), config)
        return (lambda: peer.acquire().success), peer.release
    if name.startswith("redispy-"):
        lk = _redis().lock(key, timeout=ttl, sleep=float(name.split("-", 1)[1]))
        return (lambda: bool(lk.acquire(blocking=True))), lk.release
    if name == "python-redis-lock":
        import redis_lock

        lk = redis_lock.Lock(_redis(), key, expire=int(ttl))
        return (lambda: bool(lk.acquire(blocking=True))), lk.release
    if name == "pottery":
        from pottery import Redlock

        masters = {_redis(i) for i in range(len(URLS))}
        lk = Redlock(key=key, masters=masters, auto_release_time=ttl)
        return (lambda: bool(lk.acquire(blocking=True))), lk.release
    raise ValueError(f"unknown contender {name!r}")


def s1(req: Dict[str, Any]) -> Dict[str, Any]:
    """`n` uncontended cycles; with `pair`, that contender's cycles alternate
    with them in chunks of `chunk` (its latencies come back as `pair_lat`)."""
    n = req["n"]
    chunk = req.get("chunk") or n
    runs = [("lat", make(req["contender"], req["key"], 30.0, req.get("permits", 1)))]
    if req.get("pair"):
        runs.insert(0, ("pair_lat", make(req["pair"], req["key"] + ":pair", 30.0)))
    out: Dict[str, Any] = {"lat": [], "pair_lat": [], "wall": 0, "pair_wall": 0}
    clock = time.perf_counter_ns
    done = 0
    while done < n:
        k = min(chunk, n - done)
        for field, (acquire, release) in runs:
            lat = out[field]
            start = clock()
            for _ in range(k):
                t = clock()
                if not acquire():
                    raise RuntimeError("uncontended acquire failed")
                release()
                lat.append(clock() - t)
            out["wall" if field == "lat" else "pair_wall"] += clock() - start
        done += k
    return out


def s2(req: Dict[str, Any]) -> Dict[str, Any]:
    """Acquire / hold / release from `start` to `end`: with `counter`, the hold
    increments a shared non-atomic counter (a file); `hold_ms` sleeps inside,
    `pause_ms` after each release. One record `[wanted, acquired, releasing,
    released]` per acquisition."""
    permits = req.get("permits", 1)
    warm_acquire, warm_release = make(req["contender"], req["warm"], 30.0, permits)
    warm_acquire()
    warm_release()
    acquire, release = make(req["contender"], req["key"], 30.0, permits)
    fd = os.open(req["counter"], os.O_RDWR) if req.get("counter") else None
    hold, pause = req.get("hold_ms", 0) / 1000, req.get("pause_ms", 0) / 1000
    now = time.monotonic_ns
    end = req["end"]
    time.sleep(max(0, req["start"] - now()) / 1e9)
    rec = []
    errors = 0
    try:
        while True:
            wanted = now()
            if wanted >= end:
                break
            while True:
                try:
                    if acquire():
                        break
                except Exception:  # a peer gave up waiting: the caller waits on
                    pass
                errors += 1
            acquired = now()
            if fd is not None:
                # The non-atomic counter: two holders at once would lose an increment.
                value = int.from_bytes(os.pread(fd, 8, 0), "little")
                os.pwrite(fd, (value + 1).to_bytes(8, "little"), 0)
            if hold:
                time.sleep(hold)
            releasing = now()
            release()
            rec.append((wanted, acquired, releasing, now()))
            if pause:
                time.sleep(pause)
    finally:
        if fd is not None:
            os.close(fd)
    return {"rec": rec, "errors": errors}


def s7(req: Dict[str, Any]) -> Dict[str, Any]:
    """`handles` threads of this process, each with its own lock on one key
    (one client), loop acquire / increment a counter / release from `start`
    to `end`: one record `[wanted, acquired, releasing, released]` per
    acquisition, per thread."""
    contenders = [make(req["contender"], req["key"], 30.0) for _ in range(req["handles"])]
    warm_acquire, warm_release = make(req["contender"], req["warm"], 30.0)
    warm_acquire()
    warm_release()
    now = time.monotonic_ns
    end = req["end"]
    counter = [0]
    recs: List[List[Tuple[int, int, int, int]]] = [[] for _ in contenders]

    def run(i: int) -> None:
        acquire, release = contenders[i]
        rec = recs[i]
        while True:
            wanted = now()
            if wanted >= end:
                return
            acquire()
            acquired = now()
            # Not atomic: two holders at once could lose an increment.
            value = counter[0]
            counter[0] = value + 1
            releasing = now()
            release()
            rec.append((wanted, acquired, releasing, now()))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(contenders))]
    time.sleep(max(0, req["start"] - now()) / 1e9)
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {"recs": recs, "counter": counter[0]}


# What idle() keeps holding until the harness ends this process.
_held: List[Contender] = []


def idle(req: Dict[str, Any]) -> Dict[str, Any]:
    """`permits` holders (one thread each: a thread is an owner) with a long
    lease, then `waiters` threads waiting on the same key, of the kinds in
    `waiter_kinds` in turn (the contender's own by default)."""
    permits = req.get("permits", 1)
    kinds = req.get("waiter_kinds") or [req["contender"]]

    def hold() -> None:
        holder = make(req["contender"], req["key"], 60.0, permits)
        if not holder[0]():
            raise RuntimeError("the holder could not acquire")
        _held.append(holder)

    holders = [threading.Thread(target=hold) for _ in range(permits)]
    for t in holders:
        t.start()
    for t in holders:
        t.join()
    if len(_held) < permits:
        raise RuntimeError(f"{len(_held)} of {permits} holders acquired")
    for i in range(req["waiters"]):
        acquire, _release = make(kinds[i % len(kinds)], req["key"], 60.0, permits)
        threading.Thread(target=acquire, daemon=True).start()
    return {"ready": True}


def main() -> None:
    ops = {"s1": s1, "s2": s2, "s7": s7, "idle": idle}
    for line in sys.stdin:
        req = json.loads(line)
        if req["op"] == "exit":
            break
        try:
            reply = ops[req["op"]](req)
        except Exception as e:  # reported to the harness, which stops the run
            reply = {"error": f"{type(e).__name__}: {e}"}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
