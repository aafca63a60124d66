"""A Python worker of the fault suite (sync or asyncio face of `rlock`).

Run as `python worker.py CONFIG_JSON`. It connects, prints `ready`, waits for
`go` on stdin, then takes its locks round after round, appending one JSON line
per event to its records file, stamped with CLOCK_MONOTONIC (comparable with
every other worker's stamps on this machine):

  wait    before asking for a lock            exit    after releasing (out: released | lost | error:...)
  enter   the lock is held (tok: its token)   waited  gave up without it (out: timeout | error:...)
  step    a moment the holder still believed it held the lock (stamped *before*
          asking `lost`); a mutex holder or writer also wrote its token to the
          fenced storage (ok: accepted)
  lost    the first moment the holder saw it was told the lease had ended

`kind` chooses the lock: "mutex" (the default), "read" or "write" (the sides
of the read-write lock of the name), or "semaphore" (one of `permits`
permits); a list of kinds picks one per round. `wait` and `enter` records of
the other kinds carry `kind` (and `permits`).

Besides the names, lease and timings, the config chooses the deployment and
the lock's mode: `url` is one URL or a list of them (a Redlock over
independent masters, or with `cluster: true` the seeds of one Redis Cluster),
and `fair: true` waits in line. `until_file` makes every holding last until
that file exists (instead of `hold_ms`), so the suite chooses when it ends.

In cycles mode it only takes and releases (one `cycle` line each), then prints
`cycled` and keeps its client open until told `exit`, so the suite can watch
that nothing renews after release.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import socket
import sys
import threading
import time
from typing import Any, Callable, Dict, List, Optional

import rlock

from kinds import choose, writes

MS = 1_000_000
now = time.monotonic_ns
cfg: Dict[str, Any] = json.loads(sys.argv[1])
rng = random.Random(cfg.get("seed"))
out = open(cfg["records"], "a", buffering=1)


def rec(**fields: Any) -> None:
    fields["w"] = cfg["id"]
    out.write(json.dumps(fields, separators=(",", ":")) + "\n")


class Storage:
    def __init__(self, path: str) -> None:
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.connect(path)
        self.file = self.sock.makefile("rwb", buffering=0)

    def write(self, name: str, token: int) -> bool:
        self.sock.sendall(f"{name} {token} {cfg['id']}\n".encode())
        return self.file.readline() == b"ok\n"


def seconds(ms: Optional[float]) -> Optional[float]:
    return None if ms is None else ms / 1000


def hold_ms() -> float:
    lo, hi = cfg.get("hold_ms", [0, 0])
    return rng.uniform(lo, hi)


def over(t: int, end: int) -> bool:
    """Whether a holding that began before `t` is over: at `end`, or once the
    suite created `until_file`."""
    until = cfg.get("until_file")
    return os.path.exists(until) if until else t >= end


def lock_options() -> Dict[str, Any]:
    return {"ttl": cfg["ttl_ms"] / 1000, "blocking_timeout": seconds(cfg.get("timeout_ms")), "fair": cfg.get("fair", False)}


def lock_of(client: Any, name: str, kind: Dict[str, Any]) -> Any:
    """The lock of `kind` on `name`, made by a Client or an AsyncClient."""
    k = kind.get("kind", "mutex")
    if k == "semaphore":
        return client.semaphore(name, permits=kind["permits"], **lock_options())
    if k in ("read", "write"):
        rw = client.rw_lock(name, **lock_options())
        return rw.read() if k == "read" else rw.write()
    return client.lock(name, **lock_options())


def pause() -> None:
    lo, hi = cfg.get("gap_ms", [0, 0])
    if hi:
        time.sleep(rng.uniform(lo, hi) / 1000)


def rounds() -> Any:
    """Round numbers while the worker should start another round: `rounds`
    of them, or as many as start within `for_ms` of `go`."""
    n = 0
    until = now() + int(cfg.get("for_ms", 1e9) * MS)
    while n < cfg.get("rounds", 1 << 60) and now() < until:
        yield n
        n += 1


def hog_gil(until: int) -> threading.Thread:
    """A thread that keeps the GIL until `until`: pure bytecode with a switch
    interval so long the interpreter never asks it to yield."""

    def spin() -> None:
        x = 0
        while now() < until:
            x += 1

    sys.setswitchinterval(1000)
    t = threading.Thread(target=spin)
    t.start()
    return t


def hold(name: str, kind: Dict[str, Any], held: Any, storage: Storage, sleep: Callable[[float], Any]) -> Any:
    """The critical section, as a generator of sleeps (shared by both faces)."""
    tok = held.fencing_token
    start = now()
    rec(e="enter", n=name, tok=tok, t=start, **kind)
    end = start + int(hold_ms() * MS)
    if cfg.get("hog"):
        hog_gil(end).join()
        sys.setswitchinterval(0.005)
    while True:
        t = now()
        if held.lost:
            rec(e="lost", n=name, tok=tok, t=t)
            return
        if writes(kind):
            rec(e="step", n=name, tok=tok, t=t, ok=storage.write(name, tok))
        else:
            rec(e="step", n=name, tok=tok, t=t)
        if over(t, end):
            return
        yield sleep(cfg.get("step_ms", 5) / 1000)


def error_out(e: BaseException) -> str:
    return f"error:{type(e).__name__}:{e}"[:300]


def settle(name: str, tok: Optional[int], error: Optional[BaseException], held_through: bool = False) -> None:
    """Records how a round ended: let go (tok set) or gave up waiting. With
    `held_through` (the holding ran to its end), an error is its release's,
    recorded as `error:release:...`: the checker knows the lock may then
    have stayed this owner's (this thread's or task's, the same every round)."""
    if error is None:
        rec(e="exit", n=name, tok=tok, t=now(), out="released")
    elif isinstance(error, rlock.LockTimeout):
        rec(e="waited", n=name, t=now(), out="timeout")
    elif isinstance(error, rlock.LockLost):
        rec(e="exit", n=name, tok=tok, t=now(), out="lost")
    else:  # reported, never fatal: the checker judges it
        out = error_out(error).replace("error:", "error:release:", 1) if held_through else error_out(error)
        rec(e="exit" if tok is not None else "waited", n=name, tok=tok, t=now(), out=out)


def run_sync(client: rlock.Client, storage: Storage) -> None:
    for _ in rounds():
        name, kind = choose(rng, cfg)
        rec(e="wait", n=name, t=now(), **kind)
        tok, error, held_through = None, None, False
        try:
            with lock_of(client, name, kind) as held:
                tok = held.fencing_token
                for _ in hold(name, kind, held, storage, time.sleep):
                    pass
                held_through = True
        except Exception as e:
            error = e
        settle(name, tok, error, held_through)
        pause()


async def run_async(client: rlock.AsyncClient, storage: Storage) -> None:
    for _ in rounds():
        name, kind = choose(rng, cfg)
        rec(e="wait", n=name, t=now(), **kind)
        tok, error, held_through = None, None, False
        try:
            async with lock_of(client, name, kind) as held:
                tok = held.fencing_token
                for s in hold(name, kind, held, storage, asyncio.sleep):
                    await s
                held_through = True
        except Exception as e:
            error = e
        settle(name, tok, error, held_through)
        pause()


def run_cycles(client: rlock.Client) -> None:
    """Take and release as fast as possible; every `slow_every`-th holding lasts
    about a renewal period, so releases race the watchdog's renewals."""
    names: List[str] = cfg["names"]
    locks = {n: client.lock(n, **lock_options()) for n in names}
    slow_every = cfg.get("slow_every", 0)
    period = cfg["ttl_ms"] / 3000
    rows = []
    for i in range(cfg["cycles"]):
        name = names[rng.randrange(len(names))]
        lock = locks[name]
        t0 = now()
        try:
            if not lock.acquire():
                rows.append({"e": "waited", "n": name, "t0": t0, "t": now(), "out": "timeout"})
                continue
        except Exception as e:
            rows.append({"e": "waited", "n": name, "t0": t0, "t": now(), "out": error_out(e)})
            continue
        t1 = now()
        tok = lock.fencing_token
        if slow_every and i % slow_every == slow_every - 1:
            time.sleep(period * rng.uniform(0.9, 1.1))
        t2 = now()
        try:
            lock.release()
            status = "released"
        except Exception as e:
            status = error_out(e)
        rows.append({"e": "cycle", "n": name, "tok": tok, "t0": t0, "t1": t1, "t2": t2, "t": now(), "out": status})
    for row in rows:
        rec(**row)


def main() -> None:
    flavour = cfg.get("flavour", "sync")
    client = (rlock.AsyncClient if flavour == "async" else rlock.Client)(cfg["url"], cluster=cfg.get("cluster", False))
    storage = Storage(cfg["storage"])
    # Connect before saying ready, so start-up costs stay out of the scenario.
    probe = client.lock(cfg["names"][0]).locked()
    if flavour == "async":
        asyncio.run(probe)  # type: ignore[arg-type]
    print("ready", flush=True)
    assert sys.stdin.readline().strip() == "go"
    if "cycles" in cfg:
        run_cycles(client)  # type: ignore[arg-type]
        print("cycled", flush=True)
        sys.stdin.readline()
    elif flavour == "async":
        asyncio.run(run_async(client, storage))  # type: ignore[arg-type]
    else:
        run_sync(client, storage)  # type: ignore[arg-type]
    client.close()
    out.close()
    print("done", flush=True)


if __name__ == "__main__":
    main()
