"""One cache entry across runtimes: a key names one entry on the wire,
whichever face reads or rebuilds it. Readers of Python, Node, Rust and
`rlock cached` on one cold key cause one load, and each gets the bytes that
load wrote; a value one face stores as JSON or text reads as the same object
or string in another; a failed load reaches the waiters of every other face
as that face's loader error, with the message; an invalidation from any
face makes the next read, from any other, load again.

Every loader counts its calls in Redis, and waits at a gate (a list it pops)
that the test opens once every other reader waits for that load: so the
readers truly wait for it, rather than coming after it."""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional

import pytest

from rlock_test_support.keys import CacheKeys
from rlock_test_support.waiting import eventually

from contenders import KINDS, Contenders

# The faces that decode what they read by the stored format; Rust and the
# CLI give the stored bytes as they are.
DECODING = ["python", "node"]


def hexed(text: str) -> str:
    return text.encode().hex()


def value_of(answer: str) -> Any:
    """The value an answer (`loaded|got TYPE HEX`) names, decoded as its
    type says: bytes, str, a JSON value, or None."""
    _, kind, *rest = answer.split(" ")
    raw = bytes.fromhex(rest[0]) if rest else b""
    if kind == "text":
        return raw.decode()
    if kind == "json":
        return json.loads(raw)
    assert kind in ("bytes", "none"), answer
    return raw if kind == "bytes" else None


class Entry:
    """One cache key of a test, its load counter and its gate."""

    def __init__(self, contenders: Contenders, key: str) -> None:
        self.contenders = contenders
        self.key = key
        self.counter = f"{key}:loads"
        self.gate = f"{key}:gate"
        self.redis = contenders.server.redis

    def loads(self) -> int:
        return int(self.redis.get(self.counter) or 0)

    def start(self, kind: str, loader: str, gated: bool = True) -> None:
        self.contenders[kind].start_cached(self.key, loader, self.counter, self.gate if gated else "-")

    def read(self, kind: str, loader: str) -> str:
        """One read from `kind`, alone: its answer."""
        self.start(kind, loader, gated=False)
        self.contenders[kind].go()
        return self.contenders[kind].cached_answer()

    def loading(self, waiters: int) -> None:
        """Waits until one load runs and `waiters` readers wait for it, then
        lets that load go on."""
        assert eventually(lambda: self.loads() > 1 or (
            self.loads() == 1 and self.contenders.cache_waiters(self.key) >= waiters), within=15), \
            f"{self.loads()} loads, {self.contenders.cache_waiters(self.key)} readers waiting"
        assert self.loads() == 1, f"{self.loads()} loads of one cold key"
        assert self.contenders.cache_waiters(self.key) == waiters
        self.redis.rpush(self.gate, "open")

    def answers(self, kinds: List[str]) -> Dict[str, str]:
        return {k: self.contenders[k].cached_answer() for k in kinds}

    def stored(self) -> Optional[str]:
        """The value the entry holds in Redis (the tests' values are text)."""
        value = self.redis.hget(CacheKeys(self.key).entry, "value")
        return None if value is None else str(value)


def load_while_others_wait(entry: Entry, first: str, loaders: Dict[str, str]) -> Dict[str, str]:
    """`first` starts its read and loads; the others then read together
    and wait for that load, which ends once they all wait: every answer."""
    others = [k for k in loaders if k != first]
    entry.start(first, loaders[first])
    entry.contenders[first].go()
    assert eventually(lambda: entry.loads() == 1, within=15), f"{first} never loaded"
    for kind in others:
        entry.start(kind, loaders[kind])
    for kind in others:
        entry.contenders[kind].go()
    entry.loading(waiters=len(others))
    return entry.answers(list(loaders))


@pytest.fixture
def entry(contenders: Contenders, name: str) -> Entry:
    return Entry(contenders, name)


def test_a_cold_key_read_at_once_by_every_runtime_is_loaded_once_and_every_reader_gets_the_bytes_written(
    entry: Entry,
) -> None:
    for kind in KINDS:
        entry.start(kind, f"bytes:{hexed(f'written by {kind}')}")
    for kind in KINDS:
        entry.contenders[kind].go()
    entry.loading(waiters=len(KINDS) - 1)
    answers = entry.answers(KINDS)

    assert entry.loads() == 1
    loaded = [k for k, a in answers.items() if a.startswith("loaded ")]
    assert len(loaded) == 1, answers
    written = f"written by {loaded[0]}".encode()
    assert entry.stored() == written.decode()
    assert {k: value_of(a) for k, a in answers.items()} == {k: written for k in KINDS}, answers


@pytest.mark.parametrize("rebuilder", KINDS)
def test_the_bytes_each_runtime_loads_are_what_every_other_runtime_waited_for(entry: Entry, rebuilder: str) -> None:
    loaders = {k: f"bytes:{hexed(f'written by {k}')}" for k in KINDS}
    answers = load_while_others_wait(entry, rebuilder, loaders)

    written = f"written by {rebuilder}".encode()
    assert answers[rebuilder] == f"loaded bytes {written.hex()}"
    for kind in KINDS:
        if kind != rebuilder:
            assert answers[kind] == f"got bytes {written.hex()}", kind
    assert entry.loads() == 1
    assert entry.stored() == written.decode()


PRODUCT = {"id": 1001, "name": "café ☕", "tags": ["a", "b"], "price": 12.5, "stock": None, "new": True}
GREETING = "grüß dich ☕"


@pytest.mark.parametrize("writer", DECODING)
@pytest.mark.parametrize("stored", ["json", "text", "none"])
def test_what_one_face_stores_reads_the_same_in_every_other(entry: Entry, writer: str, stored: str) -> None:
    """An object stored as JSON reads as an equal object where values are
    decoded (as its JSON text in Rust and the CLI), a string as the same
    string (its UTF-8), nothing found as nothing found everywhere."""
    loader = {"json": f"json:{hexed(json.dumps(PRODUCT))}", "text": f"text:{hexed(GREETING)}", "none": "none"}[stored]
    assert entry.read(writer, loader).startswith(f"loaded {stored}")
    for reader in KINDS:
        if reader == writer:
            continue
        answer = entry.read(reader, f"bytes:{hexed('not loaded')}")
        if stored == "none":
            assert answer == "got none", reader
        elif reader in DECODING:
            assert answer.startswith(f"got {stored} "), f"{reader}: {answer}"
            assert value_of(answer) == (PRODUCT if stored == "json" else GREETING), reader
        else:
            raw = value_of(answer)
            assert answer.startswith("got bytes "), f"{reader}: {answer}"
            assert (json.loads(raw) if stored == "json" else raw.decode()) == (
                PRODUCT if stored == "json" else GREETING), reader
    assert entry.loads() == 1


@pytest.mark.parametrize("rebuilder", KINDS)
def test_a_failed_load_reaches_every_waiting_runtime_as_its_loader_error_with_the_message(
    entry: Entry, rebuilder: str
) -> None:
    message = f"database down under {rebuilder}"
    loaders = {k: f"bytes:{hexed(k)}" for k in KINDS}
    loaders[rebuilder] = f"fail:{hexed(message)}"
    answers = load_while_others_wait(entry, rebuilder, loaders)

    assert answers[rebuilder].startswith("failed ") and message in answers[rebuilder], answers[rebuilder]
    for kind in KINDS:
        if kind == rebuilder:
            continue
        assert answers[kind].startswith(f"loader-failed {entry.key} "), f"{kind}: {answers[kind]}"
        assert message in answers[kind], f"{kind}: {answers[kind]}"
    # The waiters shared the failure: none of them loaded in its turn.
    assert entry.loads() == 1
    assert entry.stored() is None


def next_of(kind: str, step: int = 1) -> str:
    return KINDS[(KINDS.index(kind) + step) % len(KINDS)]


@pytest.mark.parametrize("invalidator", KINDS)
def test_an_invalidation_from_one_runtime_makes_another_load_again(entry: Entry, invalidator: str) -> None:
    writer, reader = next_of(invalidator), next_of(invalidator, 2)
    assert entry.read(writer, f"bytes:{hexed('v1')}") == f"loaded bytes {hexed('v1')}"
    assert entry.read(reader, f"bytes:{hexed('v2')}") == f"got bytes {hexed('v1')}"

    assert entry.contenders[invalidator].invalidate(entry.key) in (True, None)  # the CLI does not say

    assert entry.read(reader, f"bytes:{hexed('v2')}") == f"loaded bytes {hexed('v2')}"
    assert entry.read(invalidator, f"bytes:{hexed('v3')}") == f"got bytes {hexed('v2')}"
    assert entry.loads() == 2


@pytest.mark.parametrize("invalidator", KINDS)
def test_a_load_that_an_invalidation_from_another_runtime_overtook_is_not_stored(
    entry: Entry, invalidator: str
) -> None:
    """Its value may predate the invalidation: its own reader gets it, the
    next reader loads again."""
    rebuilder, reader = next_of(invalidator), next_of(invalidator, 2)
    entry.start(rebuilder, f"bytes:{hexed('read before')}")
    entry.contenders[rebuilder].go()
    assert eventually(lambda: entry.loads() == 1, within=15), f"{rebuilder} never loaded"
    # Its loader waits at the gate: the invalidation comes while it runs.
    assert entry.contenders[invalidator].invalidate(entry.key) in (False, None)  # no entry yet
    entry.loading(waiters=0)
    answer = entry.contenders[rebuilder].cached_answer()

    assert answer == f"loaded bytes {hexed('read before')}"
    assert entry.stored() is None
    assert entry.read(reader, f"bytes:{hexed('read after')}") == f"loaded bytes {hexed('read after')}"
    assert entry.loads() == 2
