"""The ormsgpack path of the canonical encoder gives the walk's bytes, always.

``canonical_packb`` packs plain values (dicts with str keys and no null value, lists,
tuples, str, int, float, bool, bytes) with ormsgpack and everything else through the walk
(``normalised`` + msgpack). Here the two are compared on generated values, on generated
records (id, checksum, envelope, size), and on records stored by the encoder before the
ormsgpack path existed (``fixtures/canonical_records.json``, written by main's encoder):
ids and checksums of existing stores must never change.
"""

from __future__ import annotations

import datetime as dt
import enum
import hashlib
import json
import math
from collections import OrderedDict
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

import msgpack
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given, settings
from hypothesis import strategies as st

from amcp.amf.canonical import canonical_packb, normalised, pack_normalised
from amcp.amf.compose import compose_record
from amcp.amf.ids import (
    PLACEHOLDER_ID,
    PLACEHOLDER_SUM,
    check_size,
    seal,
    verify_integrity,
)
from amcp.amf.record import AMFRecord, Integrity
from amcp.errors import ValidationError

FIXTURES = Path(__file__).parent / "fixtures" / "canonical_records.json"
KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))  # the fixtures' signing key


def walk_packb(value: Any) -> bytes:
    """The reference: the walk and msgpack, as canonical_packb was before ormsgpack."""
    return pack_normalised(normalised(value))


def _outcome(fn: Any, value: Any) -> tuple[str, Any]:
    try:
        return "ok", fn(value)
    except Exception as exc:  # the same failure, whichever path raised it
        return "error", type(exc)


keys = st.text(max_size=6) | st.sampled_from(["a", "z", "é", "😀", "\uffff", "\ud7ff", ""])
scalars = (
    st.none() | st.booleans() | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.integers() | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=8)
    | st.binary(max_size=8)
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4)
    | st.lists(inner, max_size=3).map(tuple)
    | st.dictionaries(keys, inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=600, deadline=None)
@given(values)
def test_generated_values_encode_as_the_walk_does(value: Any) -> None:
    assert _outcome(canonical_packb, value) == _outcome(walk_packb, value)


def test_floats_keep_their_bits() -> None:
    for x in (0.0, -0.0, 1.0, 1e300, 5e-324, math.inf, -math.inf, 0.1):
        assert canonical_packb({"x": x}) == walk_packb({"x": x})
    nan = canonical_packb([math.nan])
    assert nan == walk_packb([math.nan]) and nan[1] == 0xCB  # float64, never float32


class Colour(enum.Enum):
    RED = "red"


class Name(str):
    pass


@pytest.mark.parametrize(
    "value",
    [
        MappingProxyType({"b": 1, "a": None}),
        OrderedDict([("b", 1), ("a", 2)]),
        {"k": Name("subclass of str")},
        {"k": [Name("x"), (1, 2)]},
        {"k": range(3)},
        {"k": bytearray(b"xy")},
    ],
)
def test_other_mappings_and_sequences_take_the_walk(value: Any) -> None:
    assert canonical_packb(value) == walk_packb(value)


@pytest.mark.parametrize(
    ("value", "field"),
    [
        ({"a": {1: "x"}}, "a"),
        ({"when": dt.datetime(2026, 1, 1)}, "when"),
        ({"c": Colour.RED}, "c"),
        ({"s": {1, 2}}, "s"),
    ],
)
def test_values_canonical_encoding_refuses_name_the_field(value: Any, field: str) -> None:
    with pytest.raises(ValidationError) as err:
        canonical_packb(value)
    assert err.value.field == field


def test_unencodable_strings_fail_as_they_always_did() -> None:
    for value in ({"a": "\ud800"}, ["\udfff"], {"\ud800": 1}):
        assert _outcome(canonical_packb, value) == _outcome(walk_packb, value)
        assert _outcome(canonical_packb, value)[0] == "error"


def test_too_deep_fails_as_it_always_did() -> None:
    deep: Any = "x"
    for _ in range(600):
        deep = [deep]
    assert _outcome(canonical_packb, deep) == _outcome(walk_packb, deep)


# ------------------------------------------------------------------ records


def _fixtures() -> list[dict[str, Any]]:
    loaded: list[dict[str, Any]] = json.loads(FIXTURES.read_text(encoding="utf-8"))
    return loaded


@pytest.mark.parametrize("case", _fixtures(), ids=lambda c: c["knowledge_id"][:14])
def test_stored_records_keep_their_bytes_ids_and_checksums(case: dict[str, Any]) -> None:
    record = AMFRecord.from_dict(case["record"])
    verify_integrity(record)
    assert canonical_packb(record.to_dict()).hex() == case["canonical_hex"]
    draft = replace(record, knowledge_id=PLACEHOLDER_ID,
                    integrity=Integrity(checksum=PLACEHOLDER_SUM))
    again = seal(draft, KEY if case["signature"] else None)
    assert again.knowledge_id == case["knowledge_id"]
    assert again.integrity.checksum == case["checksum"]
    assert again.integrity.envelope == case["envelope"]
    assert again.integrity.signature == case["signature"]
    assert check_size(again) == len(case["canonical_hex"]) // 2


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def reference_hashes(d: dict[str, Any]) -> tuple[str, str, str]:
    """Id, checksum and envelope of a record dict by the walk (PROFILE §6, written out)."""
    core, meta = d["core"], d["meta"]
    kid = "K-" + _sha(walk_packb(
        {"core": core, "created_at": meta["created_at"], "created_by": meta["created_by"]}))
    checksum = "sha256:" + _sha(walk_packb({"core": core, "meta": meta}))
    body = {k: v for k, v in d.items() if k != "integrity"}
    causal = {k: v for k, v in (body.pop("causal", None) or {}).items()
              if k not in ("hlc", "superseded_by")}
    if causal:
        body["causal"] = causal
    ext = {k: v for k, v in (body.pop("vendor_extensions", None) or {}).items() if k != "x-state"}
    if ext:
        body["vendor_extensions"] = ext
    return kid, checksum, "sha256:" + _sha(walk_packb(body))


ext_values = st.dictionaries(st.text(min_size=1, max_size=5).map(lambda s: "x-" + s), values,
                             max_size=3)
texts = st.text(min_size=1, max_size=40).filter(lambda s: s.strip() != "")


@settings(max_examples=200, deadline=None)
@given(text=texts, tags=st.lists(st.text(min_size=1, max_size=6), max_size=3),
       ext=ext_values, confidence=st.floats(min_value=0, max_value=1),
       hlc=st.none() | st.text(min_size=1, max_size=10))
def test_generated_records_seal_and_verify_as_the_walk_does(
    text: str, tags: list[str], ext: dict[str, Any], confidence: float, hlc: str | None
) -> None:
    try:
        walk_packb(ext)
    except (ValidationError, ValueError, TypeError, OverflowError):
        return  # not a record anyone can store
    try:
        record = compose_record(text, scope="team:x", tags=tags or None, confidence=confidence,
                                extensions=ext, created_at="2026-01-01T00:00:00Z",
                                created_by="amcp://n")
    except (ValidationError, UnicodeEncodeError):
        return  # refused by the record's own checks (say, a lone surrogate in the text)
    if hlc is not None and hlc.strip():
        record = record.with_causal(hlc=hlc)
    d = record.to_dict()
    kid, checksum, envelope = reference_hashes(d)
    assert (record.knowledge_id, record.integrity.checksum, record.integrity.envelope) == (
        kid, checksum, envelope)
    assert canonical_packb(d) == walk_packb(d)
    body = canonical_packb(d)
    again = AMFRecord.from_dict(msgpack.unpackb(body, raw=False))
    verify_integrity(again)  # what a store's read does with the body
    assert canonical_packb(again.to_dict()) == body
