"""Supersede conflicts: one winner on every node whatever the arrival order (PROFILE §10)."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amcp.amf.types import Lifecycle
from amcp.memory import Memory
from amcp.sync import apply_changes, pull_changes
from amcp.sync.conflicts import rank
from amcp.sync.digest import scope_digests

_counter = itertools.count()


def _mem(root: Path, name: str) -> Memory:
    return Memory(root / f"{name}-{next(_counter)}" / "memory.db", embedder="hashing")


def _history(root: Path) -> tuple[list[dict[str, Any]], str, list[str]]:
    """P written on a, superseded concurrently on b, c and d; every node's feed entries."""
    a = _mem(root, "a")
    p = a.remember("the api listens on port 8080", type="KT-DECISION", scope="team:x")
    base = pull_changes(a, 0).changes
    entries: list[dict[str, Any]] = []
    claimants = []
    for name, text, evidence in (("b", "the api listens on 9090", None),
                                 ("c", "the api listens on 7070", ["load test 12"]),
                                 ("d", "the api listens on 6060", None)):
        node = _mem(root, name)
        apply_changes(node, base)
        kw = {"evidence": evidence} if evidence else {}
        claimants.append(node.supersede(p.knowledge_id, text, **kw).knowledge_id)
        entries += [e for e in pull_changes(node, 0).changes if e["knowledge_id"] !=
                    p.knowledge_id or e["op"] != "put"]
        node.close()
    a.close()
    return list(base) + entries, p.knowledge_id, claimants


def _state(mem: Memory, ids: list[str]) -> list[tuple[str, str, str | None]]:
    out = []
    for kid in ids:
        item = mem.store.get(kid)
        assert item is not None
        out.append((kid, item.state.lifecycle.value, item.state.superseded_by or None))
    return out


def _apply_in(order: list[dict[str, Any]], root: Path) -> Memory:
    mem = _mem(root, "e")
    apply_changes(mem, order)
    apply_changes(mem, order)  # what anti-entropy does: entries refused for a missing
    return mem                 # predecessor the first time apply the second time


def test_the_longer_causal_chain_wins_and_the_losers_are_kept(tmp_path: Path) -> None:
    entries, p, (x_b, x_c, x_d) = _history(tmp_path)
    mem = _apply_in(entries, tmp_path)
    state = {k: (lc, by) for k, lc, by in _state(mem, [p, x_b, x_c, x_d])}
    # c's record carries evidence: the longer chain
    assert state[p] == ("superseded", x_c)
    assert state[x_c] == ("active", None)
    for loser in (x_b, x_d):
        assert state[loser] == ("superseded", x_c)
        assert "conflict over" in (mem.store.get(loser).state.reason or "")  # type: ignore[union-attr]
    # a tie in chain length goes to the greater HLC, then the greater id
    rb, rd = rank(mem, mem.store.get(x_b).record), rank(mem, mem.store.get(x_d).record)  # type: ignore[union-attr, arg-type]
    assert rb.chain == rd.chain
    mem.close()


_ORDERS_ROOT: dict[str, Any] = {}


@settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.randoms(use_true_random=False))
def test_every_arrival_order_gives_the_same_winner(tmp_path_factory: Any, rnd: Any) -> None:
    if "history" not in _ORDERS_ROOT:
        root = tmp_path_factory.mktemp("conflicts")
        _ORDERS_ROOT["root"] = root
        _ORDERS_ROOT["history"] = _history(root)
        entries, p, ids = _ORDERS_ROOT["history"]
        ref = _apply_in(entries, root)
        _ORDERS_ROOT["expected"] = (_state(ref, [p, *ids]), scope_digests(ref))
        ref.close()
    entries, p, ids = _ORDERS_ROOT["history"]
    order = list(entries)
    rnd.shuffle(order)
    mem = _apply_in(order, _ORDERS_ROOT["root"])
    try:
        assert (_state(mem, [p, *ids]), scope_digests(mem)) == _ORDERS_ROOT["expected"]
    finally:
        mem.close()


def test_invalidation_beats_a_concurrent_supersede(tmp_path: Path) -> None:
    a, b = _mem(tmp_path, "a"), _mem(tmp_path, "b")
    p = a.remember("cache ttl is 60s", type="KT-DECISION", scope="team:x").knowledge_id
    apply_changes(b, pull_changes(a, 0).changes)
    a.invalidate(p, "measured: it was wrong")
    new = b.supersede(p, "cache ttl is 30s").knowledge_id
    for one, other in ((a, b), (b, a)):
        apply_changes(other, pull_changes(one, 0).changes)
    for mem in (a, b):
        assert mem.store.get(p).state.lifecycle is Lifecycle.INVALIDATED  # type: ignore[union-attr]
        assert mem.store.get(new).state.lifecycle is Lifecycle.ACTIVE  # type: ignore[union-attr]
    assert scope_digests(a) == scope_digests(b)
    a.close()
    b.close()
