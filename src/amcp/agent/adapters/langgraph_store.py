"""A LangGraph ``BaseStore`` over ``Memory``: LangGraph apps keep their long-term memory
in an amcp store (synced, audited, exportable like any other record).

Mapping:

* namespace ``("users", "alice")`` ↔ scope ``lg:users.alice`` (LangGraph forbids ``.`` in
  labels, so the join is reversible);
* item ↔ one active record: subject ``lg ["users","alice","<key>"]`` (exact-match filter
  for ``get``), tag ``langgraph``, ``x-kind`` ``langgraph_item``; the JSON value is kept
  losslessly as a JSON string in ``vendor_extensions["x-lg-value"]`` and its text (the
  fields named by ``index``, else every string leaf) is the record's text, so recall
  indexes it;
* a put over an existing key supersedes the old record (history kept); ``delete``
  invalidates it (AMF never deletes);
* ``created_at`` is carried from the first version in ``x-lg-created``; ``updated_at`` is
  the current record's ``created_at``.

Search with a query uses the store's hybrid recall; without one it lists by recency.
``filter`` supports equality and ``$eq $ne $gt $gte $lt $lte`` on top-level value keys,
applied after retrieval (up to ``SCAN_LIMIT`` candidates). TTLs are not supported.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from amcp.amf.timefmt import parse_ts
from amcp.store.base import RecordFilter

if TYPE_CHECKING:
    from amcp.amf.record import AMFRecord
    from amcp.memory import Memory
    from amcp.store.base import StoredRecord

TAG = "langgraph"
KIND = "langgraph_item"
SCOPE_PREFIX = "lg:"
SCAN_LIMIT = 1000  # candidates examined per search/list: filters apply after retrieval
_OPS = {
    "$eq": lambda a, b: a == b,
    "$ne": lambda a, b: a != b,
    "$gt": lambda a, b: a > b,
    "$gte": lambda a, b: a >= b,
    "$lt": lambda a, b: a < b,
    "$lte": lambda a, b: a <= b,
}


def scope_of(namespace: Sequence[str]) -> str:
    return SCOPE_PREFIX + ".".join(namespace)


def namespace_of(scope: str) -> tuple[str, ...] | None:
    if not scope.startswith(SCOPE_PREFIX):
        return None
    return tuple(scope[len(SCOPE_PREFIX):].split("."))


def subject_of(namespace: Sequence[str], key: str) -> str:
    return "lg " + json.dumps([*namespace, key], ensure_ascii=False, separators=(",", ":"))


def text_of(value: Mapping[str, Any], fields: Sequence[str] | None) -> str:
    """What recall indexes: the named fields (dotted paths), else every string leaf."""
    parts: list[str] = []
    if fields:
        for path in fields:
            node: Any = value
            for step in path.split("."):
                node = node.get(step) if isinstance(node, Mapping) else None
            _leaves(node, parts)
    else:
        _leaves(value, parts)
    return " ".join(parts).strip()


def _leaves(node: Any, out: list[str]) -> None:
    if isinstance(node, str):
        out.append(node)
    elif isinstance(node, Mapping):
        for v in node.values():
            _leaves(v, out)
    elif isinstance(node, list | tuple):
        for v in node:
            _leaves(v, out)
    elif isinstance(node, int | float) and not isinstance(node, bool):
        out.append(str(node))


class AmcpStore(BaseStore):
    """``BaseStore`` backed by an amcp ``Memory`` (which the caller owns and closes)."""

    supports_ttl = False

    def __init__(self, memory: Memory, *, index_fields: Sequence[str] | None = None) -> None:
        self.memory = memory
        self.index_fields = list(index_fields) if index_fields else None
        # Memory is shared state (clock, vector index): abatch runs batches in a worker
        # thread, so serialise them.
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ batch

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        with self._lock:
            return [self._one(op) for op in ops]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await asyncio.to_thread(self.batch, list(ops))

    def _one(self, op: Op) -> Result:
        if isinstance(op, GetOp):
            return self._get(op.namespace, op.key)
        if isinstance(op, PutOp):
            self._put(op)
            return None
        if isinstance(op, SearchOp):
            return self._search(op)
        if isinstance(op, ListNamespacesOp):
            return self._list_namespaces(op)
        raise TypeError(f"unknown store operation {type(op).__name__}")

    # ------------------------------------------------------------------ records

    def _current(self, namespace: Sequence[str], key: str) -> StoredRecord | None:
        found = self.memory.list_records(
            RecordFilter(scopes=(scope_of(namespace),), subjects=(subject_of(namespace, key),),
                         tags=(TAG,)),
            limit=1,
        )
        return found[0] if found else None

    def _get(self, namespace: tuple[str, ...], key: str) -> Item | None:
        found = self._current(namespace, key)
        return _item(found.record) if found is not None and found.record is not None else None

    def _put(self, op: PutOp) -> None:
        old = self._current(op.namespace, op.key)
        if op.value is None:
            if old is not None:
                self.memory.invalidate(old.knowledge_id, "deleted through the LangGraph store")
            return
        value = dict(op.value)
        encoded = json.dumps(value, ensure_ascii=False, sort_keys=True)
        if old is not None and old.record is not None:
            if old.record.vendor_extensions.get("x-lg-value") == encoded:
                return  # same value: nothing new to say
            created = old.record.vendor_extensions.get("x-lg-created") or (
                old.record.meta.created_at)
        else:
            created = None
        fields = self.index_fields if op.index is None else (op.index or [])
        text = text_of(value, fields) if op.index is not False else ""
        extensions: dict[str, Any] = {"x-lg-value": encoded, "x-lg-key": op.key,
                      "x-lg-namespace": list(op.namespace)}
        if created:
            extensions["x-lg-created"] = created
        write: dict[str, Any] = {
            "type": "KT-FACT", "scope": scope_of(op.namespace), "kind": KIND, "tags": [TAG],
            "subject": subject_of(op.namespace, op.key), "object": encoded,
            "extensions": extensions,
        }
        # The record needs some text; an unindexed item is findable by key, not by recall.
        body = text or f"{'/'.join(op.namespace)}/{op.key}"
        if old is not None:
            self.memory.supersede(old.knowledge_id, body, **write)
        else:
            self.memory.remember(body, **write)

    def _search(self, op: SearchOp) -> list[SearchItem]:
        scopes = [s for s in self._scopes() if _has_prefix(namespace_of(s), op.namespace_prefix)]
        if not scopes:
            return []
        want = op.offset + op.limit
        scored: list[tuple[AMFRecord, float | None]] = []
        if op.query:
            res = self.memory.recall(op.query, k=min(SCAN_LIMIT, max(want * 4, 50)),
                                     scope=scopes, tags=[TAG], touch=False)
            scored = [(h.item.record, float(h.score)) for h in res.hits
                      if h.item.record is not None]
        else:
            rows = self.memory.list_records(RecordFilter(scopes=tuple(scopes), tags=(TAG,)),
                                            limit=SCAN_LIMIT)
            recs = [r.record for r in rows if r.record is not None]
            recs.sort(key=lambda r: r.meta.created_at, reverse=True)
            scored = [(r, None) for r in recs]
        out: list[SearchItem] = []
        for record, score in scored:
            ns = namespace_of(record.meta.project_scope[0])
            if ns is None or not _has_prefix(ns, op.namespace_prefix):
                continue
            item = _item(record)
            if op.filter and not _matches(item.value, op.filter):
                continue
            out.append(SearchItem(item.namespace, item.key, item.value, item.created_at,
                                  item.updated_at, score))
        return out[op.offset: want]

    def _scopes(self) -> list[str]:
        return sorted(s for s in self.memory.stats().scopes if s.startswith(SCOPE_PREFIX))

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        live: set[tuple[str, ...]] = set()
        for scope in self._scopes():
            ns = namespace_of(scope)
            # stats count every record ever written; list only namespaces with live items
            if ns is not None and self.memory.list_records(
                RecordFilter(scopes=(scope,), tags=(TAG,)), limit=1
            ):
                live.add(ns)
        found = []
        for ns in live:
            if op.match_conditions and not all(
                _match_condition(ns, c.match_type, c.path) for c in op.match_conditions
            ):
                continue
            found.append(ns[: op.max_depth] if op.max_depth is not None else ns)
        unique = sorted(set(found))
        return unique[op.offset: op.offset + op.limit]


def _item(record: AMFRecord) -> Item:
    ext = record.vendor_extensions
    created = ext.get("x-lg-created") or record.meta.created_at
    return Item(
        value=json.loads(str(ext["x-lg-value"])),
        key=str(ext["x-lg-key"]),
        namespace=tuple(str(p) for p in ext["x-lg-namespace"]),
        created_at=_dt(str(created)),
        updated_at=_dt(record.meta.created_at),
    )


def _dt(ts: str) -> datetime:
    return parse_ts(ts).astimezone(UTC)


def _has_prefix(ns: tuple[str, ...] | None, prefix: Sequence[str]) -> bool:
    return ns is not None and len(ns) >= len(prefix) and all(
        p in ("*", n) for p, n in zip(prefix, ns, strict=False))


def _match_condition(ns: tuple[str, ...], kind: str, path: Sequence[str]) -> bool:
    if len(path) > len(ns):
        return False
    part = ns[: len(path)] if kind == "prefix" else ns[len(ns) - len(path):]
    return all(p in ("*", n) for p, n in zip(path, part, strict=True))


def _matches(value: Mapping[str, Any], flt: Mapping[str, Any]) -> bool:
    for key, cond in flt.items():
        have = value.get(key)
        if isinstance(cond, Mapping) and cond and all(k in _OPS for k in cond):
            try:
                if not all(_OPS[op](have, want) for op, want in cond.items()):
                    return False
            except TypeError:
                return False
        elif have != cond:
            return False
    return True


__all__ = ["AmcpStore", "namespace_of", "scope_of", "subject_of", "text_of"]
