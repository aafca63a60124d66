"""Test support: a real redis-server on a free loopback port, and helpers to
observe it. The one place the Python tests start Redis."""

from __future__ import annotations

import os
import queue
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from typing import Any, Callable, Dict, Iterator, List, Optional

import pytest
import redis

import rlock

HERE = os.path.dirname(os.path.abspath(__file__))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def eventually(cond: Callable[[], bool], within: float = 5.0, every: float = 0.01) -> bool:
    """Polls `cond` until it holds or `within` seconds pass: for state that has
    no event to wait on (a key in Redis, a flag set by the core)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(every)
    return cond()


class RedisServer:
    """`extra`: more redis-server arguments. `tls=True`: TLS only
    (`rediss://`), with a certificate for 127.0.0.1 signed by a CA made for
    it (its PEM file: `ca_file`)."""

    def __init__(self, *extra: str, tls: bool = False) -> None:
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="rlock-pytest-")
        self.tls = tls
        self.ca_file = os.path.join(self.dir, "ca.crt")
        listen = ["--port", str(self.port)]
        if tls:
            _make_certificates(self.dir)
            listen = ["--port", "0", "--tls-port", str(self.port),
                      "--tls-cert-file", "server.crt", "--tls-key-file", "server.key",
                      "--tls-ca-cert-file", "ca.crt", "--tls-auth-clients", "no"]
        # Later arguments win, so `extra` may turn persistence back on.
        self.argv = ["redis-server", *listen, "--bind", "127.0.0.1",
                     "--save", "", "--appendonly", "no", "--dir", self.dir, *extra]
        password = extra[extra.index("--requirepass") + 1] if "--requirepass" in extra else None
        tls_args: Dict[str, Any] = {"ssl": True, "ssl_ca_certs": self.ca_file} if tls else {}
        self.redis = redis.Redis(port=self.port, password=password, decode_responses=True, **tls_args)
        self._spawn()

    def _spawn(self) -> None:
        self.proc = subprocess.Popen(
            self.argv, cwd=self.dir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if not eventually(self._up, within=10):
            self.stop()
            raise RuntimeError(f"redis-server did not start on port {self.port}")

    def restart(self, down_for: float = 0.0) -> None:
        """Kills the server as a crash would (SIGKILL), keeps it down for
        `down_for` seconds, and starts it again on the same port and directory,
        so whatever it persisted comes back."""
        self.proc.kill()
        self.proc.wait()
        time.sleep(down_for)
        self._spawn()

    def _up(self) -> bool:
        try:
            return bool(self.redis.ping())
        except redis.RedisError:
            return False

    @property
    def url(self) -> str:
        return f"{'rediss' if self.tls else 'redis'}://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)

    @property
    def running(self) -> bool:
        return self.proc.poll() is None

    def monitor(self) -> "Monitor":
        return Monitor(self)


def _make_certificates(dir: str) -> None:
    """A CA, and a server certificate for 127.0.0.1 and localhost it signed."""
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    with open(os.path.join(dir, "server.ext"), "w") as f:
        f.write("basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\n"
                "extendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n")
    for args in (
        ["req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.crt", "-subj", "/CN=rlock test CA", "-days", "2"],
        ["req", *ec, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost"],
        ["x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
         "-out", "server.crt", "-days", "2", "-extfile", "server.ext"],
    ):
        subprocess.run(["openssl", *args], cwd=dir, check=True, capture_output=True)


class RedisCluster:
    """A Redis Cluster of `masters` masters (no replicas) on loopback, joined by
    `redis-cli --cluster create`; ready once every node says cluster_state:ok."""

    def __init__(self, masters: int = 3) -> None:
        # The bus port defaults to port + 10000, which may not be free (or
        # exist) for a high port: choose it too.
        self.nodes = [
            RedisServer(
                "--cluster-enabled", "yes",
                "--cluster-port", str(free_port()),
                "--cluster-config-file", "nodes.conf",
                "--cluster-node-timeout", "1000",
            )
            for _ in range(masters)
        ]
        try:
            subprocess.run(
                ["redis-cli", "--cluster", "create",
                 *(f"127.0.0.1:{n.port}" for n in self.nodes), "--cluster-yes"],
                check=True, capture_output=True, timeout=60,
            )
            ok = lambda: all(  # noqa: E731
                "cluster_state:ok" in str(n.redis.execute_command("CLUSTER", "INFO"))
                for n in self.nodes
            )
            if not eventually(ok, within=30, every=0.05):
                raise RuntimeError("the cluster never reached cluster_state:ok")
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


class Monitor:
    """The commands clients send (not those scripts run inside Redis), read
    through MONITOR; `mark()` returns those since the last mark, made exact by
    a marker command the server executes after all of them."""

    def __init__(self, server: RedisServer) -> None:
        self.seen: List[str] = []
        self.marks = 0
        self.sock = socket.create_connection(("127.0.0.1", server.port))
        self.sock.sendall(b"MONITOR\r\n")
        self.file = self.sock.makefile("r", encoding="utf-8", errors="replace")
        assert self.file.readline().strip() == "+OK"
        self.marker = redis.Redis(port=server.port)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.file:
            # `+ts [db addr] "cmd" "arg" ...`; script calls show `[db lua]`.
            source, _, rest = line.partition("] ")
            if source.endswith(" lua"):
                continue
            parts = rest.split('"')
            cmd = parts[1].lower() if len(parts) > 1 else ""
            if cmd == "echo" and len(parts) > 3:
                cmd = f"echo {parts[3]}"
            self.seen.append(cmd)

    def mark(self) -> List[str]:
        self.marks += 1
        marker = f"echo rlock-mark-{self.marks}"
        self.marker.echo(f"rlock-mark-{self.marks}")
        assert eventually(lambda: marker in self.seen, within=10), "MONITOR never showed the marker"
        at = self.seen.index(marker)
        out, self.seen[: at + 1] = self.seen[:at], []
        return out

    def close(self) -> None:
        self.sock.close()
        self.marker.close()


@pytest.fixture(scope="session")
def server() -> Iterator[RedisServer]:
    s = RedisServer()
    yield s
    s.stop()


@pytest.fixture
def client(server: RedisServer) -> Iterator[rlock.Client]:
    c = rlock.Client(server.url)
    yield c
    c.close()


@pytest.fixture
def aclient(server: RedisServer) -> Iterator[rlock.AsyncClient]:
    c = rlock.AsyncClient(server.url)
    yield c
    c.close()


@pytest.fixture
def name() -> str:
    """A lock name no other test uses."""
    return f"test:{uuid.uuid4().hex}"


def lock_key(name: str, prefix: str = "rlock") -> str:
    return f"{prefix}:{{{name}}}"


def run_python(code: str, env: Optional[Dict[str, str]] = None, timeout: float = 30) -> "subprocess.CompletedProcess[str]":
    """Runs `code` in a fresh interpreter (the same venv) and returns its result."""
    return subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


class Child:
    """A fresh interpreter running `code`, spoken to one line at a time, with
    a deadline on every read."""

    def __init__(self, code: str, env: Optional[Dict[str, str]] = None) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-u", "-c", code],
            env={**os.environ, **(env or {})},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: "queue.Queue[str]" = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))

    def line(self, within: float = 10) -> str:
        try:
            return self.lines.get(timeout=within)
        except queue.Empty:
            raise AssertionError(f"the child said nothing within {within} s") from None

    def send(self, text: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()


def waiting_child(server: RedisServer, name: str, fair: bool = False) -> Child:
    """A child process blocked in `acquire()` of `name` that says "waiting"
    first, then "interrupted" on Ctrl-C (or "acquired"); after a line on its
    stdin, "owned <owned()> <locked()>"."""
    return Child(
        f"""
import signal, sys, rlock
# Python only turns SIGINT into KeyboardInterrupt when it starts with SIGINT
# at its default; a parent run in the background may have it ignored.
signal.signal(signal.SIGINT, signal.default_int_handler)
lock = rlock.lock({name!r}, fair={fair!r})
print("waiting")
try:
    lock.acquire()
    print("acquired")
except KeyboardInterrupt:
    print("interrupted")
sys.stdin.readline()  # stay alive: a leaked acquisition would be renewed
print("owned", lock.owned(), lock.locked())
""",
        env={"REDIS_URL": server.url},
    )
