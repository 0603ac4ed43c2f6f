"""What the lexical and vector indexes see of a record, and re-embedding a whole store."""

from __future__ import annotations

from typing import TYPE_CHECKING

from amcp.amf.record import AMFRecord
from amcp.store.base import Store, vectors_of

if TYPE_CHECKING:
    from amcp.retrieval.embedders import Embedder


def index_text(record: AMFRecord, sensitive: bool) -> str:
    """Lexical text of the record itself: statement, subject words and tags.

    A sensitive record is indexed by its subject, tags and kind only — never its content,
    which must not be findable (or leak through snippets) without being revealed.
    """
    parts = [record.core.subject.replace(".", " "), *record.tags]
    if not sensitive:
        parts.insert(0, record.text)
    elif record.kind:
        parts.append(record.kind)
    return " ".join(parts)


def index_context(record: AMFRecord, sensitive: bool) -> str:
    """Lexical text of the record's surroundings (``annotation.context_hint``), indexed in
    its own column so a search can weigh it below the record's own words."""
    if sensitive or record.annotation is None or not record.annotation.context_hint:
        return ""
    return record.annotation.context_hint


def embed_text(record: AMFRecord, sensitive: bool) -> str:
    """Vector text: the statement plus its context hint (what the turn needs to stand alone)."""
    if sensitive:
        return index_text(record, True)
    text = record.text
    if record.annotation and record.annotation.context_hint:
        text = f"{text}\n{record.annotation.context_hint}"
    return text


def reindex(store: Store, embedder: Embedder | None, batch: int = 256) -> int:
    """Replace every vector with ``embedder``'s; the caller holds the transaction."""
    vectors = vectors_of(store)
    vectors.clear_vectors()
    if embedder is None:
        store.set_meta("embedding_model", "")
        return 0
    pending: list[tuple[str, str]] = []
    for kid, _terms in vectors.iter_index_texts():
        item = store.get(kid)
        if item is not None and item.record is not None:
            pending.append((kid, embed_text(item.record, item.state.sensitive)))
    for start in range(0, len(pending), batch):
        chunk = pending[start : start + batch]
        for (kid, _t), vec in zip(chunk, embedder.embed([t for _k, t in chunk]), strict=True):
            vectors.set_vector(kid, vec)
    store.set_meta("embedding_model", embedder.model_id)
    store.set_meta("embedding_dim", str(embedder.dim))
    return len(pending)
