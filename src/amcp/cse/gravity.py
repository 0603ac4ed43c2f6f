"""Knowledge gravity: clusters of related knowledge that load together.

Cluster identity is the *subject namespace*: the record's ``core.subject`` without its last
dotted segment (``okx.tpsl.attach_algo`` → ``okx.tpsl``; a subject without dots is its own
namespace). The id is ``C-`` + that namespace, percent-quoted so it is one token:
``C-okx.tpsl``. We chose this over a clustering of embeddings because it is **stable under
additions** — a record's cluster is a function of its own immutable content, so adding,
superseding or syncing other records never renames or splits an existing cluster, and two
nodes holding the same record agree on its cluster without exchanging anything. Updates keep
their cluster because ``Memory.supersede`` inherits the subject.

The other two kinds of relation pull in neighbours at pack time:

- causal links — a record's ``causal.caused_by`` predecessors;
- embeddings — ``centroid_match`` scores text against a cluster's centroid (the mean of its
  members' unit vectors; the score is the mean cosine of the text to the members).

Left out (documented in docs/cse.md): splitting a large namespace by embedding similarity.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING
from urllib.parse import quote, unquote

import numpy as np

from amcp.errors import ValidationError
from amcp.store.base import RecordFilter

if TYPE_CHECKING:
    from amcp.amf.record import AMFRecord
    from amcp.ports import MemoryReader

PREFIX = "C-"
MAX_MEMBERS = 2000  # centroid over at most this many members: a cluster, not the store


def namespace(subject: str) -> str:
    return subject.rsplit(".", 1)[0] if "." in subject else subject


def cluster_id_for(subject: str) -> str:
    return PREFIX + quote(namespace(subject), safe="._-~")


def namespace_of(cluster_id: str) -> str:
    if not isinstance(cluster_id, str) or not cluster_id.startswith(PREFIX) or len(cluster_id) < 3:
        raise ValidationError("cluster_id", f"{cluster_id!r} is not a cluster id (C-…)")
    return unquote(cluster_id[len(PREFIX):])


def cluster_of(memory: MemoryReader, knowledge_id: str) -> str:
    """The stable cluster id of a stored record (404 unknown, 410 purged)."""
    record = memory.get(knowledge_id).record
    assert record is not None  # Memory.get raises GoneError for tombstones
    return cluster_id_for(record.core.subject)


def is_member(record: AMFRecord, ns: str) -> bool:
    return namespace(record.core.subject) == ns


def member_filter(ns: str, base: RecordFilter | None = None) -> RecordFilter:
    """Records whose subject starts with the namespace (callers check exact membership)."""
    b = base or RecordFilter()
    return RecordFilter(
        scopes=b.scopes, lifecycles=b.lifecycles, subject_prefix=ns + ".", now=b.now,
        include_expired=b.include_expired,
    )


def centroid_match(memory: MemoryReader, cluster_id: str, text: str) -> float:
    """How well ``text`` matches the cluster: mean cosine to its members, in [-1, 1].

    0.0 when the store has no embedder or the cluster no embedded members.
    """
    ns = namespace_of(cluster_id)
    if not isinstance(text, str) or not text.strip():
        raise ValidationError("text", "must be non-empty text")
    if memory.embedder is None:
        return 0.0
    flt = member_filter(ns)
    size = min(memory.store.count(flt), MAX_MEMBERS)
    if size == 0:
        return 0.0
    from amcp.cse.cache import load  # lazily: the cache imports the evolution layer

    query = memory.embedder.embed_query(text)
    hits = memory.searcher.vector_search(query, flt, size)
    # Subjects from the verified stored bytes (amcp.cse.entry): a cluster can hold
    # thousands of members, and building each record costs ~10x more.
    found = load(memory.store, [k for k, _ in hits], time.time())
    members = {k for k, (_state, e) in found.items() if namespace(e.subject) == ns}
    scores = [s for k, s in hits if k in members]
    return round(float(np.mean(scores)), 9) if scores else 0.0


def causes(records: Sequence[AMFRecord]) -> list[str]:
    """The causal predecessors of ``records``, in order, without repeats."""
    out: dict[str, None] = {}
    for r in records:
        for kid in (r.causal.caused_by or ()) if r.causal else ():
            out.setdefault(kid)
    return list(out)


__all__ = [
    "PREFIX", "causes", "centroid_match", "cluster_id_for", "cluster_of", "is_member",
    "member_filter", "namespace", "namespace_of",
]
