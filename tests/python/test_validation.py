"""Bad arguments are refused when first given, before any I/O; connection
failures are rlock.ConnectionError, fast, and never show a password."""

from __future__ import annotations

import builtins
import math
import os
import pathlib
import time
from typing import Any, Dict

import pytest

import rlock
from conftest import RedisServer, free_port

# Nothing listens there: an argument error raised through this client proves
# that no connection was attempted first.
NOWHERE = f"redis://127.0.0.1:{free_port()}"


@pytest.fixture
def nowhere() -> rlock.Client:
    return rlock.Client(NOWHERE)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"ttl": 0},
        {"ttl": -1},
        {"ttl": math.nan},
        {"ttl": math.inf},
        {"ttl": 1e12},
        {"timeout": -0.5},
        {"timeout": math.nan},
        {"max_hold": 0},
        {"max_hold": -3},
    ],
    ids=repr,
)
def test_bad_lock_options_raise_ValueError_before_any_io(nowhere: rlock.Client, kwargs: Dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        nowhere.lock("x", **kwargs)
    with pytest.raises(ValueError):
        rlock.AsyncClient(NOWHERE).lock("x", **kwargs)
    with pytest.raises(ValueError):
        rlock.synchronized("x", **kwargs)


def test_bad_names_are_refused(nowhere: rlock.Client) -> None:
    with pytest.raises(ValueError, match="empty"):
        nowhere.lock("")
    with pytest.raises(ValueError):
        nowhere.lock("}starts-with-a-brace")
    for not_a_str in (42, b"bytes", None):
        with pytest.raises(TypeError):
            nowhere.lock(not_a_str)  # type: ignore[arg-type]


def test_wrong_types_raise_TypeError(nowhere: rlock.Client) -> None:
    with pytest.raises(TypeError):
        nowhere.lock("x", ttl="10")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        nowhere.lock("x", blocking="yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        rlock.Client(42)  # type: ignore[arg-type]


def test_acquire_arguments_are_checked_before_any_io(nowhere: rlock.Client) -> None:
    lock = nowhere.lock("x")
    with pytest.raises(ValueError, match="timeout"):
        lock.acquire(timeout=-1)  # not "forever", unlike threading.Lock
    with pytest.raises(ValueError):
        lock.acquire(timeout=math.inf)
    with pytest.raises(ValueError):
        lock.extend(0)


def test_bad_urls_are_refused_by_the_constructor() -> None:
    for url in ["http://127.0.0.1:6379", "redis://", "127.0.0.1:6379", "redis://host/notadb"]:
        with pytest.raises(ValueError):
            rlock.Client(url)
        with pytest.raises(ValueError):
            rlock.AsyncClient(url)
    with pytest.raises(ValueError):
        rlock.Client(NOWHERE, prefix="has space")


def test_unreachable_redis_is_a_fast_ConnectionError(nowhere: rlock.Client) -> None:
    start = time.monotonic()
    with pytest.raises(rlock.ConnectionError) as caught:
        nowhere.lock("x").acquire()
    assert time.monotonic() - start < 1.5
    assert isinstance(caught.value, builtins.ConnectionError)
    assert isinstance(caught.value, rlock.LockError)


def test_wrong_password_is_a_ConnectionError_that_never_shows_it() -> None:
    guarded = RedisServer("--requirepass", "right-password")
    try:
        client = rlock.Client(f"redis://:wrong-hunter2@127.0.0.1:{guarded.port}")
        with pytest.raises(rlock.ConnectionError) as caught:
            with client.lock("x"):
                pass
        shown = f"{caught.value!s} {caught.value!r} {client!r}"
        assert "wrong-hunter2" not in shown
        good = rlock.Client(f"redis://:right-password@127.0.0.1:{guarded.port}")
        with good.lock("x") as held:
            assert held.fencing_token == 1
        assert "right-password" not in repr(good)
    finally:
        guarded.stop()


def test_url_lists_are_checked_by_the_constructor() -> None:
    for make in (rlock.Client, rlock.AsyncClient):
        with pytest.raises(ValueError, match="at least one"):
            make([])
        for bad_items in ([NOWHERE, 42], [None], (b"redis://127.0.0.1:1",)):
            with pytest.raises(TypeError):
                make(bad_items)  # type: ignore[arg-type]
        for not_a_list in ({NOWHERE: 1}, b"redis://127.0.0.1:1", 3.5):
            with pytest.raises(TypeError):
                make(not_a_list)  # type: ignore[arg-type]
        with pytest.raises(ValueError):
            make([NOWHERE, "redis://host/notadb"])
        with pytest.raises(ValueError):
            make(["http://u:hunter2@127.0.0.1:1"], cluster=True)
    shown = repr(rlock.Client([NOWHERE, "redis://:hunter2@127.0.0.1:1"], cluster=True))
    assert "hunter2" not in shown and "cluster=True" in shown


@pytest.mark.parametrize("bad", [0, -1, 101], ids=repr)
def test_sync_replicas_out_of_range_is_a_ValueError(nowhere: rlock.Client, bad: int) -> None:
    with pytest.raises(ValueError, match="sync_replicas"):
        nowhere.lock("x", sync_replicas=bad)
    with pytest.raises(ValueError, match="sync_replicas"):
        rlock.AsyncClient(NOWHERE).lock("x", sync_replicas=bad)
    with pytest.raises(ValueError, match="sync_replicas"):
        rlock.synchronized("x", sync_replicas=bad)


@pytest.mark.parametrize("bad", [1.5, "1", [1]], ids=repr)
def test_sync_replicas_not_an_int_is_a_TypeError(nowhere: rlock.Client, bad: Any) -> None:
    with pytest.raises(TypeError):
        nowhere.lock("x", sync_replicas=bad)
    with pytest.raises(TypeError):
        rlock.lock("x", sync_replicas=bad)


def test_tls_ca_must_be_a_path_or_pem_bytes(tmp_path: "os.PathLike[str]") -> None:
    with pytest.raises(TypeError, match="tls_ca"):
        rlock.Client(NOWHERE, tls_ca=42)  # type: ignore[arg-type]
    with pytest.raises(FileNotFoundError):
        rlock.Client(NOWHERE, tls_ca=os.path.join(str(tmp_path), "missing.pem"))


def test_tls_ca_trusts_a_private_ca_given_as_a_path_or_as_bytes() -> None:
    server = RedisServer(tls=True)
    try:
        with open(server.ca_file, "rb") as f:
            pem = f.read()
        for tls_ca in (server.ca_file, pathlib.Path(server.ca_file), pem):
            client = rlock.Client(server.url, tls_ca=tls_ca)
            with client.lock("over-tls", timeout=5) as held:
                assert server.redis.exists("rlock:{over-tls}")
                assert held.fencing_token is not None
            client.close()
        # Without the CA the server's certificate is not trusted.
        with pytest.raises(rlock.ConnectionError):
            rlock.Client(server.url).lock("over-tls").acquire()
    finally:
        server.stop()
