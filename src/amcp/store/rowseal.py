"""Row seals: the node-side state a store serves is state the node wrote (PROFILE §6).

A record's body is content-addressed and checksummed, but what a store *does* with it —
serve it or hide it (lifecycle, superseded_by, expiry), in which scopes, in what order
(weight, created_at), encrypted or not — lives in columns beside it. Each row therefore
carries a **seal**: HMAC-SHA256, under a key derived from the node's data key, over the
store id, every one of those columns (``SEALED``) and the sha256 of the stored body bytes.
A read recomputes it; a row whose seal does not match was not written by this node as it
stands, and is quarantined instead of served.

A seal proves a row is *a* state the node wrote, not that it is the *current* one: an old
copy of a row (from a backup) still carries a valid seal. So the signed change-log head also
carries the number of rows and their **set digest** — the sum of all seals modulo 2**256
(an additive set hash over keyed elements). Every write adjusts it in its own transaction
(minus the old seal, plus the new) and signs it with the head; the check on open sums the
seal column and compares. An inserted, deleted, replayed or rolled-back row changes the sum.

Stdlib and msgpack only: the hooks' read-only reader (``fastread``) checks seals too.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import TYPE_CHECKING

import msgpack

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence
    from typing import Any

# Why a row is quarantined, in the words every reader uses (the full check and the hooks').
EDITED = "its row does not match its seal (changed outside amcp)"
UNLOGGED = "it has no change-log entry (added outside amcp)"
STALE_ROW = "its row is not its latest logged state (an older copy of the row)"
DELETED = "it is missing from the store (deleted outside amcp)"


def left_out_warning(count: int) -> str:
    """What every answer says while ``count`` records are quarantined (all read paths)."""
    return (f"{count} record(s) failed verification and are quarantined (left out of every "
            "answer); run `amcp verify` for the report")

# The sealed columns of ``records``, in seal order. Access counters (``access_count``,
# ``last_access``) are left out on purpose: PROFILE §6 allows them unsigned, because they
# only reorder results, never admit or hide one, and they change on every read.
SEALED = (
    "knowledge_id",
    "type",
    "kind",
    "subject",
    "created_at",
    "created_by",
    "scopes",
    "lifecycle",
    "hlc",
    "superseded_by",
    "reason",
    "expires_at",
    "sensitive",
    "weight",
    "checksum",
    "envelope",
    "content_key",
    "stored_at",
    "chain_seq",
)
# Columns stored as REAL and as INTEGER: normalised before packing, so a seal computed from
# the values a writer passes equals the one computed from what SQLite (or PostgreSQL) hands
# back (a weight written as 1 comes back as 1.0; msgpack encodes the two differently).
_REAL = frozenset({"expires_at", "weight", "stored_at"})
_INT = frozenset({"hlc", "sensitive", "chain_seq"})
_REAL_AT = tuple(i for i, c in enumerate(SEALED) if c in _REAL)
_INT_AT = tuple(i for i, c in enumerate(SEALED) if c in _INT)
MODULUS = 1 << 256
SEAL_BYTES = 32


def _normal(values: Sequence[Any]) -> list[Any]:
    # Every read checks a seal: touch only the six numeric columns, not all nineteen.
    out = list(values)
    if len(out) != len(SEALED):
        raise ValueError(f"{len(out)} sealed values, expected {len(SEALED)}")
    for at in _REAL_AT:
        if out[at] is not None:
            out[at] = float(out[at])
    for at in _INT_AT:
        if out[at] is not None:
            out[at] = int(out[at])
    return out


class Sealer:
    """Seals and checks rows of one store (its id is part of every seal, so a row copied
    from another store of the same node does not pass)."""

    __slots__ = ("_key", "_store_id")

    def __init__(self, key: bytes, store_id: str) -> None:
        self._key = key
        self._store_id = store_id

    def seal(self, rowid: int, values: Sequence[Any], body: bytes | None) -> bytes:
        """The seal of row ``rowid`` whose ``SEALED`` columns hold ``values`` and whose body
        is ``body`` (the bytes as stored: ciphertext for a sensitive record). The row id is
        sealed too: the index rows (lexical, vector, scopes, tags) name records by it, so two
        rows swapped whole, seals and all, must not pass."""
        digest = hashlib.sha256(body).digest() if body is not None else None
        message = msgpack.packb(
            [self._store_id, int(rowid), *_normal(values), digest], use_bin_type=True
        )
        return hmac.new(self._key, message, hashlib.sha256).digest()

    def check(
        self, rowid: int, values: Sequence[Any], body: bytes | None, seal: object
    ) -> bool:
        if not isinstance(seal, bytes) or len(seal) != SEAL_BYTES:
            return False
        return hmac.compare_digest(self.seal(rowid, values, body), seal)


def as_int(seal: bytes | None) -> int:
    """A seal's term in the set digest; a missing seal counts as 0 (and fails its check)."""
    return int.from_bytes(seal, "big") if isinstance(seal, bytes) else 0


def digest_of(seals: Iterable[bytes | None]) -> int:
    return sum(as_int(s) for s in seals) % MODULUS


def digest_text(value: int) -> str:
    return f"{value % MODULUS:064x}"


__all__ = ["DELETED", "EDITED", "MODULUS", "SEALED", "STALE_ROW", "UNLOGGED", "Sealer", "as_int",
           "digest_of", "digest_text", "left_out_warning"]
