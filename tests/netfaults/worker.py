"""The Python worker of the network-fault suite: one long-lived process that
runs schedule after schedule, so hundreds of them cost no process start-ups.

Says {"ready": true} on stdout, then reads one JSON command per line on stdin
and answers one JSON line on stdout:

  {"op": "run", "run": ID, "url": URL | [URLS], "cluster": BOOL, "records": PATH, "tasks": [TASK...]}
      -> {"done": ID} once every task finished (records appended to PATH)
  {"op": "exit"} -> the process ends

A TASK is one owner (here a thread) taking one lock again and again:

  {"task": "py.0", "name": NAME, "ttl_ms": 400, "auto_renew": true, "fair": false,
   "timeout_ms": 1500 | null, "acquisitions": 3, "hold_ms": [50, 300],
   "gap_ms": [0, 50], "step_ms": 5, "nest": false, "seed": 7,
   "kind": "mutex" | "rw" | "semaphore", "sides": ["read", "write", ...],
   "nest_read": false, "permits": 3, "take": 1, "extend": false}

The lock is the name's mutex (`kind` left out), a side of its read-write lock
(`rw`: each acquisition's side from `sides`) or `take` permits of its
semaphore of `permits`. Each acquisition is held for a time drawn from
`hold_ms`, checking the lease every `step_ms`; `nest` takes the lock a second
time right after entering (with `nest_read`, a writer takes the read side) and
gives that re-entry back halfway through the hold (a nested release), or with
`nest_at_ms` that long into the hold (given back halfway if that is still to
come, else when letting go); `extend` extends the lease by hand halfway
through. Optional, for the nemesis (nemesis.py): `start_ms` delays the first
wait; `rounds` (a mutex, Python and Rust workers only) gives each
acquisition its own `ttl_ms`, `timeout_ms` and `hold_ms`, all of one owner
(here the task's thread), as an owner waiting again with another lease does;
`crash` never lets go of a holding it was told it lost (with `auto_renew`
off and a hold past the lease: a holder that crashed), its exit recorded
as lost.

Records (JSON lines, stamps are CLOCK_MONOTONIC ns, comparable across the
Python, Node, Rust and Go workers):

  wait    asks for the lock (side: read | write, for a read-write lock)
  waited  gave up (out: timeout | error:...)
  enter   holds it (tok: fencing token)
  nested  a nested acquire or release, or an extension, returned (each resets
          the lease in Redis, so the lease runs at most its length from this stamp);
          re: true when it was a nested acquire that took the lock again
  step    a moment the holder still believed it held the lock: stamped *before*
          asking whether it was told the lease ended, and the answer was no
  lost    the first time it saw it was told the lease ended
  rel     about to let go (the release request is sent after this stamp)
  exit    after letting go (out: released | lost | notowned | error:...)
  note    something a nested acquire or release or an extension answered besides success
  refused making the lock failed (what: the error), the task's only record
"""

from __future__ import annotations

import json
import random
import sys
import threading
import time
from typing import Any, Callable, Dict, Tuple

import rlock

now = time.monotonic_ns
clients: Dict[Tuple[str, bool], rlock.Client] = {}


class Records:
    def __init__(self, path: str) -> None:
        self.file = open(path, "a", buffering=1)
        self.lock = threading.Lock()

    def add(self, **fields: Any) -> None:
        line = json.dumps(fields, separators=(",", ":")) + "\n"
        with self.lock:
            self.file.write(line)


def client_for(url: Any, cluster: bool) -> rlock.Client:
    # One client per deployment for the life of the process, as an
    # application keeps one: faults hit its connections, it reconnects.
    key = (json.dumps(url), cluster)
    if key not in clients:
        clients[key] = rlock.Client(url, cluster=cluster)
    return clients[key]


def outcome(e: BaseException) -> str:
    if isinstance(e, rlock.LockLost):
        return "lost"
    if isinstance(e, rlock.LockNotOwned):
        return "notowned"
    return f"error:{type(e).__name__}:{e}"[:300]


def sides(client: rlock.Client, task: Dict[str, Any]) -> Callable[[str], rlock.Lock]:
    """The task's lock by side ("read" or "write"; a mutex or semaphore has one)."""
    timeout = task.get("timeout_ms")
    options: Dict[str, Any] = dict(
        ttl=task["ttl_ms"] / 1000,
        blocking_timeout=None if timeout is None else timeout / 1000,
        auto_renew=task["auto_renew"],
        fair=task["fair"],
    )
    kind = task.get("kind", "mutex")
    if kind == "rw":
        rw = client.rw_lock(task["name"], **options)
        return lambda side: rw.read() if side == "read" else rw.write()
    if kind == "semaphore":
        permits = client.semaphore(task["name"], task["permits"], **options).lock(task["take"])
        return lambda side: permits
    lock = client.lock(task["name"], **options)
    return lambda side: lock


def run_task(client: rlock.Client, task: Dict[str, Any], out: Records) -> None:
    rng = random.Random(task["seed"])
    k, name = task["task"], task["name"]
    try:
        side_of = sides(client, task)
    except Exception as e:
        out.add(e="refused", k=k, n=name, t=now(), what=outcome(e))
        return
    rounds = task.get("rounds")
    if task.get("start_ms"):
        time.sleep(task["start_ms"] / 1000)
    for i in range(task["acquisitions"]):
        side = task["sides"][i] if "sides" in task else None
        if rounds:
            # This thread's lock again, with this round's lease and timeout.
            side_of = sides(client, {**task, **rounds[i]})
        hold_ms = rounds[i].get("hold_ms", task["hold_ms"]) if rounds else task["hold_ms"]
        lock = side_of(side or "write")
        inner = side_of("read") if task.get("nest_read") else lock
        out.add(e="wait", k=k, n=name, t=now(), **({"side": side} if side else {}))
        try:
            got = lock.acquire()
        except Exception as e:  # reported, never fatal: the checker judges it
            out.add(e="waited", k=k, n=name, t=now(), out=outcome(e))
            continue
        if not got:
            out.add(e="waited", k=k, n=name, t=now(), out="timeout")
            continue
        tok = lock.fencing_token
        out.add(e="enter", k=k, n=name, tok=tok, t=now())
        hold = int(rng.uniform(*hold_ms) * 1e6)
        entered = now()
        end, middle = entered + hold, entered + hold // 2
        nested = halfway = False
        # When the nested acquire comes (None: none, or done).
        nest_at = entered + int(task.get("nest_at_ms", 0) * 1e6) if task.get("nest") else None
        while True:
            if nest_at is not None and now() >= nest_at:
                nest_at = None
                try:
                    nested = inner.acquire(blocking=False)
                except Exception as e:
                    out.add(e="note", k=k, n=name, t=now(), what=f"nested acquire: {outcome(e)}")
                out.add(e="nested", k=k, n=name, tok=tok, t=now(), **({"re": True} if nested else {}))
            t = now()
            if lock.lost:
                out.add(e="lost", k=k, n=name, tok=tok, t=now())
                break
            out.add(e="step", k=k, n=name, tok=tok, t=t)
            if t >= end:
                break
            if not halfway and t >= middle:
                halfway = True
                if nested:
                    nested = False
                    try:
                        inner.release()
                    except Exception as e:
                        out.add(e="note", k=k, n=name, t=now(), what=f"nested release: {outcome(e)}")
                    out.add(e="nested", k=k, n=name, tok=tok, t=now())
                if task.get("extend"):
                    try:
                        lock.extend()
                    except Exception as e:
                        out.add(e="note", k=k, n=name, t=now(), what=f"extend: {outcome(e)}")
                    out.add(e="nested", k=k, n=name, tok=tok, t=now())
            time.sleep(task["step_ms"] / 1000)
        if task.get("crash") and lock.lost:
            out.add(e="exit", k=k, n=name, tok=tok, t=now(), out="lost")
            continue
        out.add(e="rel", k=k, n=name, tok=tok, t=now())
        try:
            if nested:
                inner.release()
            lock.release()
            result = "released"
        except Exception as e:
            result = outcome(e)
        out.add(e="exit", k=k, n=name, tok=tok, t=now(), out=result)
        gap = rng.uniform(*task["gap_ms"])
        if gap:
            time.sleep(gap / 1000)


def run(cmd: Dict[str, Any]) -> None:
    client = client_for(cmd["url"], cmd.get("cluster", False))
    out = Records(cmd["records"])
    threads = [threading.Thread(target=run_task, args=(client, task, out)) for task in cmd["tasks"]]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    out.file.close()


def main() -> None:
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        cmd = json.loads(line)
        if cmd["op"] == "exit":
            break
        run(cmd)
        print(json.dumps({"done": cmd["run"]}), flush=True)
    for c in clients.values():
        c.close()


if __name__ == "__main__":
    main()
