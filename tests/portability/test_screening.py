"""The firewall screens every imported record, also when the import looks the store's
contradiction candidates up once per attribute (``BatchRelated`` spanning the batches)."""

from __future__ import annotations

import json
from pathlib import Path

from amcp.amf.types import Lifecycle
from amcp.memory import Memory
from amcp.portability.api import import_path
from amcp.portability.model import ImportOptions
from amcp.portability.write import Progress
from amcp.store.base import RecordFilter


def _lines(path: Path, texts: list[str], scope: str) -> Path:
    path.write_text("".join(
        json.dumps({"text": t, "scope": scope, "created_at": 1709647500 + i}) + "\n"
        for i, t in enumerate(texts)))
    return path


def _lifecycles(mem: Memory) -> dict[str, Lifecycle]:
    flt = RecordFilter(lifecycles=None)
    return {r.record.text: r.state.lifecycle for r in mem.list_records(flt, limit=100)
            if r.record is not None}


def test_every_batch_is_screened_against_what_the_user_said(mem: Memory, tmp_path: Path) -> None:
    mine = mem.remember("Alice's manager is Priya", scope="user:alice")
    values = ["Bob", "Carol", "Dana", "Erin", "Frank"]
    rows = [t for v in values for t in (f"Alice's manager is {v}", f"Alice likes {v}'s jokes")]
    f = _lines(tmp_path / "a.jsonl", rows, "user:alice")
    res = import_path(mem, f, ImportOptions(kind="table", batch=2))  # 5 batches, one memo
    assert res.ok and res.created == 10
    state = _lifecycles(mem)
    assert state["Alice's manager is Priya"] is Lifecycle.ACTIVE
    for v in values:  # each held beside the user's own statement, in every batch
        assert state[f"Alice's manager is {v}"] is Lifecycle.DRAFT
        assert state[f"Alice likes {v}'s jokes"] is Lifecycle.ACTIVE
    assert mem.get(mine.knowledge_id).state.lifecycle is Lifecycle.ACTIVE


def test_a_write_between_batches_is_seen_by_the_next_one(mem: Memory, tmp_path: Path) -> None:
    # "Dana Smith" refines the import's own "Dana" (no contradiction there): only the
    # user's "Frank", written by someone else while the import runs, can hold it.
    f = _lines(tmp_path / "b.jsonl", ["Bob's manager is Dana", "Bob's manager is Dana Smith"],
               "user:bob")

    def meanwhile(p: Progress) -> None:
        if p.done == 1:
            mem.remember("Bob's manager is Frank", scope="user:bob")

    res = import_path(mem, f, ImportOptions(kind="table", batch=1), progress=meanwhile)
    assert res.ok and res.created == 2
    state = _lifecycles(mem)
    assert state["Bob's manager is Dana"] is Lifecycle.ACTIVE
    assert state["Bob's manager is Frank"] is Lifecycle.ACTIVE
    assert state["Bob's manager is Dana Smith"] is Lifecycle.DRAFT


def test_a_record_the_import_superseded_is_no_candidate(mem: Memory, tmp_path: Path) -> None:
    # Portable records upsert by id: v2 supersedes v1 in batch one; batch two's refinement
    # of v2 must not be held as contradicting the retired v1.
    f = tmp_path / "p.jsonl"
    f.write_text(json.dumps({"id": "m", "type": "fact", "content": "Carol's desk is 4A",
                             "scope": "user:carol", "created_at": 1}) + "\n")
    assert import_path(mem, f, ImportOptions(kind="portable")).created == 1
    f.write_text("".join(json.dumps(r) + "\n" for r in [
        {"id": "m", "type": "fact", "content": "Carol's desk is 7B", "scope": "user:carol",
         "created_at": 2},
        {"id": "n", "type": "fact", "content": "Carol's desk is 7B by the window",
         "scope": "user:carol", "created_at": 3}]))
    res = import_path(mem, f, ImportOptions(kind="portable", batch=1))
    assert res.ok and res.superseded == 1
    state = _lifecycles(mem)
    assert state["Carol's desk is 4A"] is Lifecycle.SUPERSEDED
    assert state["Carol's desk is 7B"] is Lifecycle.ACTIVE
    assert state["Carol's desk is 7B by the window"] is Lifecycle.ACTIVE
