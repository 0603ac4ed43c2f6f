from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import msgpack
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from amcp.amf import AMFRecord, canonical_packb, parse_record, seal, verify_integrity
from amcp.amf.ids import content_key, knowledge_id_for
from amcp.errors import IntegrityError, Status, ValidationError

# Vendored with its licence: tests/spec/README.md.
SPEC = Path(__file__).resolve().parents[1] / "spec" / "upstream" / "AMCP_v1.0.json"


def upstream_example() -> dict[str, Any]:
    d = json.loads(SPEC.read_text())["L6_memory_representation"]["amf_example"]
    d.pop("_doc")
    return d


def valid() -> dict[str, Any]:
    return seal(AMFRecord.from_dict(upstream_example())).to_dict()


def test_upstream_example_parses_and_seals() -> None:
    rec = seal(AMFRecord.from_dict(upstream_example()))
    verify_integrity(rec)
    assert rec.knowledge_id.startswith("K-") and len(rec.knowledge_id) == 66
    assert parse_record(rec.to_dict()) == rec


def test_knowledge_id_is_sha256_of_canonical_core_and_creator() -> None:
    d = valid()
    body = {
        "core": d["core"],
        "created_at": d["meta"]["created_at"],
        "created_by": d["meta"]["created_by"],
    }
    import hashlib

    assert d["knowledge_id"] == "K-" + hashlib.sha256(canonical_packb(body)).hexdigest()
    assert (
        knowledge_id_for(d["core"], d["meta"]["created_at"], d["meta"]["created_by"])
        == d["knowledge_id"]
    )


def test_canonical_rules() -> None:
    # keys sorted by UTF-8 bytes, nulls dropped, floats as float64, ints shortest
    packed = canonical_packb({"b": 1, "a": None, "é": 1.0, "A": [3, None]})
    assert msgpack.unpackb(packed) == {"A": [3, None], "b": 1, "é": 1.0}
    assert list(msgpack.unpackb(packed)) == ["A", "b", "é"]
    assert b"\xcb" in canonical_packb({"c": 1.0})  # float64 marker
    assert canonical_packb({"c": 1}) == b"\x81\xa1c\x01"


def test_confidence_one_int_and_float_give_same_id() -> None:
    d1, d2 = valid(), valid()
    d1["core"]["confidence"] = 1
    d2["core"]["confidence"] = 1.0
    assert seal(AMFRecord.from_dict(d1)).knowledge_id == seal(AMFRecord.from_dict(d2)).knowledge_id


def test_tampered_content_is_refused() -> None:
    d = valid()
    d["core"]["object"] = "something else"
    with pytest.raises(IntegrityError, match="knowledge_id does not match"):
        parse_record(d)
    d = valid()
    d["meta"]["language"] = "en"
    with pytest.raises(IntegrityError, match="checksum"):
        parse_record(d)


def test_signature_round_trip_and_forgery() -> None:
    key = Ed25519PrivateKey.generate()
    rec = seal(AMFRecord.from_dict(upstream_example()), key)
    verify_integrity(rec)
    other = seal(AMFRecord.from_dict(upstream_example()), Ed25519PrivateKey.generate())
    forged = copy.deepcopy(rec.to_dict())
    forged["integrity"]["signature"] = other.integrity.signature
    with pytest.raises(IntegrityError, match="signature"):
        parse_record(forged)


def _set(d: dict[str, Any], path: str, value: Any) -> None:
    *parents, last = path.split(".")
    for p in parents:
        d = d[p]
    if value is _DELETE:
        del d[last]
    else:
        d[last] = value


_DELETE = object()

BAD: list[tuple[str, Any, str]] = [
    ("knowledge_id", _DELETE, "knowledge_id"),
    ("knowledge_id", "K-xyz", "knowledge_id"),
    ("amf_version", "2.0", "amf_version"),
    ("type", "KT-RUMOUR", "type"),
    ("core.subject", _DELETE, "core.subject"),
    ("core.subject", 42, "core.subject"),
    ("core.predicate", "LIKES", "core.predicate"),
    ("core.object", "", "core.object"),
    ("core.confidence", 1.5, "core.confidence"),
    ("core.confidence", "high", "core.confidence"),
    ("core.confidence", float("nan"), "core.confidence"),
    ("core.evidence", "not-a-list", "core.evidence"),
    ("core.surprise", 1, "core.surprise"),
    ("meta.created_at", "2026-03-10 14:35:00", "meta.created_at"),
    ("meta.created_at", 1710000000, "meta.created_at"),
    ("meta.created_by", _DELETE, "meta.created_by"),
    ("meta.project_scope", [], "meta.project_scope"),
    ("meta.project_scope", "StepQuant", "meta.project_scope"),
    ("integrity.checksum", "md5:abc", "integrity.checksum"),
    ("integrity", _DELETE, "integrity"),
    ("distribution.locality", "mars", "distribution.locality"),
    ("causal.supersedes", "not-an-id", "causal.supersedes"),
    ("annotation.tags", [1, 2], "annotation.tags[0]"),
    ("core.subject", "bad \udcff surrogate", "core.subject"),
]


@pytest.mark.parametrize(
    ("path", "value", "field"), BAD, ids=[f"{p}={'<deleted>' if v is _DELETE else repr(v)[:30]}" for p, v, _ in BAD]
)
def test_bad_records_name_the_field(path: str, value: Any, field: str) -> None:
    d = valid()
    _set(d, path, value)
    with pytest.raises(ValidationError) as info:
        AMFRecord.from_dict(d)
    assert info.value.field == field
    assert info.value.status is Status.BAD_REQUEST


def test_pattern_requires_sample_size() -> None:
    d = valid()
    d["type"] = "KT-PATTERN"
    with pytest.raises(ValidationError, match="sample_size"):
        AMFRecord.from_dict(d)


def test_record_over_one_mebibyte_is_refused() -> None:
    d = upstream_example()
    d["annotation"]["natural_language"] = "x" * (1024 * 1024 + 1)
    with pytest.raises(ValidationError, match="annotation.natural_language: longer than"):
        AMFRecord.from_dict(d)
    d["annotation"]["natural_language"] = "y" * 700_000
    d["annotation"]["context_hint"] = "z" * 700_000
    with pytest.raises(ValidationError, match="1 MiB"):
        seal(AMFRecord.from_dict(d))


def test_too_many_tags_is_refused() -> None:
    d = valid()
    d["annotation"]["tags"] = ["t"] * 1025
    with pytest.raises(ValidationError, match="annotation.tags: more than 1024"):
        AMFRecord.from_dict(d)


def test_empty_and_missing_evidence_are_different_records() -> None:
    a, b = upstream_example(), upstream_example()
    a["core"]["evidence"] = []
    del b["core"]["evidence"]
    ra, rb = seal(AMFRecord.from_dict(a)), seal(AMFRecord.from_dict(b))
    assert ra.knowledge_id != rb.knowledge_id
    assert parse_record(ra.to_dict()) == ra
    assert content_key(ra) != content_key(rb)
