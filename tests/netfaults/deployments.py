"""The deployments a schedule runs on, each behind fault proxies, started once
per session: one server (plain and fair mode share it), a Redlock over three
independent servers, and a three-master Redis Cluster whose nodes announce
their proxies' ports, so clients following the cluster's layout still go
through the proxies; for the nemesis (nemesis.py), a second such Cluster
with a replica per master, whose layout it changes.

What the nemesis does to the servers (blocking; the driver runs it on a
thread of its own): a master forgets its data (`forget`), a slot moves to
another master (`migrate`), a master's replica takes over (`fail_over`)."""

from __future__ import annotations

from typing import Dict, List, Optional, Set, Union

from rlock_test_support import cluster_layout
from rlock_test_support.background import Background
from rlock_test_support.proxy import FaultProxy
from rlock_test_support.servers import RedisCluster, RedisServer
from rlock_test_support.waiting import wait_until

MODES = ("single", "fair", "cluster", "redlock")


class Deployment:
    def __init__(self, bg: Background, servers: List[RedisServer], cluster: Optional[RedisCluster] = None) -> None:
        self.bg = bg
        self.servers = servers
        self.cluster = cluster
        self.proxies: List[FaultProxy] = [
            bg.run(FaultProxy(bg.loop, s.port, seed=i).start()) for i, s in enumerate(servers)
        ]

    @property
    def url(self) -> Union[str, List[str]]:
        urls = [p.url for p in self.proxies]
        return urls[0] if len(urls) == 1 and not self.cluster else urls

    def clear(self) -> None:
        """Ends every fault still pending (between schedules)."""
        async def clear() -> None:
            for p in self.proxies:
                p.clear()

        self.bg.run(clear())

    def injected(self) -> Dict[str, int]:
        total: Dict[str, int] = {}
        for p in self.proxies:
            for k, v in p.injected.items():
                total[k] = total.get(k, 0) + v
        return total

    def forget(self, i: int, how: str, down_ms: float = 0) -> None:
        """Server `i` loses every key: restarted empty after `down_ms` down
        (a crash, and no persistence), or FLUSHALL."""
        if how == "flush":
            self.servers[i].redis.flushall()
        else:
            self.servers[i].restart(down_ms / 1000, empty=True)

    def migrate(self, key: str) -> None:
        """Moves the slot of `key` to the next master (by port)."""
        assert self.cluster is not None
        source = self.cluster.master_of(key)
        others = sorted(cluster_layout.masters(self.cluster), key=lambda n: n.port)
        later = [n for n in others if n.port > source.port] or others
        cluster_layout.migrate_slot(self.cluster, key, next(n for n in later if n is not source))

    def fail_over(self, key: str) -> None:
        assert self.cluster is not None
        cluster_layout.fail_over_gracefully(self.cluster, key)

    def stop(self) -> None:
        async def close() -> None:
            for p in self.proxies:
                await p.close()

        self.bg.run(close())
        if self.cluster is not None:
            self.cluster.stop()
        else:
            for s in self.servers:
                s.stop()


def start(bg: Background, mode: str) -> Deployment:
    if mode in ("single", "fair"):
        return Deployment(bg, [RedisServer()])
    if mode == "redlock":
        return Deployment(bg, [RedisServer() for _ in range(3)])
    cluster = RedisCluster(3)
    try:
        if mode == "cluster-replicas":
            cluster_layout.add_replicas(cluster)
        d = Deployment(bg, cluster.nodes, cluster)
        for node, proxy in zip(cluster.nodes, d.proxies):
            node.redis.config_set("cluster-announce-port", proxy.port)
        wanted = {p.port for p in d.proxies}
        wait_until(lambda: all(_announced(n) == wanted for n in cluster.nodes),
                   within=30, what="the cluster to announce its proxies' ports", every=0.05)
        return d
    except BaseException:
        cluster.stop()
        raise


def _announced(node: RedisServer) -> Set[int]:
    """The client ports a node's CLUSTER SLOTS names, masters' and replicas'."""
    slots = cluster_layout.command(node, "CLUSTER", "SLOTS")
    return {int(served[1]) for entry in slots for served in entry[2:]}
