"""OpenTelemetry spans, with the SDK's in-memory exporter: an acquisition is
an `rlock.acquire` span under the caller's, a `with` block an `rlock.hold`
span that is current inside it; a timeout and a lost lease show on their
spans; and without the OpenTelemetry API installed nothing changes."""

from __future__ import annotations

import asyncio
from typing import Iterator, List

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import rlock
from rlock_test_support.keys import lock_key
from rlock_test_support.servers import RedisServer
from rlock_test_support.waiting import wait_until

from children import run_python
from owners import HeldInThread

_exporter = InMemorySpanExporter()
_provider = TracerProvider()
_provider.add_span_processor(SimpleSpanProcessor(_exporter))
# Set once per process (OpenTelemetry refuses a second provider); rlock's
# tracer is a proxy that follows it.
trace.set_tracer_provider(_provider)


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    _exporter.clear()
    yield _exporter


def named(spans: InMemorySpanExporter, name: str) -> List[ReadableSpan]:
    return [s for s in spans.get_finished_spans() if s.name == name]


def test_a_with_block_is_an_acquire_span_then_a_hold_span_current_inside_it(
    client: rlock.Client, spans: InMemorySpanExporter, name: str
) -> None:
    tracer = trace.get_tracer("app")
    with tracer.start_as_current_span("request") as request:
        with client.lock(name) as held:
            with tracer.start_as_current_span("rebuild"):
                pass
    [acquire] = named(spans, "rlock.acquire")
    [hold] = named(spans, "rlock.hold")
    [rebuild] = named(spans, "rebuild")
    ctx = request.get_span_context()
    assert acquire.parent is not None and acquire.parent.span_id == ctx.span_id
    assert hold.parent is not None and hold.parent.span_id == ctx.span_id
    assert rebuild.parent is not None and rebuild.parent.span_id == hold.context.span_id
    assert acquire.attributes["rlock.lock"] == name
    assert acquire.attributes["rlock.acquired"] is True
    assert acquire.attributes["rlock.fencing_token"] == held.fencing_token
    assert hold.attributes["rlock.fencing_token"] == held.fencing_token
    assert acquire.end_time <= hold.start_time <= rebuild.start_time
    assert hold.status.is_ok
    # The caller's span is current again after the block.
    assert trace.get_current_span() is trace.INVALID_SPAN


def test_a_timeout_shows_on_the_acquire_span_and_opens_no_hold(
    client: rlock.Client, server: RedisServer, spans: InMemorySpanExporter, name: str
) -> None:
    holder = HeldInThread(client.lock(name)).start()
    assert client.lock(name, blocking_timeout=0.05).acquire() is False
    with pytest.raises(rlock.LockTimeout):
        with client.lock(name, blocking_timeout=0.05):
            pass
    holder.stop()
    refused = [s for s in named(spans, "rlock.acquire") if s.attributes["rlock.acquired"] is False]
    assert len(refused) == 2
    assert not refused[1].status.is_ok, "the with block's timeout is an error"
    assert len(named(spans, "rlock.hold")) == 1, "only the holder's"


def test_explicit_acquire_and_release_bracket_a_hold_span(
    client: rlock.Client, spans: InMemorySpanExporter, name: str
) -> None:
    lock = client.lock(name)
    assert lock.acquire()
    assert lock.acquire(), "a re-entry: a hold of its own"
    lock.release()
    assert len(named(spans, "rlock.hold")) == 1
    lock.release()
    assert len(named(spans, "rlock.hold")) == 2
    assert len(named(spans, "rlock.acquire")) == 2


def test_a_lost_lease_marks_the_hold_span_as_an_error(
    client: rlock.Client, server: RedisServer, spans: InMemorySpanExporter, name: str
) -> None:
    lock = client.lock(name, ttl=0.6)
    with pytest.raises(rlock.LockLost):
        with lock:
            server.redis.delete(lock_key(name))
            wait_until(lambda: lock.lost, 5, "the loss")
    [hold] = named(spans, "rlock.hold")
    assert not hold.status.is_ok
    assert any(e.name == "exception" for e in hold.events)


def test_async_with_spans_follow_the_task(
    aclient: rlock.AsyncClient, spans: InMemorySpanExporter, name: str
) -> None:
    tracer = trace.get_tracer("app")

    async def body() -> None:
        with tracer.start_as_current_span("job"):
            async with aclient.lock(name):
                with tracer.start_as_current_span("inside"):
                    await asyncio.sleep(0)

    asyncio.run(asyncio.wait_for(body(), 30))
    [hold] = named(spans, "rlock.hold")
    [inside] = named(spans, "inside")
    assert inside.parent is not None and inside.parent.span_id == hold.context.span_id


def test_without_the_opentelemetry_api_locks_work_and_trace_nothing(server: RedisServer) -> None:
    code = f"""
import sys
sys.modules["opentelemetry"] = None  # as if not installed
import rlock
from rlock import _tracing
assert not _tracing.enabled()
c = rlock.Client({server.url!r})
with c.lock("untraced") as held:
    print("held", held.fencing_token > 0)
c.close()
"""
    done = run_python(code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "held True"
