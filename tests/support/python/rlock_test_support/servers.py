"""Real redis-servers on free loopback ports: the one place the Python
suites, the demo and the benchmark start Redis."""

from __future__ import annotations

import functools
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from .certificates import make_certificates
from .monitor import Monitor
from .processes import die_with_parent
from .waiting import wait_until

# The one name of the server binary: Debian's redis-server unless
# RLOCK_REDIS_SERVER names another (`make test-matrix` points it at Redis 6.2,
# 8.2 and Valkey 8.1 in .servers/), for every server, Sentinel included.
SERVER = os.environ.get("RLOCK_REDIS_SERVER") or "redis-server"

# Tests, suites and other programs on the machine start servers at the same
# time: a port found free can be taken by another server before this one
# binds it, and redis-server then exits. It starts again on fresh ports.
ATTEMPTS = 5
START_WITHIN = 10.0
# The server's output, in its directory: why it exited, when it did.
LOG = "server.log"


def free_port() -> int:
    """A loopback port nothing listens on now (another process may take it
    before the caller binds it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@functools.lru_cache(maxsize=None)
def server_version() -> Tuple[int, int]:
    """SERVER's (major, minor), from `--version` (Valkey numbers its own:
    every Valkey has what Redis 7.2 has)."""
    out = subprocess.run([SERVER, "--version"], capture_output=True, text=True, timeout=10, check=True).stdout
    found = re.search(r"v=(\d+)\.(\d+)", out)
    if found is None:
        raise RuntimeError(f"{SERVER} --version names no version: {out!r}")
    return int(found.group(1)), int(found.group(2))


def require_cluster_support() -> None:
    """Fails, saying why, on a server too old for the lock's Cluster mode:
    sharded pub/sub (its release messages) and `--cluster-port` came with
    Redis 7.0 (`make test-matrix` leaves the Cluster tests out on 6.2)."""
    if server_version() < (7, 0):
        raise RuntimeError(
            f"a Redis Cluster here needs Redis 7.0 or later (sharded pub/sub): {SERVER} is "
            f"{'.'.join(map(str, server_version()))}")


class RedisServer:
    """A redis-server on a free loopback port, without persistence, started
    and answering PING once constructed.

    `extra`: more redis-server arguments (later arguments win, so they may
    turn persistence back on). `tls=True`: TLS only (`rediss://`), with a
    certificate for 127.0.0.1 signed by a CA made for it (its PEM file:
    `ca_file`). `cluster=True`: a Redis Cluster node, its bus on a port of its
    own. `own_session=True`: in a session of its own, so Ctrl-C in a terminal
    reaches only the caller, which stops it in order; and stopped when the
    caller dies, even by SIGKILL (Linux).

    `redis` is a client of the test's own (default user, decoded replies)."""

    def __init__(self, *extra: str, tls: bool = False, cluster: bool = False, own_session: bool = False) -> None:
        self.dir = tempfile.mkdtemp(prefix="rlock-redis-")
        self.tls = tls
        self.ca_file = os.path.join(self.dir, "ca.crt")
        self._extra = extra
        self._cluster = cluster
        if cluster:
            require_cluster_support()
        self._session: Dict[str, Any] = (
            {"start_new_session": True, "preexec_fn": die_with_parent} if own_session else {})
        if tls:
            make_certificates(self.dir)
        # What an empty restart leaves: the directory as it was before the
        # server first ran.
        self._set_up = set(os.listdir(self.dir))
        for _ in range(ATTEMPTS):
            self._choose_port()
            if self._start():
                return
        shutil.rmtree(self.dir, ignore_errors=True)
        raise RuntimeError(f"redis-server found its port taken {ATTEMPTS} times in a row")

    def _choose_port(self) -> None:
        self.port = free_port()
        # The bus port defaults to port + 10000, which may not be free (or
        # exist) for a high port: choose it too.
        self._bus_port = free_port() if self._cluster else None
        self._configure()

    def _configure(self) -> None:
        """The command line and the clients, for the ports chosen and the
        arguments given."""
        self.argv = self._command()
        extra = self._extra
        password = extra[extra.index("--requirepass") + 1] if "--requirepass" in extra else None
        tls_args: Dict[str, Any] = {"ssl": True, "ssl_ca_certs": self.ca_file} if self.tls else {}
        self.redis = redis.Redis(port=self.port, password=password, decode_responses=True, **tls_args)
        # Whatever else took the port may accept and never answer: one try, briefly.
        self._probe = redis.Redis(port=self.port, password=password, socket_timeout=1, socket_connect_timeout=1,
                                  retry=Retry(NoBackoff(), 0), **tls_args)

    def _command(self) -> List[str]:
        listen = ["--port", str(self.port)]
        if self.tls:
            listen = ["--port", "0", "--tls-port", str(self.port),
                      "--tls-cert-file", "server.crt", "--tls-key-file", "server.key",
                      "--tls-ca-cert-file", "ca.crt", "--tls-auth-clients", "no"]
        if self._bus_port is not None:
            listen += ["--cluster-enabled", "yes", "--cluster-port", str(self._bus_port),
                       "--cluster-config-file", "nodes.conf"]
        return [SERVER, *listen, "--bind", "127.0.0.1",
                "--save", "", "--appendonly", "no", "--dir", self.dir, *self._extra]

    def _start(self) -> bool:
        """Starts redis-server and waits until it answers; False when it
        exited first because its port was taken. Any other reason to exit (an
        option this server does not know, a build without TLS) raises at
        once, with the server's last words."""
        log_path = os.path.join(self.dir, LOG)
        with open(log_path, "wb") as log:
            self.proc = subprocess.Popen(
                self.argv, cwd=self.dir, stdout=log, stderr=subprocess.STDOUT, **self._session)
        deadline = time.monotonic() + START_WITHIN
        while time.monotonic() < deadline:
            if self._answers():
                return True
            if self.proc.poll() is not None:
                with open(log_path, errors="replace") as log:
                    said = log.read().strip()
                if "Address already in use" not in said:
                    last = " / ".join(said.splitlines()[-2:]) or "(it said nothing)"
                    raise RuntimeError(f"{SERVER} exited at start: {last}")
                return False
            time.sleep(0.01)
        self.stop()
        raise RuntimeError(f"redis-server did not start on port {self.port}")

    def _answers(self) -> bool:
        """Whether this server answers: not another one that holds the port
        (it answers at once, before this one has even tried to bind)."""
        try:
            return bool(self._probe.info("server").get("process_id") == self.proc.pid)
        except redis.RedisError:
            return False

    def restart(self, down_for: float = 0.0, *, empty: bool = False, extra: Optional[Sequence[str]] = None) -> None:
        """Kills the server as a crash would (SIGKILL), keeps it down for
        `down_for` seconds, and starts it again on the same port and directory,
        so whatever it persisted comes back. `empty=True`: it comes back with
        nothing, as a new node would. `extra`: the more redis-server arguments
        it runs with from now on, in place of those it had (a new role)."""
        self.kill()
        time.sleep(down_for)
        if empty:
            for name in set(os.listdir(self.dir)) - self._set_up:
                path = os.path.join(self.dir, name)
                if os.path.isdir(path):
                    shutil.rmtree(path)
                else:
                    os.remove(path)
        if extra is not None:
            self._extra = tuple(extra)
            self._configure()
        if not self._start():
            raise RuntimeError(f"redis-server could not take port {self.port} back")

    @property
    def url(self) -> str:
        return f"{'rediss' if self.tls else 'redis'}://127.0.0.1:{self.port}"

    def kill(self) -> None:
        """Kills the server (SIGKILL: no goodbye to clients), keeping its
        directory for `restart`."""
        self.proc.kill()
        self.proc.wait()

    def stop(self) -> None:
        """Kills the server and removes its directory."""
        self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)

    @property
    def running(self) -> bool:
        return self.proc.poll() is None

    def monitor(self) -> Monitor:
        return Monitor(self.port)


class Sentinel(RedisServer):
    """A Redis Sentinel (`redis-server sentinel.conf --sentinel`) on a free
    loopback port, started and answering once constructed, watching
    `monitor`: (service, host, port, quorum). `extra`, `own_session`, `redis`,
    `restart` and the rest: as for RedisServer."""

    CONF = "sentinel.conf"

    def __init__(
        self,
        monitor: Tuple[str, str, int, int],
        *extra: str,
        down_after_ms: int = 500,
        failover_timeout_ms: int = 3000,
        own_session: bool = False,
    ) -> None:
        service, host, port, quorum = monitor
        self._conf_text = (
            f"bind 127.0.0.1\n"
            f"sentinel monitor {service} {host} {port} {quorum}\n"
            f"sentinel down-after-milliseconds {service} {down_after_ms}\n"
            f"sentinel failover-timeout {service} {failover_timeout_ms}\n"
        )
        super().__init__(*extra, own_session=own_session)

    def _command(self) -> List[str]:
        # The port on the command line, not in the file: the file is written
        # once, whatever port each attempt tries.
        return [SERVER, os.path.join(self.dir, self.CONF), "--sentinel",
                "--port", str(self.port), "--dir", self.dir, *self._extra]

    def _start(self) -> bool:
        # Sentinel rewrites its file with what it learns of the deployment: a
        # restart keeps that, an empty one (which removed the file) starts
        # again from the monitor line.
        conf = os.path.join(self.dir, self.CONF)
        if not os.path.exists(conf):
            with open(conf, "w") as f:
                f.write(self._conf_text)
        return super()._start()


class RedisCluster:
    """A Redis Cluster of `masters` masters (no replicas) on loopback, joined by
    `redis-cli --cluster create`; ready once every node says cluster_state:ok."""

    def __init__(self, masters: int = 3) -> None:
        self.nodes: List[RedisServer] = []
        try:
            for _ in range(masters):
                self.nodes.append(RedisServer("--cluster-node-timeout", "1000", cluster=True))
            subprocess.run(
                ["redis-cli", "--cluster", "create",
                 *(f"127.0.0.1:{n.port}" for n in self.nodes), "--cluster-yes"],
                check=True, capture_output=True, timeout=60,
            )
            wait_until(
                lambda: all(n.redis.cluster("INFO")["cluster_state"] == "ok" for n in self.nodes),
                within=30, what="the cluster to reach cluster_state:ok", every=0.05,
            )
        except BaseException:
            self.stop()
            raise

    @property
    def urls(self) -> List[str]:
        return [n.url for n in self.nodes]

    def master_of(self, key: str) -> RedisServer:
        """The node serving `key`: the others answer MOVED."""
        for node in self.nodes:
            try:
                node.redis.exists(key)
                return node
            except redis.ResponseError:
                continue
        raise AssertionError(f"no node serves {key!r}")

    def stop(self) -> None:
        for n in self.nodes:
            n.stop()
