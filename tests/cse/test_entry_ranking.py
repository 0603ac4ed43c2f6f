"""Pack inputs read from stored bytes, and the core ranking kept across writes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import msgpack
import pytest
from tests.cse.kit import NOW, T0, add, open_mem, seed

from amcp.amf.canonical import canonical_packb
from amcp.amf.types import KnowledgeType as KT
from amcp.cse import cache as cse_cache
from amcp.cse.cache import RecordCache, cache_for, ranked_ids
from amcp.cse.entry import Entry
from amcp.cse.tiers import pointer
from amcp.errors import IntegrityError
from amcp.memory import Memory
from amcp.store.base import RecordFilter


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[Memory]:
    m = open_mem(tmp_path)
    yield m
    m.close()


def _raw(mem: Memory, kid: str) -> tuple[bytes, str | None]:
    ((_k, _state, body, checksum),) = mem.store.raw_bodies([kid])  # type: ignore[attr-defined]
    assert body is not None
    return body, checksum


def test_entry_from_bytes_matches_entry_from_record(mem: Memory) -> None:
    a = add(mem, "retry after a timeout", KT.PITFALL, subject="net.retry.item", kind="fact")
    b = add(mem, "uses the cache", KT.DECISION, caused_by=[a], subject="net.cache")
    for kid in (a, b):
        body, checksum = _raw(mem, kid)
        fast = Entry.of_body(kid, body, checksum)
        stored = mem.store.get(kid)
        assert stored is not None and stored.record is not None
        slow = Entry.of_record(stored.record)
        assert fast.amf_bytes == slow.amf_bytes == canonical_packb(stored.record.to_dict())
        for name in ("knowledge_id", "type", "confidence", "subject", "scope", "kind",
                     "caused_by", "own_decay", "created_ts", "tokens", "text"):
            assert getattr(fast, name) == getattr(slow, name), name
        assert fast.record == stored.record  # built on demand, equal to the store's
        assert fast.amf == stored.record.to_dict()


def test_entry_pointer_line_follows_the_weight(mem: Memory) -> None:
    kid = add(mem, "retry after a timeout", KT.FACT, subject="net.retry.item")
    body, checksum = _raw(mem, kid)
    entry = Entry.of_body(kid, body, checksum)
    stored = mem.store.get(kid)
    assert stored is not None and stored.record is not None
    for weight in (0.5, 0.5, 0.73, 0.5):
        assert entry.pointer(weight) == pointer(stored.record, weight)


def _tampered(body: bytes, old: bytes, new: bytes) -> bytes:
    assert old in body
    return body.replace(old, new, 1)


def test_entry_from_bytes_refuses_tampering(mem: Memory) -> None:
    kid = add(mem, "retry after a timeout", KT.FACT, subject="net.retry.item", confidence=0.8)
    body, checksum = _raw(mem, kid)
    doc = msgpack.unpackb(body)
    bad = [
        _tampered(body, b"net.retry.item", b"net.retrY.item"),  # core changed
        _tampered(body, b"project:x", b"project:y"),  # meta changed
        body + b"\x00",  # trailing bytes
        body[:-3],  # truncated
        b"\x93\x01\x02\x03",  # not a map
        msgpack.packb({**doc, "knowledge_id": "K-" + "0" * 64}),  # another id
        canonical_packb({k: v for k, v in doc.items() if k != "meta"}),  # no meta
        b"",
    ]
    for data in bad:
        with pytest.raises(IntegrityError):
            Entry.of_body(kid, data, checksum)
    with pytest.raises(IntegrityError):
        Entry.of_body(kid, body, "sha256:" + "0" * 64)  # row checksum differs
    with pytest.raises(IntegrityError):
        Entry.of_body("K-" + "1" * 64, body, checksum)  # row id differs
    # Top-level keys out of canonical order are refused too: writers never produce them,
    # and the bytes are the pack's digest input.
    reordered = msgpack.packb(dict(reversed(list(doc.items()))))
    with pytest.raises(IntegrityError):
        Entry.of_body(kid, reordered, checksum)


def test_sensitive_records_are_not_handed_out_as_bytes(mem: Memory) -> None:
    kid = mem.remember("the api key is hunter2", type=KT.FACT, scope="project:x",
                       sensitive=True).knowledge_id
    ((_k, state, body, _c),) = mem.store.raw_bodies([kid])  # type: ignore[attr-defined]
    assert state.sensitive and body is None
    pack = mem.context("api key", budget_tokens=20_000, now=NOW)
    shown = [it for it in pack.items if it.knowledge_id == kid]
    for it in shown:
        assert "hunter2" not in it.pointer
        if it.amf is not None:
            assert "hunter2" not in repr(it.amf)


def _fresh(mem: Memory, flt: RecordFilter, limit: int) -> list[str]:
    return [r.knowledge_id for r in cse_cache._ranked(mem.store, flt, limit).rows]


@pytest.mark.parametrize("limit", [3, 8])
def test_core_ranking_caught_up_after_writes_equals_a_full_rerank(
    mem: Memory, limit: int
) -> None:
    seed(mem, 40)
    flt = RecordFilter(types=(KT.FACT,), now=NOW)
    assert ranked_ids(mem.store, flt, limit) == _fresh(mem, flt, limit)
    steps = [
        lambda: add(mem, "newest fact", KT.FACT, at=T0 + 10_000, subject="a.b"),
        lambda: add(mem, "old fact", KT.FACT, at=T0 - 10_000, subject="a.c"),
        lambda: mem.invalidate(ranked_ids(mem.store, flt, limit)[0], reason="wrong"),
        lambda: add(mem, "a pattern", KT.PATTERN, at=T0 + 20_000),
        lambda: mem.invalidate(ranked_ids(mem.store, flt, limit)[-1], reason="stale"),
    ]
    for step in steps:
        step()
        assert ranked_ids(mem.store, flt, limit) == _fresh(mem, flt, limit)[:limit]


def test_core_ranking_recomputed_when_weights_move(mem: Memory) -> None:
    ids = seed(mem, 30)
    flt = RecordFilter(types=(KT.FACT,), now=NOW)
    first = ranked_ids(mem.store, flt, 3)
    last_fact = [k for k in ids if k not in first and mem.store.get(k).record.type is KT.FACT]
    mem.store.set_weight(last_fact[-1], 0.99)  # a logged change: the mark moves with it
    assert ranked_ids(mem.store, flt, 3)[0] == last_fact[-1]
    mem.outcome([first[0]], "failure")  # an outcome round, nothing bumped by hand
    assert ranked_ids(mem.store, flt, 3) == _fresh(mem, flt, 3)[:3]


def test_many_writes_fall_back_to_a_full_rerank(mem: Memory) -> None:
    seed(mem, 20)
    flt = RecordFilter(types=(KT.FACT,), now=NOW)
    ranked_ids(mem.store, flt, 2)
    cache_for(mem.store).max_catch_up = 2
    for i in range(4):
        add(mem, f"fact {i}", KT.FACT, at=T0 + 5000 + i, subject=f"z.{i}")
    assert ranked_ids(mem.store, flt, 2) == _fresh(mem, flt, 2)


def test_pack_digest_is_the_same_with_a_cold_cache(mem: Memory) -> None:
    seed(mem, 40)
    warm = mem.context("retry the timeout", budget_tokens=4000, now=NOW)
    add(mem, "retry the cache timeout", KT.PITFALL, at=T0 + 100, subject="area1.topic.x")
    after = mem.context("retry the timeout", budget_tokens=4000, now=NOW)
    cache_for(mem.store).__init__()  # type: ignore[misc]  # drop every cached answer
    assert isinstance(cache_for(mem.store), RecordCache)
    cold = mem.context("retry the timeout", budget_tokens=4000, now=NOW)
    assert cold.digest == after.digest != warm.digest


def test_version_is_the_newest_exact_subject(mem: Memory) -> None:
    seed(mem, 5)
    mem.remember("v1.0.0", type=KT.FACT, scope="project:x", subject="project.x.version",
                 created_at=T0)
    mem.remember("v2.1.0", type=KT.FACT, scope="project:x", subject="project.x.version",
                 created_at=T0 + 50)
    mem.remember("v9.9.9", type=KT.FACT, scope="project:x", subject="project.x.version2",
                 created_at=T0 + 99)
    pack = mem.context("release", budget_tokens=8000, scopes=["project:x"], now=NOW)
    assert pack.version == "2.1.0"
