"""Changing a Redis Cluster's layout by hand, the way an operator does: giving
each master a replica, moving a slot to another master (the steps `redis-cli
--cluster reshard` takes) and promoting a caught-up replica (`CLUSTER
FAILOVER`). The same steps as tests/support/rust/src/cluster.rs's
`migrate_slot` and `fail_over_gracefully`, for a `servers.RedisCluster`."""

from __future__ import annotations

import subprocess
from typing import Any, List

import redis

from .servers import RedisCluster, RedisServer
from .waiting import wait_until

# How long a change may take to settle before it counts as stuck.
SETTLE_S = 30.0


def command(node: RedisServer, *args: Any) -> Any:
    """A command to one node, its reply as redis-py parses it."""
    return node.redis.execute_command(*args)  # type: ignore[no-untyped-call]


def node_id(node: RedisServer) -> str:
    return str(command(node, "CLUSTER", "MYID"))


def keyslot(node: RedisServer, key: str) -> int:
    return int(command(node, "CLUSTER", "KEYSLOT", key))


def is_master(node: RedisServer) -> bool:
    return bool(node.redis.info("replication")["role"] == "master")


def masters(cluster: RedisCluster) -> List[RedisServer]:
    return [n for n in cluster.nodes if n.running and is_master(n)]


def add_replicas(cluster: RedisCluster) -> List[RedisServer]:
    """Starts one replica for each master (added to `cluster.nodes`, so the
    cluster stops them with the rest) and returns them once each is in sync
    with its master."""
    added: List[RedisServer] = []
    seed = cluster.nodes[0]
    for master in masters(cluster):
        replica = RedisServer("--cluster-node-timeout", "1000", cluster=True)
        cluster.nodes.append(replica)
        added.append(replica)
        subprocess.run(
            ["redis-cli", "--cluster", "add-node", f"127.0.0.1:{replica.port}", f"127.0.0.1:{seed.port}",
             "--cluster-slave", "--cluster-master-id", node_id(master)],
            check=True, capture_output=True, timeout=60,
        )
    wait_until(lambda: all(_in_sync(r) for r in added), within=SETTLE_S, what="every replica in sync", every=0.05)
    wait_healthy(cluster)
    return added


def _in_sync(replica: RedisServer) -> bool:
    info = replica.redis.info("replication")
    return bool(info["role"] == "slave" and info.get("master_link_status") == "up")


def wait_healthy(cluster: RedisCluster) -> None:
    """Waits until every running node says cluster_state:ok."""
    wait_until(lambda: all(n.redis.cluster("INFO")["cluster_state"] == "ok" for n in cluster.nodes if n.running),
               within=SETTLE_S, what="cluster_state:ok on every node", every=0.05)


def migrate_slot(cluster: RedisCluster, key: str, to: RedisServer) -> None:
    """Moves the slot of `key`, with its keys, from the master serving it to
    master `to`: IMPORTING on the target, MIGRATING on the source, MIGRATE
    every key (to the target's own port, whatever port it announces), then
    the new owner told to every master, the target first. Returns once `to`
    serves the key and the cluster is ok."""
    source = cluster.master_of(key)
    if source is to:
        raise ValueError(f"the slot of {key!r} is served by {to.port} already")
    slot = keyslot(to, key)
    source_id, to_id = node_id(source), node_id(to)
    command(to, "CLUSTER", "SETSLOT", slot, "IMPORTING", source_id)
    command(source, "CLUSTER", "SETSLOT", slot, "MIGRATING", to_id)
    while True:
        keys = command(source, "CLUSTER", "GETKEYSINSLOT", slot, 100)
        if not keys:
            break
        command(source, "MIGRATE", "127.0.0.1", to.port, "", 0, 5000, "KEYS", *keys)
    command(to, "CLUSTER", "SETSLOT", slot, "NODE", to_id)
    command(source, "CLUSTER", "SETSLOT", slot, "NODE", to_id)
    for node in masters(cluster):
        if node is not to and node is not source:
            command(node, "CLUSTER", "SETSLOT", slot, "NODE", to_id)
    wait_until(lambda: _serves(cluster, key, to), within=SETTLE_S, what=f"{to.port} to serve {key!r}", every=0.02)
    wait_healthy(cluster)


def fail_over_gracefully(cluster: RedisCluster, key: str) -> RedisServer:
    """Promotes the replica of the master serving `key` with `CLUSTER
    FAILOVER` (it waits until the replica caught up; the old master goes on
    as its replica) and returns it once it serves the key, the old master
    is its replica, and the cluster is ok."""
    old = cluster.master_of(key)
    old_id = node_id(old)
    replica = next(n for n in cluster.nodes if n is not old and n.running and _replica_of(n, old_id))
    command(replica, "CLUSTER", "FAILOVER")
    wait_until(lambda: _serves(cluster, key, replica) and not is_master(old), within=SETTLE_S,
               what=f"the replica {replica.port} promoted", every=0.02)
    wait_healthy(cluster)
    return replica


def _replica_of(node: RedisServer, master_id: str) -> bool:
    if not _in_sync(node):
        return False
    myself = next(line for line in command(node, "CLUSTER", "NODES").splitlines() if "myself" in line)
    return bool(myself.split()[3] == master_id)


def _serves(cluster: RedisCluster, key: str, node: RedisServer) -> bool:
    try:
        return cluster.master_of(key) is node
    except (AssertionError, redis.RedisError):
        return False
