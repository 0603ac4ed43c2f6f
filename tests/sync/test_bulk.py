"""The bulk apply of a run of puts (amcp.sync.bulk): a new edge's bootstrap with and without
a verifier process gives the same store, every record is verified (a forged signature in
the last chunk stores nothing of the run), held ids answer from one look-up."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from amcp.errors import IntegrityError
from amcp.memory import Memory
from amcp.sync import apply_changes, pull_changes
from amcp.sync.bulk import Verifier, verify_amfs
from amcp.sync.digest import scope_digests


def _mem(tmp_path: Path, name: str) -> Memory:
    return Memory(tmp_path / name / "memory.db", embedder="hashing")


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Any:
    mem = _mem(tmp_path_factory.mktemp("hub"), "hub")
    mem.remember_many({"text": f"record {i}: service s{i % 13} listens on port {1024 + i}",
                       "scope": f"team:{i % 3}"} for i in range(60))
    first = mem.remember("the deploy runs at nine", type="KT-DECISION", scope="team:0")
    mem.supersede(first.knowledge_id, "the deploy runs at ten", type="KT-DECISION",
                  scope="team:0")
    yield mem
    mem.close()


def _feed(hub: Memory) -> list[dict[str, Any]]:
    return [dict(c) for c in pull_changes(hub, 0, limit=5000).changes]


def _forge_signature(changes: list[dict[str, Any]], index: int) -> str:
    """Give the put at ``index`` another record's signature: id, checksum and envelope
    still match its content, only the Ed25519 check can tell."""
    puts = [i for i, c in enumerate(changes) if c["op"] == "put"]
    victim, donor = changes[puts[index]], changes[puts[0]]
    amf = {**victim["amf"], "integrity": {**victim["amf"]["integrity"],
                                           "signature": donor["amf"]["integrity"]["signature"]}}
    changes[puts[index]] = {**victim, "amf": amf}
    return str(victim["knowledge_id"])


def test_bootstrap_with_and_without_a_verifier_gives_the_same_store(
        tmp_path: Path, hub: Memory) -> None:
    feed = _feed(hub)
    plain, pooled = _mem(tmp_path, "plain"), _mem(tmp_path, "pooled")
    verifier = Verifier(1, min_run=16, chunk=16)
    try:
        one = apply_changes(plain, feed)
        two = apply_changes(pooled, feed, verifier=verifier)
        assert verifier.started  # the worker did verify (chunks 2..)
        for result in (one, two):
            assert result.conflicts == 0 and result.malformed == 0
            # 62 puts; the supersede entry only says again what the successor's put did
            assert (result.applied, result.duplicates) == (62, 1)
        assert scope_digests(plain) == scope_digests(pooled) == scope_digests(hub)
        assert plain.store.stats().records == pooled.store.stats().records == 62
        # the batch again: every put is a duplicate, answered from one look-up
        again = apply_changes(pooled, feed, verifier=verifier)
        assert again.applied == 0 and again.conflicts == 0
    finally:
        verifier.close()
        plain.close()
        pooled.close()


@pytest.mark.parametrize("pooled", [False, True])
def test_a_forged_signature_in_the_last_chunk_stores_nothing_of_the_run(
        tmp_path: Path, hub: Memory, pooled: bool) -> None:
    feed = _feed(hub)
    kid = _forge_signature(feed, 55)
    edge = _mem(tmp_path, "edge")
    verifier = Verifier(1, min_run=16, chunk=16) if pooled else None
    try:
        with pytest.raises(IntegrityError, match="signature does not verify"):
            apply_changes(edge, feed, verifier=verifier)
        assert edge.store.stats().records == 0  # the whole run rolled back
        assert edge.store.get(kid) is None
    finally:
        if verifier is not None:
            verifier.close()
        edge.close()


def test_a_closed_verifier_still_verifies_every_record(tmp_path: Path, hub: Memory) -> None:
    feed = _feed(hub)
    _forge_signature(feed, 3)
    edge = _mem(tmp_path, "edge")
    verifier = Verifier(1, min_run=1, chunk=8)
    verifier.close()
    try:
        assert not verifier.wants(100) and verifier.submit([]) is None
        with pytest.raises(IntegrityError):
            apply_changes(edge, feed, verifier=verifier)
        assert edge.store.stats().records == 0
    finally:
        edge.close()


def test_verify_amfs_tells_a_forgery_from_a_malformed_record(hub: Memory) -> None:
    feed = [c for c in _feed(hub) if c["op"] == "put"][:3]
    _forge_signature(feed, 1)
    broken = {**feed[2]["amf"], "core": "not a map"}
    found = verify_amfs([feed[0]["amf"], feed[1]["amf"], broken])
    assert [(i, kind) for i, kind, _m in found] == [(1, "integrity"), (2, "refuse")]


def test_held_ids_purged_ids_and_bad_clocks_in_one_run(tmp_path: Path, hub: Memory) -> None:
    feed = [c for c in _feed(hub) if c["op"] == "put"][:20]
    edge = _mem(tmp_path, "edge")
    try:
        first = apply_changes(edge, feed[:5])
        assert first.applied == 5
        gone = feed[5]["knowledge_id"]
        edge.store.put_tombstone(gone, hlc=edge.clock.send(), reason="test")
        no_date = dict(feed[6])
        amf = dict(no_date["amf"])
        amf["causal"] = {**amf["causal"], "hlc": "2026-13-02T10:00:00.000Z-0000-n1"}
        no_date["amf"] = amf
        result = apply_changes(edge, [*feed[:7], no_date, *feed[7:]])
        assert result.duplicates == 5  # held already: one get_many said so
        assert result.applied == 14  # feed[6] (its good copy) and feed[7:]
        problems = " | ".join(result.problems)
        assert f"{gone}: purged here" in problems
        assert "causal.hlc is not an HLC string" in problems
        assert edge.store.get(gone) is not None and edge.store.get(gone).record is None
    finally:
        edge.close()
