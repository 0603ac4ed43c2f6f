"""Migration 9's backfill: seal every row of a store written before row seals existed.

Run once, on the first open by an amcp that knows seals, under the store's write lock and
in one transaction (a crash leaves the marker, and the next open runs it again). Before it
signs anything new it checks the store the old way — the whole chain, the old signed head,
the old witness beside the keys — because sealing a tampered store would bless the damage.

Then, row by row: the body is opened and checked (id, checksum, signature); records this
node created get their ``integrity.envelope`` (and a signature over it) added, records from
elsewhere stay without one (``envelope: unverified``, PROFILE §6); the sealed columns
(scopes, envelope, the keyed content key, the latest change) are filled and the row sealed.
A body that cannot be opened is left unsealed: it is quarantined when read and reported by
``amcp verify``, and the rest of the store is upgraded.

Measured cost: dominated by one Ed25519 signature and two canonical encodings per record
this node created (see docs/store.md, Migrations).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import msgpack

from amcp.amf.canonical import canonical_packb
from amcp.amf.ids import content_key, public_key_text, seal, verify_integrity
from amcp.amf.record import AMFRecord
from amcp.errors import AmcpError, StoreIntegrityError
from amcp.keyring import Keyring, Witness
from amcp.store.admit import scopes_text
from amcp.store.chain import Head, read_head, read_legacy_head
from amcp.store.rowseal import digest_of
from amcp.store.sqlite_census import census_of
from amcp.store.sqlite_verify import walk_chain

if TYPE_CHECKING:
    from amcp.store.rowseal import Sealer
    from amcp.store.sqlite_changes import ChangeLog

log = logging.getLogger(__name__)

SEALS_PENDING = "backfill.seals"  # store_meta marker set by migration 9
HEAD_MAC_PENDING = "backfill.head-mac"  # set by migration 10
_COLS = (
    "rowid, knowledge_id, type, kind, subject, created_at, created_by, lifecycle, hlc, "
    "superseded_by, reason, expires_at, sensitive, weight, checksum, content_key, stored_at, "
    "chain_seq, body"
)


def backfill_seals(changes: ChangeLog, sealer: Sealer, content_secret: bytes) -> None:
    """Seal every row while migration 9's marker says so; call locked. ``changes`` is the
    store's change log (it writes the new head); ``content_secret`` keys the content keys."""
    db = changes.conn.db
    pending = "SELECT 1 FROM store_meta WHERE key=?"
    if db.execute(pending, (SEALS_PENDING,)).fetchone() is None:
        return
    with changes.atomic():
        if db.execute(pending, (SEALS_PENDING,)).fetchone() is None:
            return  # another process did it while we waited for the lock
        seq, chain = _check_legacy(changes)
        latest = dict(db.execute("SELECT knowledge_id, MAX(seq) FROM changes GROUP BY 1"))
        rows = db.execute(f"SELECT {_COLS} FROM records").fetchall()
        seals = [_seal_row(changes, sealer, content_secret, row, latest) for row in rows]
        counts = tuple(sorted(census_of(db).items()))
        head = Head(seq, chain, len(seals), digest_of(seals), counts)
        changes.store_head(head)
        changes.conn.upsert_meta("witnessed", "1")
        changes.remember_places()
        db.execute("DELETE FROM store_meta WHERE key=?", (SEALS_PENDING,))
        changes.keyring.write_witness(
            changes.store_id, Witness(seq, chain), changes.witness_places()
        )
        changes.forget_deltas()


def backfill_head_mac(changes: ChangeLog) -> None:
    """Migration 10: store the signed head again with its MAC (``headtext``), so the hooks'
    fast reader can check it. Only a head whose signature verifies is re-stored (the same
    fields, MAC added); one that does not is left for the check on open to report. Call
    locked."""
    db = changes.conn.db
    pending = "SELECT 1 FROM store_meta WHERE key=?"
    if db.execute(pending, (HEAD_MAC_PENDING,)).fetchone() is None:
        return
    with changes.atomic():
        if db.execute(pending, (HEAD_MAC_PENDING,)).fetchone() is None:
            return
        try:
            head = changes.signed_head()
        except StoreIntegrityError:
            return
        if changes.conn.get_meta("chain_head") is not None:
            changes.store_head(head)
        db.execute("DELETE FROM store_meta WHERE key=?", (HEAD_MAC_PENDING,))


def _check_legacy(changes: ChangeLog) -> tuple[int, str]:
    """The old checks, whole: chain, old-form signed head, the witness the old layout kept
    beside the keys. Returns the log's last (seq, hash)."""
    prev, seq, problems = walk_chain(changes.conn.db)
    text = changes.conn.get_meta("chain_head")
    if not problems and text is not None and seq:
        public = changes.keyring.signing_key.public_key()
        if changes.conn.get_meta("node_key") != public_key_text(public):
            problems.append("the store was signed by another node key")
        else:
            try:
                if _signed_end(public, changes.store_id, text) != (seq, prev):
                    problems.append("the change log does not end at its signed head")
            except ValueError as exc:
                problems.append(str(exc))
    elif not problems and seq:
        problems.append("the change log has no signed head")
    old = _old_witness(changes.keyring, changes.store_id)
    if not problems and old is not None and old.seq > seq:
        problems.append(f"the store was rolled back: the witness has seen change {old.seq}")
    if problems:
        raise StoreIntegrityError(
            f"{changes.conn.path} cannot be upgraded to sealed rows: " + "; ".join(problems)
        )
    return seq, prev


def _signed_end(public: Any, store_id: str, text: str) -> tuple[int, str]:
    """(seq, hash) a signed head names, in the old form or (a store migrated again, as the
    migration tests do) the new one."""
    if len(text.split()) == 3:
        return read_legacy_head(public, store_id, text)
    if len(text.split()) == 5:  # a head signed without a census (development builds)
        seq, hash_ = text.split()[:2]
        return int(seq), hash_
    head = read_head(public, store_id, text)
    return head.seq, head.hash


def _old_witness(keyring: Keyring, store_id: str) -> Witness | None:
    path = keyring.directory / "witness" / f"{store_id}.head"
    try:
        seq, head = path.read_text().split()
        return Witness(int(seq), head)
    except (OSError, ValueError):
        return None


def _seal_row(
    changes: ChangeLog,
    sealer: Sealer,
    content_secret: bytes,
    row: tuple[Any, ...],
    latest: dict[str, int],
) -> bytes | None:
    (rowid, kid, ktype, kind, subject, created_at, created_by, lifecycle, hlc, superseded_by,
     reason, expires_at, sensitive, weight, checksum, ckey, stored_at, chain_seq, body) = row
    scopes = envelope = None
    if body is not None:
        opened = _open_and_upgrade(changes.keyring, kid, body, bool(sensitive))
        if opened is None:
            return None  # left unsealed: quarantined when read, named by `amcp verify`
        record, body = opened
        scopes = scopes_text(record.meta.project_scope)
        envelope = record.integrity.envelope
        ckey = content_key(record, content_secret)
    values = (
        kid, ktype, kind, subject, created_at, created_by, scopes, lifecycle, hlc,
        superseded_by, reason, expires_at, sensitive, weight, checksum, envelope, ckey,
        stored_at, latest.get(kid, chain_seq),
    )
    sealed = sealer.seal(rowid, values, body)
    changes.conn.db.execute(
        "UPDATE records SET scopes=?, envelope=?, content_key=?, chain_seq=?, body=?, seal=? "
        "WHERE rowid=?",
        (scopes, envelope, ckey, values[-1], body, sealed, rowid),
    )
    return sealed


def _open_and_upgrade(
    keyring: Keyring, kid: str, body: bytes, sensitive: bool
) -> tuple[AMFRecord, bytes] | None:
    """The verified record and the body to keep: with an envelope added (and signed) when
    this node created the record."""
    try:
        raw = keyring.open(body, kid.encode()) if sensitive else body
        record = AMFRecord.from_dict(msgpack.unpackb(raw, raw=False))
        if record.knowledge_id != kid:
            raise AmcpError("the body holds another record")
        verify_integrity(record)
    except (ValueError, AmcpError, msgpack.UnpackException) as exc:
        log.warning("migration 9: %s left unsealed: %s", kid, exc)
        return None
    own = public_key_text(keyring.signing_key.public_key())
    if record.integrity.envelope is None and record.integrity.public_key == own:
        record = seal(record, keyring.signing_key)
        body = canonical_packb(record.to_dict())
        if sensitive:
            body = keyring.seal(body, kid.encode())
    return record, body
