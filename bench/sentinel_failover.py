"""How often a Sentinel failover lets a second holder in, with and without
sync_replicas=1. A measurement for the README, not a pass/fail test.

    make python-package      # or: make test-python (builds rlock into .venv)
    .venv/bin/python bench/sentinel_failover.py [--rounds 50] [--max-minutes 20]

Starts, on loopback only, a primary, one replica and three sentinels
(`sentinel down-after-milliseconds 500`), like tests/support/rust/src/sentinel.rs.
Each round a holder (an rlock.Client on the redis+sentinel:// URL) acquires a
lock, the primary is killed (SIGKILL) at once, and once Sentinel has promoted
the replica a rival client tries the same name on the new primary. A rival
that gets it is a second holder: the first one's 30 s lease has not ended.
The killed server then comes back empty as the new primary's replica, and
the next round starts once Sentinel and the replica are settled.

Two scenarios, `--rounds` failovers each per mode:
  healthy link  the replica is connected and in sync when the lock is taken
                (loopback: replication lag is microseconds);
  link down     the primary's replication link is cut just before the
                acquisition and restored 0.5 s later, as a network blip
                between primary and replica would (the replicas log in as a
                user `repl`, which the primary turns off, then on again; the
                replica reconnects within a second of that). Clients and
                sentinels reach the primary all along. Without sync_replicas
                the acquisition then exists on the primary only when it dies;
                with it, the acquisition waits until the replica has it.
In the healthy-link scenario one failover serves both modes: the synced lock
is taken first, then the unsynced one, then the primary dies (so the WAIT of
the first cannot cover the second). In the link-down scenario each failover
serves one mode, alternating.

Stops on its own: every wait has a deadline, and the whole run stops after
--max-minutes (reporting the rounds done). Every server it starts is stopped
on exit, also on Ctrl-C or failure.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from typing import Callable, Dict, List, Tuple

import redis
from rlock_test_support.servers import RedisServer, Sentinel
from rlock_test_support.waiting import wait_until

import rlock

SERVICE = "rlockmaster"
TTL = 30.0
REPL_PASSWORD = "replication-only"
LINK_DOWN_FOR = 0.5
# No persistence (RedisServer's default): a killed server comes back empty,
# as a fresh node would. Diskless sync without its 5 s delay: one replica
# here. Replicas log in as the user `repl`, so that turning that user off on
# a primary cuts its replication link (and keeps it cut) while clients and
# sentinels still reach it.
DATA = ("--repl-diskless-sync-delay", "0",
        "--user", "repl", "on", f">{REPL_PASSWORD}", "~*", "&*", "+@all",
        "--masteruser", "repl", "--masterauth", REPL_PASSWORD)


def quietly(f: Callable[[], bool]) -> Callable[[], bool]:
    def run() -> bool:
        try:
            return f()
        except (redis.RedisError, OSError):
            return False

    return run


def conn(s: RedisServer) -> "redis.Redis[str]":
    """A client whose every call ends within 2 s, so that a condition polled
    by wait_until cannot hold it past its deadline."""
    return redis.Redis(port=s.port, decode_responses=True, socket_timeout=2)


def replica_of(primary: RedisServer) -> Tuple[str, ...]:
    return (*DATA, "--replicaof", "127.0.0.1", str(primary.port))


class Deployment:
    """A primary, a replica and three sentinels; the two data servers swap
    roles at every failover."""

    def __init__(self) -> None:
        self.servers: List[RedisServer] = []
        self.sentinels: List[Sentinel] = []
        try:
            self.servers.append(RedisServer(*DATA))
            self.servers.append(RedisServer(*replica_of(self.servers[0])))
            self.primary, self.replica = self.servers
            for _ in range(3):
                self.sentinels.append(Sentinel((SERVICE, "127.0.0.1", self.primary.port, 2)))
            self.settle()
        except BaseException:
            self.stop()
            raise

    @property
    def url(self) -> str:
        hosts = ",".join(f"127.0.0.1:{s.port}" for s in self.sentinels)
        return f"redis+sentinel://{hosts}/{SERVICE}"

    def sentinel_master(self, s: Sentinel) -> int:
        _, port = conn(s).execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", SERVICE)
        return int(port)

    def calm(self) -> bool:
        """No sentinel has a failover in progress."""
        for s in self.sentinels:
            fields = conn(s).execute_command("SENTINEL", "MASTER", SERVICE)
            info = dict(zip(fields[::2], fields[1::2])) if isinstance(fields, list) else fields
            if info["flags"] != "master":
                return False
        return True

    def settled(self) -> bool:
        """Every sentinel names the primary and sees the replica healthy, and
        the replica is in sync."""
        link = conn(self.replica).info("replication").get("master_link_status")
        if link != "up":
            return False
        if not self.calm():
            return False
        for s in self.sentinels:
            if self.sentinel_master(s) != self.primary.port:
                return False
            replicas = conn(s).execute_command("SENTINEL", "REPLICAS", SERVICE)
            seen = [dict(zip(r[::2], r[1::2])) if isinstance(r, list) else r for r in replicas]
            if not any(
                int(r["port"]) == self.replica.port and r["flags"] == "slave"
                and r.get("master-link-status") == "ok"
                for r in seen
            ):
                return False
        return True

    def settle(self) -> None:
        wait_until(quietly(self.settled), 60, "Sentinel and the replica to settle")

    def fail_over(self) -> None:
        """Kills the primary, waits until every sentinel names the replica,
        then brings the old primary back (empty) as the new one's replica."""
        old, new = self.primary, self.replica
        old.kill()
        wait_until(
            quietly(lambda: all(self.sentinel_master(s) == new.port for s in self.sentinels)),
            60,
            "Sentinel to promote the replica",
        )
        wait_until(
            quietly(lambda: conn(new).info("replication").get("role") == "master"),
            30,
            "the promoted replica to act as primary",
        )
        # Bring the old primary back only once no sentinel is still failing
        # over: a sentinel mid-failover may pick the returning, empty server.
        wait_until(quietly(self.calm), 30, "every sentinel to end the failover")
        self.primary, self.replica = new, old
        old.restart(empty=True, extra=replica_of(new))
        self.settle()

    def cut_replication(self) -> threading.Timer:
        """Cuts the primary's replication link now and restores it after
        LINK_DOWN_FOR seconds (the replica then reconnects within a second):
        a network blip between primary and replica. Cancel the timer once
        the primary is gone."""
        primary = conn(self.primary)
        primary.execute_command("ACL", "SETUSER", "repl", "off")
        primary.execute_command("CLIENT", "KILL", "TYPE", "replica")
        restore = quietly(lambda: bool(primary.execute_command("ACL", "SETUSER", "repl", "on")))
        timer = threading.Timer(LINK_DOWN_FOR, restore)
        timer.start()
        return timer

    def stop(self) -> None:
        for s in [*self.servers, *self.sentinels]:
            s.stop()


def rival_gets(url: str, name: str) -> bool:
    """One attempt by a fresh client on the new primary: True when it was
    granted (a second holder). Retries while the client cannot reach it."""
    rival = rlock.Client(url)
    deadline = time.monotonic() + 20
    try:
        while True:
            try:
                lock = rival.lock(name, ttl=TTL, blocking=False)
                got = lock.acquire()
                if got:
                    lock.release()
                return got
            except rlock.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
    finally:
        rival.close()


def acquire(client: rlock.Client, name: str, synced: bool) -> rlock.Lock:
    lock = client.lock(name, ttl=TTL, blocking_timeout=10, sync_replicas=1 if synced else None)
    if not lock.acquire():
        raise RuntimeError(f"{name}: not acquired on a healthy primary")
    return lock


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=50, help="failovers per mode and scenario")
    ap.add_argument("--max-minutes", type=float, default=20.0, help="stop after this long")
    args = ap.parse_args()
    stop_at = time.monotonic() + args.max_minutes * 60
    started = time.monotonic()
    # (scenario, mode) -> [rounds, second holders]
    counts: Dict[Tuple[str, str], List[int]] = {
        (sc, m): [0, 0] for sc in ("healthy link", "link down") for m in ("no sync", "sync_replicas=1")
    }
    waited: Dict[str, List[float]] = {"no sync": [], "sync_replicas=1": []}
    deployment = Deployment()
    holder = rlock.Client(deployment.url)
    try:
        for i in range(args.rounds):
            if time.monotonic() > stop_at:
                break
            synced = acquire(holder, f"healthy:{i}:synced", True)
            unsynced = acquire(holder, f"healthy:{i}:unsynced", False)
            deployment.fail_over()
            for mode, lock in (("sync_replicas=1", synced), ("no sync", unsynced)):
                c = counts[("healthy link", mode)]
                c[0] += 1
                c[1] += rival_gets(deployment.url, lock.name)
            print(f"healthy link, round {i + 1}: {counts[('healthy link', 'no sync')][1]} / "
                  f"{counts[('healthy link', 'sync_replicas=1')][1]} second holders so far "
                  f"(no sync / sync), {time.monotonic() - started:.0f} s", flush=True)
        for i in range(2 * args.rounds):
            if time.monotonic() > stop_at:
                break
            mode = "sync_replicas=1" if i % 2 else "no sync"
            name = f"link-down:{i}"
            blip = deployment.cut_replication()
            t0 = time.monotonic()
            acquire(holder, name, mode != "no sync")
            waited[mode].append(time.monotonic() - t0)
            deployment.fail_over()
            blip.cancel()
            blip.join()
            c = counts[("link down", mode)]
            c[0] += 1
            c[1] += rival_gets(deployment.url, name)
            print(f"link down, round {i + 1} ({mode}): {c[1]} of {c[0]} second holders so far, "
                  f"{time.monotonic() - started:.0f} s", flush=True)
    finally:
        holder.close()
        deployment.stop()
    minutes = (time.monotonic() - started) / 60
    print(f"\nSentinel failover, primary killed right after the acquisition ({minutes:.1f} min):")
    print("| scenario | mode | failovers | second holder granted |")
    print("| --- | --- | --- | --- |")
    for (scenario, mode), (rounds, second) in counts.items():
        print(f"| {scenario} | {mode} | {rounds} | {second} |")
    for mode, times in waited.items():
        if times:
            print(f"link down, {mode}: acquisition took median {statistics.median(times) * 1000:.0f} ms, "
                  f"max {max(times) * 1000:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
