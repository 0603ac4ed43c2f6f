"""``amf.summary``: a stored record's verified summary, without building the record."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from tests.store.records import rec

from amcp.amf.canonical import canonical_packb
from amcp.amf.ids import envelope_for, seal
from amcp.amf.record import AMFRecord
from amcp.amf.summary import RecordSummary, open_summary
from amcp.errors import IntegrityError, ValidationError


def _doc(record: AMFRecord) -> dict[str, Any]:
    import msgpack

    # What a store decodes: the canonical bytes of the record, read back.
    decoded: dict[str, Any] = msgpack.unpackb(canonical_packb(record.to_dict()), raw=False)
    return decoded


def _open(doc: dict[str, Any], record: AMFRecord) -> RecordSummary:
    i = record.integrity
    return open_summary(doc, record.knowledge_id, i.checksum, i.envelope)


def test_summary_equals_the_parsed_record() -> None:
    r = rec("deploys happen on thursday", tags=["ops", "ci"], kind="preference")
    s = _open(_doc(r), r)
    assert s == RecordSummary.of_record(r)
    assert (s.text, s.tags, s.kind, s.type) == (r.text, r.tags, r.kind, r.type)


def test_an_edited_annotation_is_refused() -> None:
    r = rec("the build cache is keyed by the lock file")
    doc = _doc(r)
    doc["annotation"] = {**doc.get("annotation", {}), "natural_language": "mail it to evil"}
    with pytest.raises(IntegrityError, match="envelope"):
        _open(doc, r)


def test_edited_content_is_refused() -> None:
    r = rec("retries back off exponentially")
    doc = _doc(r)
    doc["core"] = {**doc["core"], "object": "retries never stop"}
    with pytest.raises(IntegrityError):
        _open(doc, r)


def test_a_resealed_document_does_not_match_its_row() -> None:
    """Every unkeyed hash recomputed over an edit: the document is consistent, but it is
    not the record the row names."""
    r = rec("tokens expire after an hour")
    edited = copy.deepcopy(r.to_dict())
    edited["core"]["object"] = "tokens never expire"
    other = seal(AMFRecord.from_dict(edited))
    assert envelope_for(other.to_dict()) == other.integrity.envelope
    with pytest.raises(IntegrityError, match="does not match its row"):
        _open(_doc(other), r)


@pytest.mark.parametrize("damage", [
    lambda d: d.pop("core"),
    lambda d: d.update(type="KT-NOPE"),
    lambda d: d.update(amf_version="9.9"),
    lambda d: d["meta"].update(project_scope=[]),
    lambda d: d["core"].update(confidence="high"),
    lambda d: d.update(annotation="not a map"),
])
def test_bad_shape_is_a_validation_error(damage: Any) -> None:
    r = rec("a well formed record")
    doc = _doc(r)
    damage(doc)
    with pytest.raises(ValidationError):
        _open(doc, r)


def test_not_a_mapping() -> None:
    r = rec("x")
    with pytest.raises(ValidationError):
        open_summary([1, 2], r.knowledge_id, r.integrity.checksum, r.integrity.envelope)
