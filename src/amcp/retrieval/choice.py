"""Which embedder a store is opened with, checked against the model its vectors came from.

A store records the embedding model and dimension of its vectors (``store_meta``). Opening
it with another model would rank garbage silently, so a mismatch is an error naming the fix
(``amcp reindex``); ``auto`` and an unpinned ``minilm`` follow what the store was indexed
with. Nothing here imports numpy or a model until an embedder is actually built.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from amcp.errors import EmbeddingMismatchError

if TYPE_CHECKING:
    from amcp.retrieval.embedders import Embedder
    from amcp.store.base import Store


def resolve_embedder(store: Store, choice: str | Embedder | None) -> Embedder | None:
    """The embedder for ``store`` given the caller's ``choice`` (a name, an instance,
    ``"auto"``, or None / ``"none"`` for lexical only); records the model on a new store."""
    recorded = store.get_meta("embedding_model")
    if choice is None or choice == "none":
        if recorded:
            raise EmbeddingMismatchError(
                f"this store's vectors come from {recorded}; open it with that embedder "
                "or run `amcp reindex --embedder none`"
            )
        return None
    if isinstance(choice, str):
        from amcp.retrieval.embedders import MINILM_NAMES, get_embedder

        if choice == "auto" and recorded and recorded.startswith("hashing-"):
            choice = "hashing"
        elif recorded and recorded.lower() in MINILM_NAMES and _unpinned_minilm(choice):
            # "auto"/"minilm" reopen a MiniLM store in the precision it was indexed
            # with: one made with minilm-int8 stays int8 without naming it each time.
            choice = recorded
        embedder = get_embedder(choice)
    else:
        embedder = choice
    if recorded is None:
        # Both in one transaction, and only if no other process recorded a model first:
        # a second process creating the store must never read the model without its dim.
        with store.atomic():
            recorded = store.get_meta("embedding_model")
            if recorded is None:
                store.set_meta("embedding_model", embedder.model_id)
                store.set_meta("embedding_dim", str(embedder.dim))
                return embedder
    if recorded != embedder.model_id or store.get_meta("embedding_dim") != str(embedder.dim):
        raise EmbeddingMismatchError(
            f"this store was indexed with {recorded} "
            f"(dim {store.get_meta('embedding_dim')}) but the embedder is "
            f"{embedder.model_id} (dim {embedder.dim}); run `amcp reindex` to re-embed it"
        )
    return embedder


def _unpinned_minilm(choice: str) -> bool:
    """``auto`` or a MiniLM name that leaves the precision open (``minilm``)."""
    from amcp.retrieval.embedders import MINILM_NAMES

    key = choice.strip().lower()
    return key in ("auto", "default", "") or (key in MINILM_NAMES and MINILM_NAMES[key] is None)


__all__ = ["resolve_embedder"]
