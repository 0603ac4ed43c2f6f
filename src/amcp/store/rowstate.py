"""What a write makes of a record's sealed row, for every adapter (store-agnostic).

A new record's body, change-log entry and sealed columns, and the sealed columns after a
lifecycle change, a purge, a tombstone or a weight change: the layout is ``rowseal.SEALED``
(positions in ``sqlite_rows``, which the PostgreSQL adapter's rows share), and what each
write puts in it is part of what the seal and the signed log vouch for, so it is written
once here; the adapters only run the SQL, seal and count.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from amcp.amf.canonical import canonical_packb
from amcp.amf.types import Lifecycle
from amcp.keyring import Keyring
from amcp.store import sqlite_rows as col
from amcp.store.admit import scopes_text
from amcp.store.base import ChangeOp, PutItem
from amcp.store.chain import link_hash

DEFAULT_WEIGHT = 0.5  # a new record's learned weight, before any outcome
# (seq, hlc, op, knowledge_id, details as canonical msgpack, chain hash): a change-log row.
LogRow = tuple[int, int, str, str, bytes, str]


@dataclass(frozen=True, slots=True)
class NewRow:
    """One new record as a store writes it (its seal is the adapter's to compute)."""

    body: bytes  # canonical AMF; AES-GCM ciphertext under the data key when sensitive
    change: LogRow
    values: tuple[Any, ...]  # the sealed columns, in ``rowseal.SEALED`` order

    @property
    def hash(self) -> str:
        return self.change[5]


def new_row(
    item: PutItem, *, seq: int, prev: str, now: float, keyring: Keyring, content_key: str
) -> NewRow:
    """``item``'s body, its ``put`` change chained after ``prev``, and its sealed columns."""
    record = item.record
    kid = record.knowledge_id
    body = canonical_packb(record.to_dict())
    if item.sensitive:
        body = keyring.seal(body, kid.encode())
    details: dict[str, Any] = {
        "checksum": record.integrity.checksum, "type": record.type.value,
        "scopes": list(record.meta.project_scope), "lifecycle": item.lifecycle.value,
    }
    if record.integrity.envelope is not None:
        details["envelope"] = record.integrity.envelope
    digest = link_hash(prev, seq, item.hlc, ChangeOp.PUT.value, kid, details)
    creator = record.meta.created_by
    if item.sensitive:  # its salt (Memory._salted) lives only in the encrypted body
        creator = creator.partition("#salt=")[0]
    values = (
        kid, record.type.value, record.kind, record.core.subject, record.meta.created_at,
        creator, scopes_text(record.meta.project_scope),
        item.lifecycle.value, item.hlc, None, None, item.expires_at, int(item.sensitive),
        DEFAULT_WEIGHT, record.integrity.checksum, record.integrity.envelope,
        content_key, now, seq,
    )
    change = (seq, item.hlc, ChangeOp.PUT.value, kid, canonical_packb(details), digest)
    return NewRow(body, change, values)


def _with(facts: Sequence[Any], changes: Sequence[tuple[int, Any]]) -> list[Any]:
    """The sealed columns ``facts`` with ``(row position, value)`` replaced."""
    values = list(facts)
    for at, value in changes:
        values[at - 1] = value  # row positions count the rowid first; facts do not
    return values


def state_details(
    lifecycle: Lifecycle, reason: str | None, superseded_by: str | None
) -> dict[str, Any]:
    """A lifecycle change's log details."""
    return {"lifecycle": lifecycle.value, "reason": reason, "superseded_by": superseded_by}


def after_state(
    facts: Sequence[Any], *, lifecycle: Lifecycle, hlc: int, reason: str | None,
    superseded_by: str | None, seq: int,
) -> list[Any]:
    """The sealed columns after a lifecycle change logged as change ``seq``."""
    changes: list[tuple[int, Any]] = [(col.LIFECYCLE, lifecycle.value), (col.HLC, hlc)]
    if reason is not None:
        changes.append((col.REASON, reason))
    if superseded_by is not None:
        changes.append((col.SUPERSEDED_BY, superseded_by))
    changes.append((col.CHAIN_SEQ, seq))
    return _with(facts, changes)


def after_purge(facts: Sequence[Any], *, hlc: int, reason: str | None, seq: int) -> list[Any]:
    """A purged record's sealed columns: lifecycle purged, and what named its content
    (subject, creator, kind, content key) wiped; its id, type and scopes stay."""
    return _with(facts, (
        (col.LIFECYCLE, Lifecycle.PURGED.value), (col.HLC, hlc), (col.REASON, reason),
        (col.SUBJECT, None), (col.CREATED_BY, None), (col.KIND, None),
        (col.CONTENT_KEY, None), (col.CHAIN_SEQ, seq),
    ))


def tombstone(
    knowledge_id: str, *, hlc: int, reason: str | None, seq: int, now: float
) -> tuple[Any, ...]:
    """The sealed columns of a tombstone for an id purged elsewhere, never stored here."""
    return (
        knowledge_id, "KT-FACT", None, None, None, None, None, Lifecycle.PURGED.value,
        hlc, None, reason, None, 0, DEFAULT_WEIGHT, None, None, None, now, seq,
    )


def after_weight(facts: Sequence[Any], *, weight: float, seq: int) -> list[Any]:
    """The sealed columns after a learned weight logged as change ``seq``."""
    return _with(facts, ((col.WEIGHT, float(weight)), (col.CHAIN_SEQ, seq)))


__all__ = [
    "DEFAULT_WEIGHT", "LogRow", "NewRow", "after_purge", "after_state", "after_weight",
    "new_row", "state_details", "tombstone",
]
