"""The hash chain over a store's change log, and its signed head (store-agnostic).

Each change's hash covers the previous hash and the change itself, so editing, deleting or
reordering any entry breaks every hash after it. The head — last seq and hash, and the
number of record rows and their set digest (``rowseal``) — is signed with the node key and
also written to a witness outside the store: truncating the log (rollback) or replacing the
whole file is caught by comparing against the witness, and a row inserted, deleted or
replayed behind the node's back by comparing the rows with the signed count and digest.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from amcp.amf.canonical import canonical_packb
from amcp.amf.ids import b64url, b64url_decode
from amcp.errors import StoreIntegrityError
from amcp.store import headtext

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )

GENESIS = "0" * 64


def link_hash(prev: str, seq: int, hlc: int, op: str, knowledge_id: str, details: Any) -> str:
    body = canonical_packb([seq, hlc, op, knowledge_id, details])
    return hashlib.sha256(bytes.fromhex(prev) + body).hexdigest()


def walk_links(
    rows: Iterable[Sequence[Any]], prev: str = GENESIS, seq_seen: int = 0
) -> tuple[str, int, list[str]]:
    """Recompute every link of ``rows`` — ``(seq, hlc, op, knowledge_id, details bytes,
    hash)`` in seq order, the first after ``seq_seen`` (whose hash is ``prev``): the last
    hash and seq reached, and what was wrong (empty if the walk reached the end). Every
    adapter's integrity check walks its log with this."""
    import msgpack

    for seq, hlc, op, kid, blob, digest in rows:
        if seq != seq_seen + 1:
            return prev, seq_seen, [f"change log gap or reorder at seq {seq}"]
        try:
            details = msgpack.unpackb(blob, raw=False)
        except (ValueError, msgpack.UnpackException):
            return prev, seq_seen, [f"change {seq} has unreadable details"]
        if link_hash(prev, seq, hlc, op, kid, details) != digest:
            return prev, seq_seen, [f"change {seq} ({op} {str(kid)[:14]}…) was altered"]
        prev, seq_seen = digest, seq
    return prev, seq_seen, []


@dataclass(frozen=True, slots=True)
class Head:
    """What the node signs after every committed write."""

    seq: int  # the last change
    hash: str  # its chain hash (hex)
    rows: int  # record rows (tombstones included)
    digest: int  # their set digest (rowseal.digest_of)
    # Row counts an open can take with one indexed COUNT each (records by lifecycle, TTL'd
    # records, scope, tag, lexical and vector index rows), as sorted (name, count) pairs: a
    # column edit that hides a record, or a deleted index row, changes one of them.
    census: tuple[tuple[str, int], ...] = ()

    def message(self, store_id: str) -> bytes:
        return headtext.message(store_id, self.seq, self.hash, self.rows, self.digest,
                                self.census)

    def moved(
        self, seq: int, hash_: str, rows: int, digest: int, census: Mapping[str, int]
    ) -> Head:
        from amcp.store.rowseal import MODULUS

        counts = dict(self.census)
        for key, n in census.items():
            counts[key] = counts.get(key, 0) + n
        kept = tuple(sorted((k, v) for k, v in counts.items() if v))
        return Head(seq, hash_, self.rows + rows, (self.digest + digest) % MODULUS, kept)


EMPTY_HEAD = Head(0, GENESIS, 0, 0)


def sign_head(key: Ed25519PrivateKey, mac_key: bytes, store_id: str, head: Head) -> str:
    """``store_meta.chain_head``: the head, its signature and its MAC (``headtext``)."""
    text = headtext.HeadText(head.seq, head.hash, b64url(key.sign(head.message(store_id))),
                             head.rows, head.digest, head.census)
    text.mac = headtext.mac_of(mac_key, text, store_id)
    return headtext.format_head(text)


def read_head(public: Ed25519PublicKey, store_id: str, stored: str) -> Head:
    """The head a ``chain_head`` value carries; ValueError if it is malformed or its
    signature does not verify (under ``public``, for ``store_id``). The MAC is the fast
    reader's; the signature is the stronger check and the one every other reader makes."""
    from cryptography.exceptions import InvalidSignature

    text = headtext.parse_head(stored)
    head = Head(text.seq, text.hash, text.rows, text.digest, text.census)
    try:
        public.verify(b64url_decode(text.signature), head.message(store_id))
    except (InvalidSignature, ValueError) as exc:
        raise ValueError("the signature on the change-log head does not verify") from exc
    return head


def trusted_head(public: Ed25519PublicKey, store_id: str, stored: str | None) -> Head:
    """The head a store's ``chain_head`` meta holds (the empty head when it holds none),
    verified; StoreIntegrityError when it does not verify: the log cannot be trusted."""
    if stored is None:
        return EMPTY_HEAD
    try:
        return read_head(public, store_id, stored)
    except ValueError as exc:
        raise StoreIntegrityError(f"{exc}: the change log cannot be trusted") from exc


def read_legacy_head(public: Ed25519PublicKey, store_id: str, text: str) -> tuple[int, str]:
    """(seq, hash) of a head signed before row seals (schema < 9): only the migration
    that adds seals reads one, and re-signs the store in the new form."""
    from cryptography.exceptions import InvalidSignature

    seq, hash_, sig = text.split()
    message = f"amcp-chain-head:{store_id}:{seq}:{hash_}".encode()
    try:
        public.verify(b64url_decode(sig), message)
    except (InvalidSignature, ValueError) as exc:
        raise ValueError("the signature on the change-log head does not verify") from exc
    return int(seq), hash_
