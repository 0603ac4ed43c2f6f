"""Content addressing, checksums and signatures (PROFILE §6, T1-08)."""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from amcp.amf.canonical import canonical_packb, pack_plain, plain
from amcp.amf.record import (
    MAX_RECORD_BYTES,
    AMFRecord,
    Annotation,
    Causal,
    Core,
    Integrity,
    Meta,
)
from amcp.amf.types import KnowledgeType
from amcp.errors import IntegrityError, ValidationError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# What each hash covers, written once: over parts already ``plain`` (a plain value's parts
# are plain too), so verify_integrity and seal hash all three from one walk of a record.
def _id_of(core: Any, created_at: str, created_by: str) -> str:
    return "K-" + _sha256(pack_plain(
        {"core": core, "created_at": created_at, "created_by": created_by}))


def _checksum_of(core: Any, meta: Any) -> str:
    return "sha256:" + _sha256(pack_plain({"core": core, "meta": meta}))


def _envelope_of(enveloped: Any) -> str:
    return "sha256:" + _sha256(pack_plain(enveloped))


def knowledge_id_for(core: dict[str, Any], created_at: str, created_by: str) -> str:
    return _id_of(plain(core), created_at, created_by)


def checksum_for(core: dict[str, Any], meta: dict[str, Any]) -> str:
    return _checksum_of(plain(core), plain(meta))


def envelope_for(record: dict[str, Any]) -> str:
    """``integrity.envelope`` of a record dict (PROFILE §6): sha256 over the canonical record
    without ``integrity``, ``causal.hlc``, ``causal.superseded_by`` and ``x-state``.

    A section left empty by those removals counts as absent: the node adds ``causal.hlc``
    after the writer sealed the record, and the envelope must not change when it does.
    """
    return _envelope_of(plain(_enveloped(record)))


def _enveloped(record: dict[str, Any]) -> dict[str, Any]:
    """What the envelope covers of a record dict (see ``envelope_for``)."""
    body = {k: v for k, v in record.items() if k != "integrity"}
    causal = {
        k: v for k, v in (body.pop("causal", None) or {}).items()
        if k not in ("hlc", "superseded_by")
    }
    if causal:
        body["causal"] = causal
    ext = {k: v for k, v in (body.pop("vendor_extensions", None) or {}).items() if k != "x-state"}
    if ext:
        body["vendor_extensions"] = ext
    return body


def content_key(record: AMFRecord, secret: bytes | None = None) -> str:
    """Identity of *what* a record says, ignoring when and by whom: the dedup key.

    The knowledge id hashes created_at and created_by too, so the same statement written
    twice gets two ids; this key lets a store answer "already stored" for it anyway. A store
    keys it with a node secret (HMAC): stored in clear, a plain hash of the content would let
    anyone holding the file confirm a guessed secret (a PIN is 10,000 guesses).
    """
    body = canonical_packb(
        {
            "type": record.type.value,
            "core": record.core.to_dict(),
            "scope": sorted(record.meta.project_scope),
        }
    )
    if secret is None:
        return hashlib.sha256(body).hexdigest()
    return hmac.new(secret, body, hashlib.sha256).hexdigest()


def public_key_text(key: Ed25519PublicKey) -> str:
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    return b64url(key.public_bytes(Encoding.Raw, PublicFormat.Raw))


def sign_checksum(checksum: str, key: Ed25519PrivateKey) -> str:
    """``integrity.signature`` over the 32 bytes of a ``sha256:`` digest: the envelope when
    the record has one, else (an older writer) the checksum."""
    return "ed25519:" + b64url(key.sign(bytes.fromhex(checksum.removeprefix("sha256:"))))


def verify_integrity(record: AMFRecord, *, signature: bool = True) -> None:
    """Recompute id and checksum from content; check the signature when there is one.

    Raises IntegrityError: on the wire a mismatch is a protocol violation (PROFILE §2), in a
    store it is tampering. The envelope is checked when the record carries one (PROFILE §6:
    MUST); a record without it is an older writer's, and only its core and meta are covered.
    ``signature=False`` skips the Ed25519 check (the slow part) for records already verified
    on the way in.
    """
    integ = record.integrity
    signed = _check_hashes(record.to_dict(), record.knowledge_id, integ.checksum, integ.envelope)
    sig, pub = integ.signature, integ.public_key
    if sig is None or not signature:
        return
    if pub is None or not sig.startswith("ed25519:"):
        raise IntegrityError(f"{record.knowledge_id}: signature without an Ed25519 public key")
    # cryptography is imported here, not at module level: readers that only check checksums
    # (the hooks' per-prompt path) never pay for it.
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    try:
        Ed25519PublicKey.from_public_bytes(b64url_decode(pub)).verify(
            b64url_decode(sig.removeprefix("ed25519:")), bytes.fromhex(signed[7:])
        )
    except (InvalidSignature, ValueError) as exc:
        raise IntegrityError(f"{record.knowledge_id}: signature does not verify") from exc


def _check_hashes(
    record: dict[str, Any], knowledge_id: str, checksum: str | None, envelope: str | None
) -> str:
    """Recompute id, checksum and (when ``envelope`` is given) envelope of the record dict
    and compare them with the values given; the digest a signature covers."""
    # One walk of the record: id, checksum and envelope hashed from its plain parts.
    whole = plain(_enveloped(record))
    core, meta = whole["core"], whole["meta"]
    expected_id = _id_of(core, meta["created_at"], meta["created_by"])
    if expected_id != knowledge_id:
        raise IntegrityError(f"knowledge_id does not match content (expected {expected_id})")
    expected_sum = _checksum_of(core, meta)
    if expected_sum != checksum:
        raise IntegrityError(f"integrity.checksum does not match content of {knowledge_id}")
    if envelope is None:
        return expected_sum
    signed = _envelope_of(whole)
    if signed != envelope:
        raise IntegrityError(
            f"integrity.envelope does not match the record {knowledge_id} "
            "(its text, tags, links or extensions were changed)"
        )
    return signed


def verify_document(
    doc: dict[str, Any], knowledge_id: str, checksum: str | None, envelope: str | None
) -> None:
    """``verify_integrity`` (without the signature) for a record still in its decoded
    mapping form, as a reader that parses only part of it holds it
    (``amf.summary.open_summary``): the id, checksum and envelope the document states must
    be the given ones (a store row's), and recomputing them from the document must give
    them too. Hashing the mapping rather than the parsed record covers exactly what such
    a reader reads. The document's shape is the caller's to have checked (``core`` and
    ``meta`` mappings, ``meta.created_at`` / ``created_by`` strings)."""
    integ = doc.get("integrity")
    stated = (doc.get("knowledge_id"), *(
        (integ.get("checksum"), integ.get("envelope")) if isinstance(integ, dict) else (None,) * 2
    ))
    if stated != (knowledge_id, checksum, envelope):
        raise IntegrityError(f"stored record {knowledge_id} does not match its row")
    _check_hashes(doc, knowledge_id, checksum, envelope)


def seal(record: AMFRecord, key: Ed25519PrivateKey | None = None) -> AMFRecord:
    """Fill knowledge_id, checksum and envelope from content, and sign the envelope when a
    key is given."""
    # One walk of the draft: the id, checksum, envelope and size are all taken from it (the
    # id and integrity it carries are replaced, never hashed: the envelope covers the new id).
    whole = plain(record.to_dict())
    core, meta = whole["core"], whole["meta"]
    kid = _id_of(core, meta["created_at"], meta["created_by"])
    checksum = _checksum_of(core, meta)
    envelope = _envelope_of(_enveloped({**whole, "knowledge_id": kid}))
    integrity = Integrity(checksum=checksum, envelope=envelope, tamper_evident=True)
    if key is not None:
        integrity = replace(
            integrity,
            signature=sign_checksum(envelope, key),
            public_key=public_key_text(key.public_key()),
        )
    _check_bytes(len(pack_plain({**whole, "knowledge_id": kid, "integrity": integrity.to_dict()})))
    return replace(record, knowledge_id=kid, integrity=integrity)


def check_size(record: AMFRecord) -> int:
    return _check_bytes(len(canonical_packb(record.to_dict())))


def _check_bytes(size: int) -> int:
    if size > MAX_RECORD_BYTES:
        raise ValidationError(
            "", f"record is {size} bytes; the limit is {MAX_RECORD_BYTES} (1 MiB)"
        )
    return size


PLACEHOLDER_ID = "K-" + "0" * 64
PLACEHOLDER_SUM = "sha256:" + "0" * 64


def build_record(
    *,
    type: KnowledgeType,
    core: Core,
    meta: Meta,
    annotation: Annotation | None = None,
    causal: Causal | None = None,
    vendor_extensions: dict[str, Any] | None = None,
    key: Ed25519PrivateKey | None = None,
) -> AMFRecord:
    """Assemble and seal a new record."""
    if type is KnowledgeType.PATTERN and core.sample_size is None:
        raise ValidationError("core.sample_size", "is required for KT-PATTERN")
    draft = AMFRecord(
        knowledge_id=PLACEHOLDER_ID,
        type=type,
        core=core,
        meta=meta,
        integrity=Integrity(checksum=PLACEHOLDER_SUM),
        causal=causal,
        annotation=annotation,
    )
    if vendor_extensions:
        draft = draft.with_extensions(**vendor_extensions)
    return seal(draft, key)


def parse_record(data: Any, *, verify: bool = True) -> AMFRecord:
    """Validate a dict as AMF (400 on shape) and, by default, its id/checksum/signature."""
    record = AMFRecord.from_dict(data)
    if verify:
        verify_integrity(record)
    check_size(record)
    return record


def ids_of(records: Sequence[AMFRecord]) -> list[str]:
    return [r.knowledge_id for r in records]
