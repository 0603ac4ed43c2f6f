"""fire_event: event-triggered invalidation through the record_events index."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from amcp.amf.record import DecayModel
from amcp.amf.types import DecayType, Lifecycle
from amcp.errors import ValidationError
from amcp.evolution.events import fire_event, listening
from amcp.memory import Memory


def _decay(*events: str) -> DecayModel:
    return DecayModel(DecayType.EVENT_TRIGGERED, invalidation_events=events)


def test_fire_invalidates_listeners_once(tmp_path: Path) -> None:
    m = Memory(tmp_path / "m.db", embedder="hashing")
    a = m.remember("uses v1 endpoint", decay=_decay("OKX.API.VERSION_CHANGE")).knowledge_id
    b = m.remember("v1 auth header", decay=_decay("OKX.AUTH", "OKX.API.VERSION_CHANGE"),
                   sensitive=True).knowledge_id
    c = m.remember("prefix must not match", decay=_decay("OKX.API.VERSION_CHANGE.2")).knowledge_id
    d = m.remember("no decay model at all").knowledge_id
    assert sorted(listening(m, "OKX.API.VERSION_CHANGE")) == sorted([a, b])
    fired = fire_event(m, "OKX.API.VERSION_CHANGE")
    assert sorted(fired) == sorted([a, b])
    for kid in (a, b):
        state = m.get(kid).state
        assert state.lifecycle is Lifecycle.INVALIDATED
        assert state.reason == "event:OKX.API.VERSION_CHANGE"
    for kid in (c, d):
        assert m.get(kid).state.lifecycle is Lifecycle.ACTIVE
    logged = [ch for ch in m.store.changes() if ch.op == "invalidate"]
    assert {ch.knowledge_id for ch in logged} == {a, b}
    assert {ch.details["reason"] for ch in logged} == {"event:OKX.API.VERSION_CHANGE"}
    assert fire_event(m, "OKX.API.VERSION_CHANGE") == []  # idempotent
    assert len([ch for ch in m.store.changes() if ch.op == "invalidate"]) == 2
    assert m.fire_event("okx.api.version_change") == []  # exact, case-sensitive
    assert m.store.verify(full=True).ok
    m.close()


@pytest.mark.parametrize("bad", ["", "   ", "x" * 257, 5])
def test_bad_event_names(tmp_path: Path, bad: object) -> None:
    m = Memory(tmp_path / "m.db", embedder="hashing")
    with pytest.raises(ValidationError):
        fire_event(m, bad)  # type: ignore[arg-type]
    m.close()


def test_purge_drops_event_rows(tmp_path: Path) -> None:
    m = Memory(tmp_path / "m.db", embedder="hashing")
    kid = m.remember("to be erased", decay=_decay("E")).knowledge_id
    m.purge(kid)
    assert fire_event(m, "E") == []
    m.close()
    db = sqlite3.connect(tmp_path / "m.db")
    assert db.execute("SELECT COUNT(*) FROM record_events").fetchone()[0] == 0
    db.close()


def test_upgrade_from_schema_2_backfills_the_event_index(tmp_path: Path) -> None:
    m = Memory(tmp_path / "m.db", embedder="hashing")
    kid = m.remember("written before migration 3", decay=_decay("E1")).knowledge_id
    secret = m.remember("sensitive one", decay=_decay("E1"), sensitive=True).knowledge_id
    m.close()
    db = sqlite3.connect(tmp_path / "m.db", isolation_level=None)
    db.execute("DROP TABLE record_events")
    db.execute("DROP TABLE records_fts_vocab")  # migration 4 came later too
    db.execute("DROP INDEX records_ranked")  # and migration 5
    db.execute("DROP INDEX records_ranked_kind")
    db.execute("DROP TABLE scope_terms")  # and migration 6
    db.execute("DROP TABLE scope_sizes")
    db.execute("DROP TABLE term_peaks")  # and migration 7
    db.execute("DROP TABLE record_links")  # and migration 8
    db.execute("PRAGMA user_version=2")
    db.close()
    m = Memory(tmp_path / "m.db", embedder="hashing")
    assert sorted(fire_event(m, "E1")) == sorted([kid, secret])
    m.close()
