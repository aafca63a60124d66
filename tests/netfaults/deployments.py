"""The four deployments a schedule runs on, each behind fault proxies, started
once per session: one server (plain and fair mode share it), a Redlock over
three independent servers, and a three-master Redis Cluster whose nodes
announce their proxies' ports, so clients following the cluster's layout still
go through the proxies. Redis comes from the Python suite's one helper."""

from __future__ import annotations

import importlib.util
import os
import time
from typing import Any, Dict, List, Union

from netproxy import FaultProxy

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def _load(name: str, *path: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, *path))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


support = _load("python_suite_support", "tests", "python", "conftest.py")
Background = _load("faults_background", "tests", "faults", "background.py").Background

MODES = ("single", "fair", "cluster", "redlock")


class Deployment:
    def __init__(self, bg: Any, servers: List[Any], cluster: Any = None) -> None:
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


def start(bg: Any, mode: str) -> Deployment:
    if mode in ("single", "fair"):
        return Deployment(bg, [support.RedisServer()])
    if mode == "redlock":
        return Deployment(bg, [support.RedisServer() for _ in range(3)])
    cluster = support.RedisCluster(3)
    try:
        d = Deployment(bg, cluster.nodes, cluster)
        for node, proxy in zip(cluster.nodes, d.proxies):
            node.redis.config_set("cluster-announce-port", proxy.port)
        wanted = {p.port for p in d.proxies}
        deadline = time.monotonic() + 30
        while not all(_announced(n) == wanted for n in cluster.nodes):
            if time.monotonic() > deadline:
                raise RuntimeError("the cluster never announced its proxies' ports")
            time.sleep(0.05)
        return d
    except BaseException:
        cluster.stop()
        raise


def _announced(node: Any) -> set:
    """The client ports a node's CLUSTER SLOTS names."""
    slots = node.redis.execute_command("CLUSTER", "SLOTS")
    return {int(entry[2][1]) for entry in slots}
