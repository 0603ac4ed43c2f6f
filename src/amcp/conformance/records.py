"""AMF records the Level-1 procedures write: fresh, unique, and mutated on purpose.

Records are built with the AMF helpers and then handled as plain dicts, because the tests
must send shapes the typed ``AMFRecord`` refuses to hold (a missing required field).
"""

from __future__ import annotations

import copy
import os
from dataclasses import replace
from typing import Any

from amcp.amf import (
    Causal,
    Core,
    DecayModel,
    Distribution,
    KnowledgeType,
    Meta,
    Predicate,
    build_record,
    checksum_for,
    knowledge_id_for,
    seal,
)
from amcp.amf.timefmt import utc_now

# T1-04's list (upstream conformance-level-1.md), in its order, plus PROFILE §6's rule
# that KT-PATTERN also needs core.sample_size.
REQUIRED_FIELDS: tuple[str, ...] = (
    "knowledge_id",
    "amf_version",
    "type",
    "core.subject",
    "core.predicate",
    "core.object",
    "core.confidence",
    "meta.created_at",
    "meta.created_by",
    "meta.project_scope",
    "integrity.checksum",
)
PATTERN_FIELD = "core.sample_size"


def fresh_record(
    scope: str, created_by: str, *, label: str, pattern: bool = False
) -> dict[str, Any]:
    """A valid, sealed record no node has seen before (a random token in subject/object).

    Uniqueness matters: a node keeps records across runs, and a second run must not get
    "200 already stored" or a 409 from the first run's data.
    """
    token = os.urandom(8).hex()
    core = Core(
        subject=f"conformance/{label}/{token}",
        predicate=Predicate.REQUIRES if not pattern else Predicate.CORRELATES_WITH,
        object=f"object {token}",
        confidence=0.9,
        sample_size=12 if pattern else None,
    )
    meta = Meta(created_at=utc_now(), created_by=created_by, project_scope=(scope,))
    kind = KnowledgeType.PATTERN if pattern else KnowledgeType.FACT
    return build_record(type=kind, core=core, meta=meta).to_dict()


def without(record: dict[str, Any], path: str) -> dict[str, Any]:
    """A deep copy of ``record`` with the dotted ``path`` removed."""
    out = copy.deepcopy(record)
    *parents, leaf = path.split(".")
    node = out
    for part in parents:
        node = node[part]
    del node[leaf]
    return out


def expected_knowledge_id(record: dict[str, Any]) -> str:
    """T1-08: ``K-`` + SHA-256 of canonical MessagePack of core, created_at, created_by."""
    meta = record["meta"]
    return knowledge_id_for(record["core"], meta["created_at"], meta["created_by"])


def overwrite_of(record: dict[str, Any]) -> dict[str, Any]:
    """T1-05: same knowledge_id, different core.object, checksum honestly recomputed.

    Only the id is inconsistent with the content — the shape of a client trying to edit a
    record in place. PROFILE §6 judges the 409 before recomputing the id, so the expected
    answer is ERROR 409, not a violation.
    """
    out = copy.deepcopy(record)
    out["core"]["object"] = record["core"]["object"] + " (overwritten)"
    out["integrity"]["checksum"] = checksum_for(out["core"], out["meta"])
    return out


def with_wrong_id(record: dict[str, Any]) -> dict[str, Any]:
    """T1-08 step 2: the last hex digit of knowledge_id changed, everything else intact."""
    out = copy.deepcopy(record)
    kid: str = out["knowledge_id"]
    out["knowledge_id"] = kid[:-1] + ("0" if kid[-1] != "0" else "1")
    return out


def make_record(
    scope: str,
    created_by: str,
    *,
    subject: str,
    obj: str,
    kind: KnowledgeType = KnowledgeType.FACT,
    confidence: float = 0.9,
    created_at: str | None = None,
    decay: DecayModel | None = None,
    supersedes: str | None = None,
    caused_by: tuple[str, ...] | None = None,
    distribution: Distribution | None = None,
    predicate: Predicate = Predicate.REQUIRES,
) -> dict[str, Any]:
    """A sealed record with exactly the fields a Level-2/3 procedure plants.

    The caller puts a random token in ``subject`` or ``obj`` when the record must be new
    to the node (see :func:`fresh_record`)."""
    core = Core(subject=subject, predicate=predicate, object=obj, confidence=confidence,
                sample_size=12 if kind is KnowledgeType.PATTERN else None)
    meta = Meta(created_at=created_at or utc_now(), created_by=created_by,
                project_scope=(scope,), decay_model=decay)
    causal = None
    if supersedes is not None or caused_by is not None:
        causal = Causal(caused_by=caused_by, supersedes=supersedes)
    record = build_record(type=kind, core=core, meta=meta, causal=causal)
    if distribution is not None:
        record = seal(replace(record, distribution=distribution))
    return record.to_dict()
