"""The redis-server the benchmark measures against, and what it counts."""

from __future__ import annotations

from typing import Dict

from rlock_test_support.servers import RedisServer


class BenchServer(RedisServer):
    """A redis-server on a free loopback port (see rlock_test_support), with the
    INFO commandstats figures the scenarios read through `redis`."""

    def __init__(self) -> None:
        super().__init__("--maxclients", "4000")

    def calls(self) -> Dict[str, int]:
        """INFO commandstats: calls per command (including those made by scripts)."""
        return {k[len("cmdstat_"):]: v["calls"] for k, v in self.redis.info("commandstats").items()}

    def usec(self) -> Dict[str, int]:
        """INFO commandstats: µs spent per command (a script's includes its calls)."""
        return {k[len("cmdstat_"):]: v["usec"] for k, v in self.redis.info("commandstats").items()}
