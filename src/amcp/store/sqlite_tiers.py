"""Tier 0's local index of evicted records, for the SQLite adapter (``TierIndex``).

Eviction (docs/replication.md, "Tiers") drops a record's row, body and derived index rows
in one transaction and keeps a *pointer*: the facts a read needs to route itself and to
verify the record when it comes back. Those facts (checksum, envelope, type, scopes,
lifecycle, superseded_by) are the details of a signed ``evict`` change, and every pointer
read checks them against it — a pointer edited behind the node's back, or one whose
record was logged again since, is not served (upstream: the local index is checked, not
trusted). Subject and tags are kept beside it only so recall can say the record exists.

The row's removal moves the signed head (row count, set digest, census) like any other
write, and the integrity check leaves out ids whose latest change is ``evict``
(``sqlite_verify.latest_seqs``), so an evicted record is not taken for a deleted one.
A put of the same id (fetched back, or re-pulled by sync) drops the pointer in its own
transaction (``SQLiteStore.put_many``); so do purge and a tombstone.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import Any

import msgpack

from amcp.amf.mapping import text_of
from amcp.amf.types import KnowledgeType, Lifecycle
from amcp.errors import ValidationError
from amcp.store import sqlite_census as census
from amcp.store import sqlite_rows as col
from amcp.store import termstats
from amcp.store.admit import row_scopes
from amcp.store.base import ChangeOp, Pointer, TierUsage
from amcp.store.sqlite_access import SQLiteAccess
from amcp.store.sqlite_changes import ChangeLog
from amcp.store.sqlite_conn import SQLiteConn
from amcp.store.sqlite_rows import in_marks
from amcp.store.sqlite_state import StateChanges
from amcp.store.sqlite_verified import Verifier

# What may be evicted: a state sync makes equal everywhere, which the pointer keeps.
# Drafts (this node's firewall holds them), archived (local TTL) and tombstones stay.
EVICTABLE = frozenset({Lifecycle.ACTIVE, Lifecycle.SUPERSEDED, Lifecycle.INVALIDATED})
_POINTER_COLS = "p.knowledge_id, p.seq, p.subject, p.tags, p.size, p.holder, p.tier, " \
                "p.evicted_at, c.op, c.knowledge_id, c.details, c.hlc, p.text"
TEXT_KEPT = 1000  # characters of the statement kept for recall over pointers
_POINTER_SQL = (f"SELECT {_POINTER_COLS} FROM evicted p "
                "LEFT JOIN changes c ON c.seq = p.seq")


class SQLiteTiers:
    """``TierIndex`` over the store's own connection and change log."""

    def __init__(self, conn: SQLiteConn, changes: ChangeLog, verifier: Verifier,
                 access: SQLiteAccess, states: StateChanges) -> None:
        self._conn = conn
        self._db = conn.db
        self._changes = changes
        self._verifier = verifier
        self._access = access
        self._states = states

    # ------------------------------------------------------------------ writes

    def evict(self, knowledge_id: str, *, hlc: int, holder: str, tier: int) -> Pointer:
        if not holder or tier < 1:
            raise ValidationError("holder", "eviction needs the higher-tier peer holding it")
        with self._changes.atomic():
            row = self._verifier.live_row(knowledge_id)
            lifecycle = Lifecycle(row[col.LIFECYCLE])
            if lifecycle not in EVICTABLE or row[col.SENSITIVE]:
                raise ValidationError("knowledge_id", f"{knowledge_id} ({lifecycle.value}"
                                      f"{', sensitive' if row[col.SENSITIVE] else ''}) "
                                      "is not evictable")
            rowid = row[col.ROWID]
            tags = [t for (t,) in self._db.execute(
                "SELECT tag FROM record_tags WHERE rid=? ORDER BY tag", (rowid,))]
            details: dict[str, Any] = {
                "checksum": row[col.CHECKSUM], "envelope": row[col.ENVELOPE],
                "type": row[col.TYPE], "scopes": row_scopes(row[col.FACTS]),
                "lifecycle": lifecycle.value, "superseded_by": row[col.SUPERSEDED_BY],
                "reason": row[col.REASON], "holder": holder, "tier": tier,
            }
            body = msgpack.unpackb(row[col.BODY], raw=False)
            details["causal"] = _causal_facts(body)
            if lifecycle is Lifecycle.ACTIVE:
                termstats.count_rows(self._db, [rowid], -1)  # before its FTS row goes
            seq = self._changes.append(ChangeOp.EVICT, knowledge_id, hlc, details)
            self._drop_row(row)
            size = len(row[col.BODY])
            now = time.time()
            text = text_of(body)[:TEXT_KEPT]
            self._db.execute(
                "INSERT OR REPLACE INTO evicted(knowledge_id, seq, subject, tags, text, size,"
                " holder, tier, evicted_at) VALUES (?,?,?,?,?,?,?,?,?)",
                (knowledge_id, seq, row[col.SUBJECT] or "", "\n".join(tags), text, size,
                 holder, tier, now),
            )
        return _pointer(knowledge_id, details, row[col.SUBJECT] or "", tags, size, now, hlc,
                        text)

    def _drop_row(self, row: Any) -> None:
        """Delete the record's row and every derived row, moving the signed head's row
        count, set digest and census as the deletion does."""
        rowid = row[col.ROWID]
        self._states.drop_derived(rowid)
        gone = self._db.execute("DELETE FROM record_scopes WHERE rid=?", (rowid,)).rowcount
        self._changes.count(census.SCOPES, -gone)
        self._changes.count(census.LIFECYCLE + str(row[col.LIFECYCLE]), -1)
        if row[col.EXPIRES_AT] is not None:
            self._changes.count(census.EXPIRING, -1)
        self._db.execute("DELETE FROM records WHERE rowid=?", (rowid,))
        self._changes.resealed(row[col.SEAL], None, rows=-1)
        self._access.drop(row[col.KID])

    def release(self, knowledge_id: str, *, hlc: int, why: str) -> bool:
        with self._changes.atomic():
            row = self._pointer_row(knowledge_id)
            found = None if row is None else self._checked(row)
            if found is None or found.stale:
                return False
            details = dict(msgpack.unpackb(row[10], raw=False))
            details["stale"] = why or "changed elsewhere"
            self._relog(knowledge_id, hlc, details)
        return True

    def restate(self, knowledge_id: str, *, hlc: int, lifecycle: Lifecycle,
                superseded_by: str | None, reason: str | None) -> bool:
        """The pointer's state, as a new signed ``evict`` change (a pointer is served only
        while its change is the id's latest, so the old state is not served again). A
        stale mark stays: what changed elsewhere is still to be learned from the holder."""
        if lifecycle not in EVICTABLE:
            raise ValidationError("lifecycle", f"an evicted record cannot be {lifecycle.value}")
        with self._changes.atomic():
            row = self._pointer_row(knowledge_id)
            found = None if row is None else self._checked(row)
            if found is None:
                return False
            state = (lifecycle.value, superseded_by or None, reason)
            details = dict(msgpack.unpackb(row[10], raw=False))
            if (details.get("lifecycle"), details.get("superseded_by") or None,
                    details.get("reason")) == state:
                return False
            details["lifecycle"], details["superseded_by"], details["reason"] = state
            self._relog(knowledge_id, hlc, details)
        return True

    def _relog(self, knowledge_id: str, hlc: int, details: dict[str, Any]) -> None:
        seq = self._changes.append(ChangeOp.EVICT, knowledge_id, hlc, details)
        self._db.execute("UPDATE evicted SET seq=? WHERE knowledge_id=?", (seq, knowledge_id))

    def forget(self, knowledge_id: str) -> None:
        """Drop the pointer row (inside the caller's transaction: a put, a purge)."""
        self._db.execute("DELETE FROM evicted WHERE knowledge_id=?", (knowledge_id,))

    def forget_many(self, knowledge_ids: Sequence[str]) -> None:
        for start in range(0, len(knowledge_ids), 500):
            part = list(knowledge_ids[start:start + 500])
            self._db.execute(f"DELETE FROM evicted WHERE knowledge_id IN ({in_marks(len(part))})",
                             part)

    # ------------------------------------------------------------------ reads

    def _pointer_row(self, knowledge_id: str) -> Any:
        with self._conn.lock:
            return self._db.execute(_POINTER_SQL + " WHERE p.knowledge_id=?",
                                    (knowledge_id,)).fetchone()

    def pointer(self, knowledge_id: str) -> Pointer | None:
        row = self._pointer_row(knowledge_id)
        return None if row is None else self._checked(row)

    def pointers(self, knowledge_ids: Sequence[str]) -> dict[str, Pointer]:
        out: dict[str, Pointer] = {}
        ids = list(dict.fromkeys(knowledge_ids))
        for start in range(0, len(ids), 500):
            part = ids[start:start + 500]
            with self._conn.lock:
                rows = self._db.execute(
                    _POINTER_SQL + f" WHERE p.knowledge_id IN ({in_marks(len(part))})", part
                ).fetchall()
            for row in rows:
                found = self._checked(row)
                if found is not None:
                    out[found.knowledge_id] = found
        return out

    def find_pointers(self, terms: Sequence[str], *, limit: int = 20) -> list[Pointer]:
        """Pointers whose subject, tags or statement hold at least half of ``terms`` (case-folded,
        words of 3+ letters), the best covered first: a recall query's words."""
        words = list(dict.fromkeys(t.casefold() for t in terms if len(t.strip()) >= 3))
        if not words:
            return []
        need = max(1, (len(words) + 1) // 2)
        scored = []
        for p in self.iter_pointers():
            text = "\n".join((p.subject, *p.tags, p.text)).casefold()
            hits = sum(1 for w in words if w in text)
            if hits >= need:
                scored.append((-hits, p.knowledge_id, p))
        scored.sort(key=lambda x: (x[0], x[1]))
        return [p for _h, _k, p in scored[:limit]]

    def iter_pointers(self) -> Iterator[Pointer]:
        after = ""
        while True:
            with self._conn.lock:
                rows = self._db.execute(
                    _POINTER_SQL + " WHERE p.knowledge_id > ? ORDER BY p.knowledge_id LIMIT 500",
                    (after,)).fetchall()
            for row in rows:
                found = self._checked(row)
                if found is not None:
                    yield found
            if len(rows) < 500:
                return
            after = rows[-1][0]

    def check(self) -> tuple[str, ...]:
        """Upstream local_index_spec.integrity_check, run on open: pointers that do not
        match the signed log are not served, and since the digests leave them out,
        anti-entropy pulls those records back from the holder (the index rebuilt)."""
        with self._conn.lock:
            rows = self._db.execute(_POINTER_SQL).fetchall()
        bad = sum(1 for row in rows if self._checked(row) is None)
        if not bad:
            return ()
        return (f"{bad} of {len(rows)} evicted-record pointers do not match the signed log: "
                "not served; sync brings those records back",)

    def usage(self) -> TierUsage:
        with self._conn.lock:
            held = self._db.execute(
                "SELECT COUNT(*), COALESCE(SUM(LENGTH(body)), 0) FROM records "
                "WHERE body IS NOT NULL").fetchone()
            gone = self._db.execute(
                "SELECT COUNT(*), COALESCE(SUM(size), 0) FROM evicted").fetchone()
        return TierUsage(int(held[0]), int(held[1]), int(gone[0]), int(gone[1]))

    def sizes(self, knowledge_ids: Sequence[str]) -> dict[str, int]:
        out: dict[str, int] = {}
        ids = list(knowledge_ids)
        for start in range(0, len(ids), 500):
            part = ids[start:start + 500]
            with self._conn.lock:
                rows = self._db.execute(
                    "SELECT knowledge_id, LENGTH(body) FROM records WHERE knowledge_id IN "
                    f"({in_marks(len(part))})", part).fetchall()
            out.update({k: int(n or 0) for k, n in rows})
        return out

    def _checked(self, row: Sequence[Any]) -> Pointer | None:
        """The pointer, if its ``evict`` change is in the log, names it, is the record's
        latest change, and still says ``evict`` (not released): else it is not served."""
        (kid, seq, subject, tags, size, holder, tier, evicted_at, op, logged_kid, blob, hlc,
         text) = row
        if op != ChangeOp.EVICT.value or logged_kid != kid:
            return None
        with self._conn.lock:
            latest = self._db.execute(
                "SELECT MAX(seq) FROM changes WHERE knowledge_id=?", (kid,)).fetchone()[0]
        if latest != seq:
            return None
        details = msgpack.unpackb(blob, raw=False)
        if not isinstance(details, dict) or "checksum" not in details:
            return None
        if details.get("holder") != holder or details.get("tier") != tier:
            return None
        tag_list = [t for t in str(tags).split("\n") if t]
        return _pointer(kid, details, str(subject), tag_list, int(size), float(evicted_at),
                        int(hlc), str(text))


def _causal_facts(body: Any) -> dict[str, Any]:
    """What the conflict rule needs of a record it cannot read any more (sync.conflicts):
    what it supersedes and cites, its creator's clock, how much evidence it carries."""
    causal = body.get("causal") if isinstance(body, dict) else None
    causal = causal if isinstance(causal, dict) else {}
    core = body.get("core") if isinstance(body, dict) else None
    evidence = core.get("evidence") if isinstance(core, dict) else None
    return {"supersedes": causal.get("supersedes"),
            "caused_by": list(causal.get("caused_by") or ()),
            "hlc": causal.get("hlc"),
            "evidence": len(evidence) if isinstance(evidence, list) else 0}


def _pointer(kid: str, details: dict[str, Any], subject: str, tags: Sequence[str], size: int,
             evicted_at: float, hlc: int, text: str) -> Pointer:
    names = tuple(str(s) for s in details.get("scopes") or ())
    causal = details.get("causal")
    known = isinstance(causal, dict)
    facts: dict[str, Any] = causal if isinstance(causal, dict) else {}
    sup, chlc = facts.get("supersedes"), facts.get("hlc")
    return Pointer(
        knowledge_id=kid, type=KnowledgeType(details["type"]), scopes=names,
        checksum=str(details["checksum"]), envelope=details.get("envelope"),
        lifecycle=Lifecycle(details["lifecycle"]), superseded_by=details.get("superseded_by"),
        reason=details.get("reason"), subject=subject, tags=tuple(tags), size=size,
        holder=str(details["holder"]), tier=int(details["tier"]), evicted_at=evicted_at,
        hlc=hlc, stale=bool(details.get("stale")), text=text, causal_known=known,
        supersedes=sup if isinstance(sup, str) else None,
        caused_by=tuple(str(c) for c in facts.get("caused_by") or ()),
        causal_hlc=chlc if isinstance(chlc, str) else None,
        evidence=int(facts.get("evidence") or 0),
    )


__all__ = ["EVICTABLE", "SQLiteTiers"]
