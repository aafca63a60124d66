"""The fault proxy itself, against a real redis-server: each fault does to the
wire what the schedules count on, and only to the kind of connection named."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any, Iterator, Tuple

import pytest
import redis

from rlock_test_support.background import Background
from rlock_test_support.proxy import FaultProxy, command_of, split_requests
from rlock_test_support.servers import RedisServer
from rlock_test_support.waiting import eventually


@pytest.fixture(scope="module")
def wire() -> Iterator[Tuple[FaultProxy, redis.Redis, Background]]:
    bg = Background()
    server = RedisServer()
    proxy = bg.run(FaultProxy(bg.loop, server.port).start())
    yield proxy, server.redis, bg
    bg.run(proxy.close())
    server.stop()
    bg.close()


def now_on(bg: Background, fn: Any, *args: Any) -> Any:
    """Calls `fn` on the proxy's loop and waits for it: the fault is armed
    before the next request leaves."""

    async def call() -> Any:
        return fn(*args)

    return bg.run(call())


def client(proxy: FaultProxy) -> redis.Redis:
    # No retries: a test must see the fault, not redis-py's recovery from it.
    return redis.Redis(port=proxy.port, decode_responses=True, socket_timeout=5,
                       retry=redis.retry.Retry(redis.backoff.NoBackoff(), 0))


def test_requests_are_split_whole_and_named() -> None:
    buf = bytearray(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*1\r\n$4\r\nping\r\n*2\r\n$3\r\nSE")
    requests = split_requests(buf)
    assert [command_of(r) for r in requests] == [b"GET", b"PING"]
    assert bytes(buf) == b"*2\r\n$3\r\nSE"


def test_a_dropped_reply_was_applied_and_never_heard(wire: Tuple[FaultProxy, redis.Redis, Background]) -> None:
    proxy, direct, bg = wire
    c = client(proxy)
    c.ping()
    before = proxy.injected["drop_reply"]
    now_on(bg, proxy.drop_reply, "cmd", 1, ["INCR"])
    with pytest.raises(redis.ConnectionError):
        c.execute_command("INCR", "dropped")
    assert direct.get("dropped") == "1"  # Redis applied it
    assert proxy.injected["drop_reply"] == before + 1


def test_a_drop_picked_by_script_waits_for_that_script(wire: Tuple[FaultProxy, redis.Redis, Background]) -> None:
    proxy, direct, bg = wire
    c = client(proxy)
    body = "return redis.call('INCR', KEYS[1])"
    sha = direct.script_load(body)
    before = proxy.injected["drop_reply"]
    now_on(bg, proxy.drop_reply, "cmd", 2, ["EVALSHA", "EVAL"], [sha.upper()])
    # Another script passes...
    assert c.eval("return redis.call('INCR', KEYS[1])  ", 1, "other") == 1
    assert proxy.injected["drop_reply"] == before
    # ...the one picked is applied and unheard, by its SHA or its body.
    with pytest.raises(redis.ConnectionError):
        c.evalsha(sha, 1, "picked")
    with pytest.raises(redis.ConnectionError):
        client(proxy).eval(body, 1, "picked")
    assert direct.get("picked") == "2"
    assert proxy.injected["drop_reply"] == before + 2
    assert [e["script"] for e in proxy.log[-2:]] == [sha, sha]


def test_a_request_cut_halfway_is_never_applied(wire: Tuple[FaultProxy, redis.Redis, Background]) -> None:
    proxy, direct, bg = wire
    c = client(proxy)
    c.ping()
    now_on(bg, proxy.reset, "cmd", "mid")
    before = proxy.injected["cut_request"]
    with pytest.raises(redis.ConnectionError):
        c.incr("cut")
    assert direct.get("cut") is None
    assert proxy.injected["cut_request"] == before + 1


def test_a_delay_slows_replies_by_its_length(wire: Tuple[FaultProxy, redis.Redis, Background]) -> None:
    proxy, _, bg = wire
    c = client(proxy)
    c.ping()
    now_on(bg, proxy.delay, "cmd", 150, 1000)
    t = time.monotonic()
    c.ping()
    assert time.monotonic() - t >= 0.15
    now_on(bg, proxy.clear)


def test_a_stall_holds_everything_then_delivers_it(wire: Tuple[FaultProxy, redis.Redis, Background]) -> None:
    proxy, direct, bg = wire
    c = client(proxy)
    c.ping()
    now_on(bg, proxy.stall, "cmd", 300)
    t = time.monotonic()
    assert c.incr("stalled") == 1
    assert time.monotonic() - t >= 0.25


def test_a_delay_each_way_slows_requests_too_and_lasts_until_cleared(
        wire: Tuple[FaultProxy, redis.Redis, Background]) -> None:
    proxy, direct, _ = wire
    c = client(proxy)
    c.ping()
    proxy.now(proxy.delay, "any", 150, None, True)  # from this thread, as the fault suite arms it
    t = time.monotonic()
    c.set("late", 1)
    assert time.monotonic() - t >= 0.3  # 150 ms there, 150 ms back
    c.set("late", 2)
    assert time.monotonic() - t >= 0.6  # no end of its own
    proxy.now(proxy.clear)
    # A request on its way is held there: Redis sees it late.
    c.ping()
    proxy.now(proxy.delay, "cmd", 300, None, True)
    ahead = bg_set(c, "late", 3)
    time.sleep(0.15)
    assert direct.get("late") == "2"
    ahead.join(5)
    assert direct.get("late") == "3"
    proxy.now(proxy.clear)


def test_a_stall_without_an_end_lasts_until_cleared(wire: Tuple[FaultProxy, redis.Redis, Background]) -> None:
    proxy, direct, _ = wire
    c = client(proxy)
    c.ping()
    connections = proxy.connections
    proxy.now(proxy.stall, "any")
    pending = bg_set(c, "held", 1)
    time.sleep(0.5)
    assert direct.get("held") is None
    proxy.now(proxy.clear)
    pending.join(5)
    assert direct.get("held") == "1"
    assert client(proxy).ping()
    assert proxy.connections == connections + 1


def bg_set(c: redis.Redis, key: str, value: int) -> threading.Thread:
    t = threading.Thread(target=c.set, args=(key, value), daemon=True)
    t.start()
    return t


def test_faults_on_pub_sub_connections_spare_command_ones(wire: Tuple[FaultProxy, redis.Redis, Background]) -> None:
    proxy, _, bg = wire
    c = client(proxy)
    sub = c.pubsub()
    sub.subscribe("chan")
    assert sub.get_message(timeout=5)["type"] == "subscribe"
    kinds = lambda: sorted(x.kind for x in proxy.conns if not x.closed)  # noqa: E731
    assert eventually(lambda: "pubsub" in kinds(), within=5)
    now_on(bg, proxy.reset, "pubsub", "all")
    c.ping()  # the command connection lives on
    with pytest.raises((redis.ConnectionError, socket.error)):
        for _ in range(100):
            sub.get_message(timeout=0.05)


def test_a_dropped_request_never_reaches_redis_while_its_window_lasts(
        wire: Tuple[FaultProxy, redis.Redis, Background]) -> None:
    proxy, direct, bg = wire
    body = "return redis.call('INCR', KEYS[1])"
    sha = direct.script_load(body)
    before = proxy.injected["drop_request"]
    now_on(bg, proxy.drop_request, "cmd", [sha.upper()], 400, b"unsent")
    # Another script passes, and this one about another key...
    assert client(proxy).eval("return redis.call('INCR', KEYS[1])   ", 1, "passed") == 1
    assert client(proxy).evalsha(sha, 1, "passed") == 2
    # ...the one picked never reaches Redis, by its SHA or its body, every time.
    for _ in range(2):
        with pytest.raises(redis.ConnectionError):
            client(proxy).evalsha(sha, 1, "unsent")
    with pytest.raises(redis.ConnectionError):
        client(proxy).eval(body, 1, "unsent")
    assert direct.get("unsent") is None
    assert proxy.injected["drop_request"] == before + 3
    time.sleep(0.5)  # the window ends
    assert client(proxy).evalsha(sha, 1, "unsent") == 1


def test_a_replication_link_is_no_fault_s_target(wire: Tuple[FaultProxy, redis.Redis, Background]) -> None:
    proxy, _, bg = wire
    link = client(proxy)
    link.execute_command("REPLCONF", "listening-port", "1")  # what a replica says to its master first
    c = client(proxy)
    ids = link.client_id(), c.client_id()
    now_on(bg, proxy.reset, "any", "all")
    # redis-py connects again unasked: a connection reset is one with a new id.
    assert link.client_id() == ids[0]
    assert c.client_id() != ids[1]
