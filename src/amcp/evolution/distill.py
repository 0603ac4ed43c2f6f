"""Distillation: many related records → one principle that cites them (upstream DISTILL).

``amcp.amql.distill.distill(memory, "RECALL …")`` selects records with the RECALL and drops
those below the confidence threshold; ``distill_records`` (here) groups related ones (same
subject namespace, then embedding similarity) and writes one record of type ``into`` for
the largest group, with ``causal.caused_by`` naming every record of that group. What the
principle *says* comes from a pluggable :class:`Distiller`: the deterministic
:class:`RuleDistiller` by default, or an :class:`OpenAIDistiller` that asks a
chat-completions model.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol

import httpx
import numpy as np

from amcp.amf.record import AMFRecord
from amcp.amf.types import KnowledgeType, Predicate
from amcp.errors import AmcpError, NotFoundError, Status

if TYPE_CHECKING:
    from amcp.memory_writes import WriteOutcome
    from amcp.ports import MemoryWriter

# Cosine to a group's centroid above which a record joins the group. Hashing embeddings of
# related sentences sit around 0.3-0.6, MiniLM's around 0.5-0.8; 0.35 groups both sensibly.
GROUP_SIMILARITY = 0.35
MAX_SOURCES = 1024  # causal.caused_by holds at most this many ids (AMF MAX_LIST)
DISTILLED_TAG = "distilled"


@dataclass(frozen=True, slots=True)
class Principle:
    """What a distiller concludes from a group of records."""

    subject: str
    statement: str
    confidence: float
    predicate: Predicate = Predicate.IMPLIES
    object: str | None = None  # defaults to the statement


class Distiller(Protocol):
    def distill(self, group: Sequence[AMFRecord], *, into: KnowledgeType) -> Principle: ...


def namespace(subject: str) -> str:
    """The first segment of a dotted AMF subject (``OKX.API.TP_SL`` → ``OKX``)."""
    return subject.split(".", 1)[0]


def _unit(mat: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(mat, axis=1, keepdims=True)
    return np.asarray(mat / np.where(norms == 0, 1.0, norms), dtype=np.float32)


@dataclass(frozen=True, slots=True)
class RuleDistiller:
    """Deterministic: the group's most common namespace, its most central statement, and
    confidence = mean confidence × agreement (mean cosine of members to the centroid)."""

    vectors: np.ndarray | None = None  # unit rows aligned with the group; None: no embedder

    def distill(self, group: Sequence[AMFRecord], *, into: KnowledgeType) -> Principle:
        ns = Counter(namespace(r.core.subject) for r in group).most_common(1)[0][0]
        mean_conf = sum(r.core.confidence for r in group) / len(group)
        if self.vectors is None or len(group) == 1:
            best, agreement = max(group, key=lambda r: (r.core.confidence, r.knowledge_id)), 1.0
        else:
            centroid = self.vectors.mean(axis=0)
            centroid /= max(float(np.linalg.norm(centroid)), 1e-12)
            sims = self.vectors @ centroid
            order = sorted(range(len(group)), key=lambda i: (-float(sims[i]),
                                                             group[i].knowledge_id))
            best = group[order[0]]
            agreement = float(np.clip(sims.mean(), 0.0, 1.0))
        return Principle(
            subject=f"{ns}.Principle.{_slug(best.core.subject)}",
            statement=best.text,
            confidence=round(max(0.0, min(1.0, mean_conf * agreement)), 4),
            object=best.core.object,
        )


def _slug(subject: str) -> str:
    tail = subject.rsplit(".", maxsplit=1)[-1]
    return "".join(c if c.isalnum() or c == "_" else "_" for c in tail)[:64] or "general"


class OpenAIDistiller:
    """Asks an OpenAI-compatible chat-completions endpoint for the principle, as JSON."""

    SYSTEM = (
        "You distil several related knowledge records into one general principle. Answer "
        "with one JSON object only: {\"subject\": \"Namespace.Entity.Attribute\", "
        "\"statement\": \"the principle in one sentence\", \"confidence\": 0.0-1.0}."
    )

    def __init__(self, base_url: str, model: str, api_key: str | None = None, *,
                 timeout_s: float = 60.0, client: httpx.Client | None = None) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = client or httpx.Client(timeout=timeout_s, headers=headers)

    def close(self) -> None:
        self._client.close()

    def distill(self, group: Sequence[AMFRecord], *, into: KnowledgeType) -> Principle:
        lines = [f"- [{r.type.value}, confidence {r.core.confidence:.2f}] {r.core.subject}: "
                 f"{r.text}" for r in group]
        payload = {
            "model": self.model,
            "temperature": 0,
            "messages": [
                {"role": "system", "content": self.SYSTEM},
                {"role": "user", "content": f"Target type: {into.value}\nRecords:\n"
                 + "\n".join(lines)},
            ],
        }
        try:
            resp = self._client.post(self.url, json=payload)
        except httpx.HTTPError as exc:
            raise AmcpError(f"distiller request failed: {exc}", status=Status.UNAVAILABLE) from exc
        if resp.status_code != 200:
            raise AmcpError(f"distiller answered HTTP {resp.status_code}: {resp.text[:200]}",
                            status=Status.UNAVAILABLE)
        return _parse_answer(resp, group)


def _parse_answer(resp: httpx.Response, group: Sequence[AMFRecord]) -> Principle:
    try:
        content = resp.json()["choices"][0]["message"]["content"]
        text = str(content).strip()
        if text.startswith("```"):  # models like to fence JSON
            text = text.strip("`").removeprefix("json").strip()
        answer: Any = json.loads(text)
        subject, statement = str(answer["subject"]), str(answer["statement"])
        confidence = float(answer["confidence"])
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise AmcpError(f"distiller answer is not the expected JSON: {exc}",
                        status=Status.UNAVAILABLE) from exc
    if not subject.strip() or not statement.strip() or not math.isfinite(confidence):
        raise AmcpError("distiller answer has an empty subject/statement or bad confidence",
                        status=Status.UNAVAILABLE)
    # Never more sure than the evidence: cap at the best source's confidence.
    cap = max(r.core.confidence for r in group)
    return Principle(subject=subject.strip(), statement=statement.strip(),
                     confidence=round(max(0.0, min(confidence, cap)), 4))


def group_related(records: Sequence[AMFRecord], vectors: np.ndarray | None,
                  similarity: float = GROUP_SIMILARITY) -> list[list[int]]:
    """Indexes of related records: by namespace, then greedy centroid similarity.

    Deterministic: records are visited by (confidence desc, knowledge_id)."""
    order = sorted(range(len(records)),
                   key=lambda i: (-records[i].core.confidence, records[i].knowledge_id))
    groups: list[list[int]] = []
    sums: list[np.ndarray] = []
    spaces: list[str] = []
    for i in order:
        ns = namespace(records[i].core.subject)
        placed = False
        for g, members in enumerate(groups):
            if spaces[g] != ns:
                continue
            if vectors is not None:
                centroid = sums[g] / max(float(np.linalg.norm(sums[g])), 1e-12)
                if float(vectors[i] @ centroid) < similarity:
                    continue
            members.append(i)
            if vectors is not None:
                sums[g] = sums[g] + vectors[i]
            placed = True
            break
        if not placed:
            groups.append([i])
            spaces.append(ns)
            sums.append(vectors[i].copy() if vectors is not None else np.zeros(1))
    # Largest first; ties by the first member's (already deterministic) position.
    return sorted(groups, key=lambda g: -len(g))


def distill_records(
    memory: MemoryWriter,
    records: Sequence[AMFRecord],
    *,
    into: KnowledgeType = KnowledgeType.PRINCIPLE,
    distiller: Distiller | None = None,
    similarity: float = GROUP_SIMILARITY,
    check_scope: Callable[[list[str]], None] | None = None,
) -> WriteOutcome:
    """Write one ``into`` record distilled from the largest related group of ``records``
    (already selected: ``amcp.amql.distill`` runs the RECALL). ``check_scope`` is the
    caller's policy for the principle's scope; it raises to refuse the write."""
    if not records:
        raise NotFoundError("nothing to distill")
    vectors = None
    if memory.embedder is not None:
        vectors = _unit(np.asarray(memory.embedder.embed([r.text for r in records])))
    best = group_related(records, vectors, similarity)[0][:MAX_SOURCES]
    group = [records[i] for i in best]
    chosen = RuleDistiller(vectors[best] if vectors is not None else None)
    principle = (distiller or chosen).distill(group, into=into)
    wall = memory.firewall
    if wall is not None:
        # The principle is this node's own record: never more sure than its sources' trusted
        # confidence (docs/firewall.md), so distilling unverified records launders nothing.
        cap = max(wall.trust(r).confidence(r.core.confidence) for r in group)
        principle = replace(principle, confidence=round(min(principle.confidence, cap), 4))
    scope = sorted({s for r in group for s in r.meta.project_scope})
    if len(scope) > 1 and "*" in scope:
        scope.remove("*")  # a principle drawn partly from a project belongs to that project
    if check_scope is not None:
        check_scope(scope)
    return memory.remember(
        principle.statement,
        type=into,
        scope=scope,
        subject=principle.subject,
        predicate=principle.predicate,
        object=principle.object or principle.statement,
        confidence=principle.confidence,
        caused_by=[r.knowledge_id for r in group],
        sample_size=len(group) if into is KnowledgeType.PATTERN else None,
        tags=[DISTILLED_TAG],
    )
