"""AmcpStore against LangGraph's own interface: the same operations give the same answers
as LangGraph's InMemoryStore, and a compiled graph reads and writes through it."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import TypedDict

import pytest
from langgraph.store.base import BaseStore, GetOp, Item, ListNamespacesOp, PutOp, SearchOp
from langgraph.store.memory import InMemoryStore

from amcp.agent.adapters.langgraph_store import AmcpStore, namespace_of, scope_of
from amcp.memory import Memory


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Memory]:
    m = Memory(tmp_path / "m.db", embedder="hashing")
    yield m
    m.close()


@pytest.fixture
def store(memory: Memory) -> AmcpStore:
    return AmcpStore(memory)


VALUES = {
    ("users", "alice", "prefs"): {
        "editor": {"name": "vim", "tabs": False}, "theme": "dark", "n": 3, "ratio": 0.25,
        "tags": ["a", "b"], "nothing": None,
    },
    ("users", "alice", "facts"): {"text": "Alice works on the parser", "n": 1},
    ("users", "bob", "facts"): {"text": "Bob maintains the deploy scripts", "n": 2},
    ("docs", "runbook"): {"text": "The deploy runbook lives in ops/README", "n": 5},
}


def _load(s: BaseStore) -> None:
    for (*ns, key), value in VALUES.items():
        s.put(tuple(ns), key, value)


def _plain(item: Item | None) -> tuple[object, ...] | None:
    return None if item is None else (item.namespace, item.key, item.value)


def test_round_trip_is_lossless(store: AmcpStore) -> None:
    _load(store)
    got = store.get(("users", "alice"), "prefs")
    assert got is not None
    assert got.value == VALUES[("users", "alice", "prefs")]
    assert got.namespace == ("users", "alice") and got.key == "prefs"
    assert got.created_at <= got.updated_at


def test_same_answers_as_in_memory_store(store: AmcpStore) -> None:
    ref = InMemoryStore()
    for s in (store, ref):
        _load(s)
        s.put(("users", "alice"), "facts", {"text": "Alice now works on the planner", "n": 4})
        s.delete(("users", "bob"), "facts")
    for ns, key in [(("users", "alice"), "facts"), (("users", "bob"), "facts"),
                    (("docs",), "runbook"), (("users", "alice"), "prefs")]:
        assert _plain(store.get(ns, key)) == _plain(ref.get(ns, key))
    # InMemoryStore keeps a namespace listed after its last item is deleted (an empty dict
    # stays behind); ours lists namespaces holding live items. Otherwise the same.
    emptied = ("users", "bob")
    assert store.list_namespaces() == [n for n in ref.list_namespaces() if n != emptied]
    assert store.list_namespaces(prefix=("users",)) == [
        n for n in ref.list_namespaces(prefix=("users",)) if n != emptied]
    assert store.list_namespaces(max_depth=1) == ref.list_namespaces(max_depth=1)
    assert store.list_namespaces(suffix=("alice",)) == ref.list_namespaces(suffix=("alice",))
    assert store.list_namespaces(prefix=("*", "alice")) == ref.list_namespaces(
        prefix=("*", "alice"))
    for flt in ({"n": 4}, {"n": {"$gte": 3}}, {"theme": "dark"}, {"n": {"$lt": 0}}):
        ours = {(i.namespace, i.key) for i in store.search(("users",), filter=flt)}
        theirs = {(i.namespace, i.key) for i in ref.search(("users",), filter=flt)}
        assert ours == theirs, flt
    assert len(store.search((), limit=2)) == 2
    assert {i.key for i in store.search(("users",))} == {i.key for i in ref.search(("users",))}


def test_update_supersedes_and_delete_invalidates(store: AmcpStore, memory: Memory) -> None:
    store.put(("n",), "k", {"text": "first version"})
    first = store.get(("n",), "k")
    store.put(("n",), "k", {"text": "second version"})
    second = store.get(("n",), "k")
    assert first is not None and second is not None
    assert second.value == {"text": "second version"}
    assert second.created_at == first.created_at  # creation time carried forward
    store.put(("n",), "k", {"text": "second version"})  # same value: no new record
    store.delete(("n",), "k")
    assert store.get(("n",), "k") is None
    states = {r.state.lifecycle.value for r in memory.list_records(
        __import__("amcp.store.base", fromlist=["RecordFilter"]).RecordFilter(
            scopes=(scope_of(("n",)),), lifecycles=None), limit=10)}
    assert states == {"superseded", "invalidated"}  # history kept, nothing deleted


def test_query_search_uses_recall(store: AmcpStore) -> None:
    _load(store)
    hits = store.search(("users",), query="deploy scripts")
    assert hits and hits[0].key == "facts" and hits[0].namespace == ("users", "bob")
    assert hits[0].score is not None
    assert all(h.namespace[0] == "users" for h in hits)


def test_index_fields_and_unindexed_items(store: AmcpStore) -> None:
    store.put(("x",), "a", {"title": "zebra crossing", "body": "giraffe"}, index=["title"])
    store.put(("x",), "b", {"title": "giraffe"}, index=False)
    # the hashing embedder ranks every item in the namespace; the indexed text decides order
    assert store.search(("x",), query="zebra")[0].key == "a"
    assert store.search(("x",), query="giraffe crossing")[0].key == "a"  # only title indexed
    assert store.get(("x",), "b") is not None


def test_batch_and_abatch_ops(store: AmcpStore) -> None:
    ops = [PutOp(("a",), "k", {"text": "hello world"}), GetOp(("a",), "k"),
           SearchOp(("a",), query="hello"), ListNamespacesOp()]
    res = store.batch(ops)
    assert res[0] is None and isinstance(res[1], Item) and res[3] == [("a",)]
    ares = asyncio.run(store.abatch([GetOp(("a",), "k")]))
    assert _plain(ares[0]) == _plain(res[1])  # type: ignore[arg-type]
    assert asyncio.run(store.aget(("a",), "k")) is not None


def test_namespace_scope_mapping() -> None:
    assert scope_of(("users", "alice")) == "lg:users.alice"
    assert namespace_of("lg:users.alice") == ("users", "alice")
    assert namespace_of("project:x") is None


class State(TypedDict):
    user: str
    note: str
    answer: str


def test_graph_uses_the_store(store: AmcpStore) -> None:
    from langgraph.graph import END, START, StateGraph

    def save(state: State, *, store: BaseStore) -> dict[str, str]:
        store.put(("notes", state["user"]), "latest", {"text": state["note"]})
        return {}

    def read(state: State, *, store: BaseStore) -> dict[str, str]:
        hits = store.search(("notes", state["user"]), query=state["note"])
        return {"answer": hits[0].value["text"] if hits else ""}

    g = StateGraph(State)
    g.add_node("save", save)
    g.add_node("read", read)
    g.add_edge(START, "save")
    g.add_edge("save", "read")
    g.add_edge("read", END)
    app = g.compile(store=store)
    out = app.invoke({"user": "alice", "note": "remember the milk", "answer": ""})
    assert out["answer"] == "remember the milk"
    item = store.get(("notes", "alice"), "latest")
    assert item is not None and item.value == {"text": "remember the milk"}
