"""The concurrency contract (docs/architecture.md, "Concurrency"): one ``Memory`` called
from many threads at once — writers, readers, packers, maintenance — with no lock of the
caller's. Afterwards the store verifies, every acknowledged write is there, every
lifecycle is one a single-threaded history could give, and the vector index holds exactly
the active records."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from amcp.amf.types import Lifecycle
from amcp.errors import AmcpError, ConflictError
from amcp.memory import Memory
from amcp.store.base import RecordFilter, vectors_of

THREADS = 4
ROUNDS = 25


def _run(workers: list[Callable[[], None]]) -> list[BaseException]:
    errors: list[BaseException] = []
    start = threading.Barrier(len(workers))

    def wrap(fn: Callable[[], None]) -> None:
        start.wait()
        try:
            fn()
        except BaseException as exc:  # collected and asserted on below
            errors.append(exc)

    threads = [threading.Thread(target=wrap, args=(w,)) for w in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    return errors


def test_one_memory_many_threads(tmp_path: Path) -> None:
    mem = Memory(tmp_path / "memory.db", embedder="hashing")
    shared = [mem.remember(f"shared fact number {i} about the harbour", scope="user:t")
              for i in range(8)]
    acked: dict[int, list[str]] = {i: [] for i in range(THREADS)}
    superseded: list[tuple[str, str]] = []  # (old, new) pairs that were acknowledged
    conflicts: list[str] = []
    guard = threading.Lock()

    def writer(n: int) -> Callable[[], None]:
        def work() -> None:
            for r in range(ROUNDS):
                out = mem.remember(f"thread {n} round {r} notes the tide at {r} knots",
                                   scope="user:t")
                acked[n].append(out.knowledge_id)
                if r % 5 == 0:
                    mem.invalidate(out.knowledge_id, "wrong tide")
                # Every writer tries to supersede the same shared records: one wins each.
                old = shared[r % len(shared)].knowledge_id
                try:
                    new = mem.supersede(old, f"shared fact {r % len(shared)} revised by {n}")
                except ConflictError:
                    with guard:
                        conflicts.append(old)
                else:
                    with guard:
                        superseded.append((old, new.knowledge_id))
        return work

    def reader() -> None:
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            mem.recall("tide knots harbour", k=5, scope="user:t")
            mem.context("what is the tide", scopes=["user:t"], budget_tokens=2000)
            mem.list_records(RecordFilter(scopes=("user:t",)), limit=20)

    def maintainer() -> None:
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            mem.maintain()
            time.sleep(0.01)

    errors = _run([*(writer(n) for n in range(THREADS)), reader, reader, maintainer])
    assert not [e for e in errors if not isinstance(e, AmcpError)], errors
    assert not errors, errors

    # Each shared record was superseded by exactly one writer; the others got 409.
    winners: dict[str, list[str]] = {}
    for old, new in superseded:
        winners.setdefault(old, []).append(new)
    assert all(len(news) == 1 for news in winners.values()), winners
    for old, (new,) in winners.items():
        got = mem.get(old)
        assert got.state.lifecycle is Lifecycle.SUPERSEDED and got.state.superseded_by == new
    assert len(superseded) + len(conflicts) == THREADS * ROUNDS

    # Every acknowledged write is stored, in the lifecycle its writer left it in.
    for n, ids in acked.items():
        assert len(ids) == ROUNDS
        for r, kid in enumerate(ids):
            want = Lifecycle.INVALIDATED if r % 5 == 0 else Lifecycle.ACTIVE
            assert mem.get(kid).state.lifecycle is want, (n, r)

    report = mem.store.verify(full=True)
    assert report.ok and not report.damaged, report.problems

    # The vector index holds exactly the active records' rows, as a rebuild would.
    index = mem.searcher._ensure_index()
    assert index is not None
    active = vectors_of(mem.store).rowids(RecordFilter(include_expired=True))
    assert np.array_equal(np.sort(index.ids()), np.sort(active))
    mem.close()
