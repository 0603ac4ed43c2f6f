"""Where a hook gets its memories: a running node, or the SQLite store opened directly.

Hooks run on every prompt, so neither path may load an embedding model:

* **node** — found by its runtime file, the node's HTTP hook routes
  (``nodehttp.HttpBackend``: stateless requests, no AMCP client); without a runtime file,
  a short TCP probe of the node's port and the AMCP client (``NodeBackend``). Either way
  the node holds the model.
* **file, reads** (session start, prompt) — ``FastBackend``: ``amcp.store.fastread`` opens
  the file read-only with stdlib ``sqlite3`` and answers from narrow indexed queries
  (pointer tier ordered and limited in SQL, FTS5 lexical recall); no ``Memory``, no record
  classes, no numpy, no cryptography unless a sensitive record is shown.
* **file, writes** (a commit, a learning, a prompt capture) — ``LocalBackend``: ``Memory``
  without an embedder (so no numpy, no vector index load) and a short lock timeout; the
  write is composed, signed, chained and witnessed like every other write. Records it writes
  have no vector until ``amcp reindex`` (lexical recall finds them meanwhile); the background
  prompt capture, which nobody waits for, still embeds into a hashing store.

Nothing here imports torch, onnxruntime or fastapi; ``amcp.node`` is imported only when a
node answers the probe.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, NamedTuple

from amcp.errors import AmcpError

if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any, Protocol

    StrPath = str | os.PathLike[str]

    from amcp.amf.record import AMFRecord
    from amcp.firewall.trust import Trust
    from amcp.memory import Memory
    from amcp.node.client import SyncClient
    from amcp.store.fastread import FastReader, FastRecord

NODE_PORT = 7707  # amcp.node.DEFAULT_PORT, repeated so the probe needs no amcp.node import
POINTER_ID_CHARS = 14  # as amcp.cse.tiers: "K-" + 12 hex
# Every AMCP session starts with a cold boot; the CSE refuses budgets whose 1% RESERVED zone
# cannot hold the 22-token header, so this is the cheapest boot a node accepts.
MIN_BOOT_BUDGET = 2200


class NoStore(AmcpError):
    """The store file does not exist yet (``amcp init`` has not run)."""


# Value types here are NamedTuples, not frozen dataclasses: ``import dataclasses`` loads
# ``inspect`` and each class costs generated code, ~10-20 ms per hook process in all.


class MemoryLine(NamedTuple):
    """One memory as a hook shows it."""

    knowledge_id: str
    type: str
    scope: str
    weight: float
    text: str
    kind: str | None = None
    # Origin and verification as the memory firewall labels them ("from a web page or
    # document, unverified"); the text is already the firewall's view (instructions withheld).
    label: str = ""

    def pointer(self, limit: int = 80) -> str:
        return (
            f"{self.knowledge_id[:POINTER_ID_CHARS]} "
            f"[{self.type} · {self.scope} · {self.weight:.2f}] {one_line(self.text, limit)}"
            + self._from()
        )

    def summary(self, limit: int = 200) -> str:
        return f"{self.knowledge_id[:POINTER_ID_CHARS]} [{self.type} · {self.scope}] " + (
            one_line(self.text, limit)
        ) + self._from()

    def _from(self) -> str:
        return f" ({self.label})" if self.label else ""


class NewMemory(NamedTuple):
    """A write a hook makes (a work boundary, a learning, a capture)."""

    text: str
    type: str
    scope: str
    kind: str
    tags: tuple[str, ...] = ()
    session: str | None = None
    subject: str | None = None
    predicate: str = "EQUALS"
    object: str | None = None
    confidence: float = 0.8
    extensions: Mapping[str, Any] | None = None
    sensitive: bool = False


if TYPE_CHECKING:  # a Protocol class needs typing at run time; only checkers need it
    class Backend(Protocol):
        name: str

        def pointers(self, scopes: Sequence[str], limit: int,
                     kinds: Sequence[str] | None = None) -> list[MemoryLine]: ...
        def recall(self, query: str, scopes: Sequence[str], k: int) -> list[MemoryLine]: ...
        def user_scopes(self) -> tuple[str, ...]: ...
        def remember(self, item: NewMemory) -> str: ...
        def has_text(self, text: str, scopes: Sequence[str]) -> bool: ...
        def warnings(self) -> tuple[str, ...]: ...
        def close(self) -> None: ...


def one_line(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def node_listening(host: str, port: int, timeout: float) -> bool:
    """A bare TCP connect: refused in well under a millisecond when no node runs.

    ``_socket`` (the C module) rather than ``socket``: the wrapper's enum setup costs a hook
    ~10 ms, and a probe needs none of it."""
    import _socket

    try:
        infos = _socket.getaddrinfo(host, port, 0, _socket.SOCK_STREAM)
    except OSError:
        return False
    for family, kind, proto, _name, addr in infos:
        sock = _socket.socket(family, kind, proto)
        try:
            sock.settimeout(timeout)
            sock.connect(addr)
            return True
        except OSError:
            continue
        finally:
            sock.close()
    return False


# ---------------------------------------------------------------------------- local


class LocalBackend:
    name = "local"

    def __init__(self, memory: Memory) -> None:
        self.memory = memory

    @classmethod
    def open(cls, path: StrPath, *, lock_timeout: float = 0.25, verify: bool = True,
             vectors: bool = False) -> LocalBackend:
        """``Memory`` for a hook's writes (and for readers of a store ``FastBackend`` cannot
        read). ``verify=False`` skips the change-log walk on open (O(records): ~0.7 s at
        10k); every record read is still checked against its checksum when decoded.
        ``vectors=True`` embeds what it writes into a hashing store (a pure function, but
        numpy costs more to import than a hook may spend); otherwise writes are lexical-only
        until ``amcp reindex``, as in a MiniLM store."""
        from pathlib import Path  # the write path: Memory imports it anyway

        path = Path(path)
        if not path.exists():
            raise NoStore(f"no store at {path}; run `amcp init` first")
        from amcp.keyring import Keyring
        from amcp.memory import Memory
        from amcp.retrieval.search import HybridSearcher
        from amcp.store.sqlite import SQLiteStore

        store = SQLiteStore(path, Keyring(path.parent / "keys"), lock_timeout_s=lock_timeout,
                            verify_on_open=verify)
        try:
            recorded = store.get_meta("embedding_model") or ""
            hashing = vectors and recorded.startswith("hashing-")
            memory = Memory(
                path,
                embedder="hashing" if hashing else None,
                check_embedder=hashing,
                store=store,
            )
            # Reads are lexical-only whatever the store: loading every vector into an index
            # costs more (~150 ms at 10k records) than a hook may spend on the whole prompt.
            memory.searcher = HybridSearcher(store, None)
        except BaseException:
            store.close()
            raise
        return cls(memory)

    def _lines(self, items: Sequence[Any]) -> list[MemoryLine]:
        wall = self.memory.firewall
        return [line_of(i.record, i.state.weight, wall.trust(i.record) if wall else None)
                for i in items if i.record is not None]

    def pointers(self, scopes: Sequence[str], limit: int,
                 kinds: Sequence[str] | None = None) -> list[MemoryLine]:
        from amcp.store.base import RecordFilter

        if not scopes:
            return []
        flt = RecordFilter(scopes=tuple(scopes), kinds=tuple(kinds) if kinds else None)
        # Sensitive records stay out of the pointer tier: even redacted, a line announcing
        # "User's AWS key: AKIA…" in every session start is more than the task needs.
        rows = [r for r in self.memory.store.states(flt, limit=limit * 2, ranked=True)
                if not r.state.sensitive][:limit]
        if not rows:
            return []
        found = self.memory.list_records(
            RecordFilter(ids=tuple(r.knowledge_id for r in rows)), limit=len(rows)
        )
        order = {r.knowledge_id: n for n, r in enumerate(rows)}
        return self._lines(sorted(found, key=lambda f: order.get(f.knowledge_id, 0)))

    def recall(self, query: str, scopes: Sequence[str], k: int) -> list[MemoryLine]:
        if not query.strip():
            return []
        # touch=False: a read-only hook must not need the write lock (another writer may
        # hold it) and should not count as the agent having used the memory.
        res = self.memory.recall(query, k=k, scope=list(scopes) or None, touch=False)
        return self._lines([h.item for h in res.hits])

    def user_scopes(self) -> tuple[str, ...]:
        scopes = self.memory.stats().scopes
        return tuple(sorted(s for s in scopes if s.startswith("user:")))

    def remember(self, item: NewMemory) -> str:
        out = self.memory.remember(item.text, sensitive=item.sensitive, **write_fields(item))
        return out.knowledge_id

    def has_text(self, text: str, scopes: Sequence[str]) -> bool:
        return has_same_text(self.memory, text, scopes)

    def warnings(self) -> tuple[str, ...]:
        return self.memory.warnings()

    def close(self) -> None:
        self.memory.close()


def has_same_text(memory: Memory, text: str, scopes: Sequence[str]) -> bool:
    """The store already holds an active record saying ``text`` (normalised)."""
    want = _norm(text)
    if not want:
        return False
    try:
        res = memory.recall(text, k=5, scope=list(scopes) or None, touch=False)
    except AmcpError:
        return False
    return any(
        h.item.record is not None and _norm(h.item.record.text) == want for h in res.hits
    )


def _norm(text: str) -> str:
    return " ".join("".join(c for c in text.casefold() if c.isalnum() or c.isspace()).split())


def write_fields(item: NewMemory) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "type": item.type, "scope": item.scope, "kind": item.kind,
        "tags": list(item.tags) or None, "session": item.session,
        "predicate": item.predicate, "confidence": item.confidence,
        "extensions": dict(item.extensions) if item.extensions else None,
    }
    if item.subject:
        fields["subject"] = item.subject
    if item.object is not None:
        fields["object"] = item.object
    return fields


def line_of(record: AMFRecord, weight: float, trust: Trust | None = None) -> MemoryLine:
    from amcp.firewall.labels import shown

    return MemoryLine(
        knowledge_id=record.knowledge_id,
        type=record.type.value,
        scope=record.meta.project_scope[0],
        weight=weight,
        text=shown(record.text, trust) if trust is not None else record.text,
        kind=record.kind,
        label=trust.label() if trust is not None else "",
    )


class FastBackend:
    """Read-only hooks without a node: ``amcp.store.fastread`` over the file (see there for
    what each read verifies and what it skips)."""

    name = "fast"

    def __init__(self, reader: FastReader) -> None:
        self.reader = reader

    @classmethod
    def open(cls, path: StrPath, *, lock_timeout: float = 0.25) -> FastBackend:
        """Raises ``NoStore`` when there is no file, ``StaleStore`` when it needs a
        migration (the caller then uses ``LocalBackend``, which migrates)."""
        from amcp.store.fastread import FastReader

        if not os.path.exists(path):
            raise NoStore(f"no store at {os.fspath(path)}; run `amcp init` first")
        return cls(FastReader(path, timeout_s=lock_timeout))

    def pointers(self, scopes: Sequence[str], limit: int,
                 kinds: Sequence[str] | None = None) -> list[MemoryLine]:
        # Sensitive records stay out of the pointer tier (the SQL leaves them out).
        return [_fast_line(r) for r in self.reader.ranked(scopes, limit, kinds=kinds)]

    def recall(self, query: str, scopes: Sequence[str], k: int) -> list[MemoryLine]:
        if not query.strip():
            return []
        from amcp.retrieval.fastsearch import fast_search

        return [_fast_line(r) for r in fast_search(self.reader, query, scopes, k)]

    def user_scopes(self) -> tuple[str, ...]:
        return self.reader.scopes_with_prefix("user:")

    def remember(self, item: NewMemory) -> str:
        raise AmcpError("the read-only fast path does not write")

    def has_text(self, text: str, scopes: Sequence[str]) -> bool:
        want = _norm(text)
        return bool(want) and any(_norm(line.text) == want
                                  for line in self.recall(text, scopes, 5))

    def warnings(self) -> tuple[str, ...]:
        left_out = len(self.reader.quarantined())
        from amcp.store.rowseal import left_out_warning  # fastread has loaded it already

        return (left_out_warning(left_out),) if left_out else ()

    def close(self) -> None:
        self.reader.close()


def _fast_line(rec: FastRecord) -> MemoryLine:
    from amcp.firewall.labels import shown, trust_of

    trust = trust_of(rec.claim, rec.text, local=rec.local)
    return MemoryLine(rec.knowledge_id, rec.type, rec.scope, rec.weight, shown(rec.text, trust),
                      rec.kind, trust.label() if trust else "")


# ---------------------------------------------------------------------------- node


class NodeBackend:
    name = "node"

    def __init__(self, client: SyncClient) -> None:
        self.client = client
        self._warnings: tuple[str, ...] = ()

    @classmethod
    def connect(
        cls, host: str, port: int, *, timeout: float, scopes: Sequence[str] = (),
        task: str = "coding-agent hook", budget_tokens: int = MIN_BOOT_BUDGET,
    ) -> NodeBackend:
        from amcp.node.client import RetryPolicy, SyncClient

        retry = RetryPolicy(connect_timeout=timeout, request_timeout=max(2.0, timeout * 4),
                            ack_timeout=max(2.0, timeout * 4), backoff=())
        options: dict[str, Any] = {
            "retry": retry, "task": task, "budget_tokens": max(budget_tokens, MIN_BOOT_BUDGET),
        }
        if scopes:
            options["project_scope"] = list(scopes)
        return cls(SyncClient.connect(host, port, **options))

    def pointers(self, scopes: Sequence[str], limit: int,
                 kinds: Sequence[str] | None = None) -> list[MemoryLine]:
        del kinds  # the node's pack already chose the records for the boot's scopes
        # The connection's cold boot already built the pack for these scopes.
        pack = (self.client.client.boot or {}).get("pack") or {}
        lines = []
        for it in pack.get("items") or ():
            if isinstance(it, Mapping) and isinstance(it.get("pointer"), str):
                lines.append(_pointer_line(it))
        return lines[:limit]

    def recall(self, query: str, scopes: Sequence[str], k: int) -> list[MemoryLine]:
        filters = {"scopes": list(scopes)} if scopes else None
        res = self.client.recall(query, k=k, filters=filters)
        said = res.payload.get("warnings")  # the node's quarantine figure, when it has one
        if isinstance(said, list):
            self._warnings = tuple(str(w) for w in said)
        return [line for amf in res.records if (line := _amf_line(amf)) is not None]

    def user_scopes(self) -> tuple[str, ...]:
        return ()  # the node's cold boot decides which scopes this peer may read

    def remember(self, item: NewMemory) -> str:
        from amcp.amf.compose import compose_record

        record = compose_record(item.text, **write_fields(item))
        ack = self.client.write(record.to_dict())
        return ack.knowledge_id or record.knowledge_id

    def has_text(self, text: str, scopes: Sequence[str]) -> bool:
        want = _norm(text)
        return any(_norm(line.text) == want for line in self.recall(text, scopes, 5))

    def warnings(self) -> tuple[str, ...]:
        return self._warnings

    def close(self) -> None:
        self.client.close()


def _pointer_line(item: Mapping[str, Any]) -> MemoryLine:
    """A pack item carries a ready pointer ``K-… [type · scope · weight] text``."""
    pointer = str(item["pointer"])
    head, _, rest = pointer.partition(" [")
    meta, _, text = rest.partition("] ")
    parts = [p.strip() for p in meta.split("·")]
    try:
        weight = float(parts[2]) if len(parts) > 2 else 0.5
    except ValueError:
        weight = 0.5
    return MemoryLine(
        knowledge_id=str(item.get("knowledge_id") or head),
        type=parts[0] if parts else "?",
        scope=parts[1] if len(parts) > 1 else "*",
        weight=weight,
        text=text or pointer,
    )


def _amf_line(amf: Mapping[str, Any]) -> MemoryLine | None:
    from amcp.amf.mapping import text_of

    kid = amf.get("knowledge_id")
    if not isinstance(kid, str):
        return None
    meta = amf.get("meta") or {}
    ext = amf.get("vendor_extensions") or {}
    scopes = meta.get("project_scope") if isinstance(meta, Mapping) else None
    state = ext.get("x-state") if isinstance(ext, Mapping) else None
    weight = state.get("weight", 0.5) if isinstance(state, Mapping) else 0.5
    from amcp.firewall.labels import claim_in, shown, trust_of

    text = text_of(amf)

    # The node already left out drafts and withheld instructions in its answer; the label
    # is read from the record's claim (the node cannot be asked which key signed it here).
    trust = trust_of(claim_in(amf), text, local=None)
    return MemoryLine(
        knowledge_id=kid,
        type=str(amf.get("type", "?")),
        scope=str(scopes[0]) if isinstance(scopes, list) and scopes else "*",
        weight=float(weight) if isinstance(weight, int | float) else 0.5,
        text=shown(text, trust),
        kind=ext.get("x-kind") if isinstance(ext, Mapping) else None,
        label=trust.label() if trust else "",
    )


__all__ = [
    "NODE_PORT",
    "FastBackend",
    "LocalBackend",
    "MemoryLine",
    "NewMemory",
    "NoStore",
    "NodeBackend",
    "has_same_text",
    "line_of",
    "node_listening",
    "one_line",
    "write_fields",
]
