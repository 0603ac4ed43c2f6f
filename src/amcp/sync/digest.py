"""Per-scope digests for anti-entropy (PROFILE §10). Sans-IO, blocking.

A scope's digest is SHA-256 over the sorted lines ``knowledge_id state`` of every record in
that scope a peer may see, where ``state`` is what sync makes equal on every node:

- ``P`` purged (tombstones have no scope: they are all in the pseudo-scope ``~purged``),
- ``I`` invalidated,
- ``S:<id>`` superseded by ``<id>`` (also when an outcome round archived it since),
- ``L`` live (active, a draft the firewall holds, or archived by its own TTL: those are each
  node's local decisions about the same record).

Sensitive records and ``locality = "local"`` ones never leave the node, so they are left
out, as the feed leaves them out. Two nodes with the same digest for a scope hold the same
records in the same sync state; a difference names the scope to repair.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from amcp.amf.types import Lifecycle
from amcp.ports import MemoryWriter
from amcp.store.base import RecordFilter, StoredRecord
from amcp.sync.feed import stays_here
from amcp.sync.tiers import digest_pointers

PURGED = "~purged"
PAGE = 1000
ScopeCheck = Callable[[Sequence[str]], bool]
Digests = dict[str, tuple[str, int]]  # scope -> (hex digest, records)


def state_of(item: StoredRecord) -> str:
    st = item.state
    if item.record is None or st.lifecycle is Lifecycle.PURGED:
        return "P"
    if st.lifecycle is Lifecycle.INVALIDATED:
        return "I"
    if st.superseded_by:
        return f"S:{st.superseded_by}"
    return "L"


def _iter_all(memory: MemoryWriter) -> Iterable[StoredRecord]:
    flt = RecordFilter(lifecycles=None, include_expired=True)
    after: str | None = None
    while True:
        page = memory.store.query(flt, limit=PAGE, after=after)
        yield from page
        if len(page) < PAGE:
            return
        after = page[-1].knowledge_id


def scope_digests(
    memory: MemoryWriter, *, readable: ScopeCheck | None = None,
    scopes: Sequence[str] | None = None,
) -> Digests:
    """Digests of every scope (or of ``scopes``) over the records ``readable`` allows."""
    wanted = set(scopes) if scopes else None
    lines: dict[str, list[str]] = {}
    for item in _iter_all(memory):
        state = state_of(item)
        if state == "P":
            names: Sequence[str] = (PURGED,)
        else:
            rec = item.record
            assert rec is not None
            if item.state.sensitive or stays_here(rec):
                continue
            names = rec.meta.project_scope
            if readable is not None and not readable(names):
                continue
        line = f"{item.knowledge_id} {state}"
        for name in names:
            if wanted is None or name in wanted:
                lines.setdefault(name, []).append(line)
    _pointer_lines(memory, readable, wanted, lines)
    out: Digests = {}
    for name, items in lines.items():
        items.sort()
        out[name] = (hashlib.sha256("\n".join(items).encode()).hexdigest(), len(items))
    return out


def _pointer_lines(memory: MemoryWriter, readable: ScopeCheck | None,
                   wanted: set[str] | None, lines: dict[str, list[str]]) -> None:
    """An evicted record is held here as far as sync goes (its pointer, in the state it
    had): the same line as before its eviction, so eviction moves no digest. A stale
    pointer (changed elsewhere since) is left out, so anti-entropy brings it back."""
    for p in digest_pointers(memory):
        if readable is not None and not readable(p.scopes):
            continue
        if p.lifecycle is Lifecycle.INVALIDATED:
            state = "I"
        elif p.superseded_by:
            state = f"S:{p.superseded_by}"
        else:
            state = "L"
        for name in p.scopes:
            if wanted is None or name in wanted:
                lines.setdefault(name, []).append(f"{p.knowledge_id} {state}")


def differing(mine: Mapping[str, tuple[str, int]], theirs: Mapping[str, Any]) -> list[str]:
    """Scopes whose digests differ, or that one side has and the other does not."""
    out = []
    for name in sorted(set(mine) | set(theirs)):
        a = mine.get(name)
        b = theirs.get(name)
        b_hex = b[0] if isinstance(b, list | tuple) and b else None
        if a is None or b_hex is None or a[0] != b_hex:
            out.append(name)
    return out


def to_wire(digests: Digests) -> dict[str, list[Any]]:
    return {k: [v[0], v[1]] for k, v in digests.items()}


__all__ = ["PURGED", "Digests", "differing", "scope_digests", "state_of", "to_wire"]
