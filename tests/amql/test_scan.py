"""The AMQL scan: rowids once, pages by id — the same records, order and filtering as paging."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from amcp.amf.types import KnowledgeType, Lifecycle
from amcp.amql.nodeview import ALL_LIFECYCLES, list_view, scan_pages
from amcp.amql.run import run_query
from amcp.memory import Memory
from amcp.store.base import RecordFilter

T0 = 1_760_000_000.0


@pytest.fixture(scope="module")
def mem(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    m = Memory(tmp_path_factory.mktemp("scan") / "m.db", embedder="hashing")
    ids = []
    for i in range(40):
        ids.append(m.remember(
            f"record {i} about {'orders' if i % 2 else 'risk'}",
            type=[KnowledgeType.FACT, KnowledgeType.DECISION][i % 2],
            scope=["A", "B", "*"][i % 3], subject=f"ns{i % 3}.item{i}",
            created_at=T0 + i, ttl=3600 if i % 5 == 0 else None,
        ).knowledge_id)
    for kid in ids[1:12:3]:
        m.invalidate(kid, reason="wrong")
    yield m
    m.close()


def _paged(mem: Memory, flt: RecordFilter, page: int) -> list[str]:
    out, after = [], None
    while True:
        found = list_view(mem, flt, limit=page, after=after)
        out += [s.knowledge_id for s in found]
        if len(found) < page:
            return out
        after = found[-1].knowledge_id


FILTERS = [
    RecordFilter(now=T0 + 10),  # TTL records still live
    RecordFilter(now=T0 + 7200),  # TTL records expired
    RecordFilter(scopes=("A",), now=T0 + 7200),
    RecordFilter(lifecycles=ALL_LIFECYCLES, now=T0 + 10),
    RecordFilter(lifecycles=(Lifecycle.INVALIDATED,), now=T0 + 10),
    RecordFilter(types=(KnowledgeType.DECISION,), scopes=("B",), include_expired=True),
    RecordFilter(lifecycles=None, include_expired=True),
]


@pytest.mark.parametrize("flt", FILTERS)
@pytest.mark.parametrize("page", [1, 3, 500])
def test_scan_matches_paging(mem: Memory, flt: RecordFilter, page: int) -> None:
    scanned = [s.knowledge_id for p in scan_pages(mem, flt, page=page) for s in p]
    assert scanned == _paged(mem, flt, 7)


def test_scan_drops_records_whose_state_changed_after_it_started(tmp_path: Path) -> None:
    with Memory(tmp_path / "m.db", embedder="hashing") as m:
        ids = [m.remember(f"fact {i}", scope="A").knowledge_id for i in range(6)]
        pages = scan_pages(m, RecordFilter(), page=2)
        first = next(pages)
        m.invalidate(ids[3], reason="changed mid-scan")
        rest = [s.knowledge_id for p in pages for s in p]
        assert [s.knowledge_id for s in first] == ids[:2]
        assert rest == [ids[2], ids[4], ids[5]]


def test_scan_empty_store(tmp_path: Path) -> None:
    with Memory(tmp_path / "m.db", embedder="hashing") as m:
        assert list(scan_pages(m, RecordFilter())) == []


def test_residual_query_over_scan_equals_filtering_by_hand(mem: Memory) -> None:
    got = run_query(mem, "RECALL * WHERE confidence > 0.5 AND decay_status != 'expired' "
                         "LIMIT rows(100)", scopes=("A", "B"), touch=False, now=T0 + 10)
    everything = _paged(mem, RecordFilter(scopes=("A", "B"), now=T0 + 10), 100)
    assert [r.knowledge_id for r in got.records] == everything
