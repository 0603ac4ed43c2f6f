from __future__ import annotations

from pathlib import Path

import pytest
from tests.cse.kit import NOW, add, open_mem

from amcp.amf.types import KnowledgeType
from amcp.cse.gravity import centroid_match, cluster_id_for, cluster_of, namespace_of
from amcp.cse.pack import build_pack
from amcp.cse.tiers import AMP_ORDER, amp_rank, tiers_of
from amcp.errors import NotFoundError, ValidationError
from amcp.memory import Memory


@pytest.fixture
def mem(tmp_path: Path) -> Memory:
    m = open_mem(tmp_path)
    yield m
    m.close()


def test_pointers_follow_amp_kind_order(mem: Memory) -> None:
    kinds = ["events", "discovery", "invalidation", "pattern", "facts", "intent"]
    for i, kind in enumerate(kinds):
        add(mem, f"deploy pipeline note {kind} {i}", KnowledgeType.DECISION, kind=kind,
            subject=f"ops.deploy.n{i}")
    add(mem, "deploy pipeline without kind", KnowledgeType.DECISION, subject="ops.deploy.x")
    pack = build_pack(mem, "deploy pipeline note", budget_tokens=40000, now=NOW)
    tiers = tiers_of(pack)
    kind_of = {it.knowledge_id: it.kind for it in pack.items}
    ranks = [amp_rank(kind_of[kid]) for kid in tiers.ids]
    assert ranks == sorted(ranks) and ranks[-1] == len(AMP_ORDER)
    shown = [p.split("] ", 1)[1].split()[3] for p in tiers.pointers[:6]]
    assert shown == list(AMP_ORDER)
    assert all(p.startswith("K-") and "[KT-DECISION · project:x · 0.50]" in p
               for p in tiers.pointers)
    assert tiers.summaries and all(kid in tiers.ids for kid, _ in tiers.summaries)


def test_cluster_ids_are_stable_and_reversible(mem: Memory) -> None:
    a = add(mem, "attach algo orders for tp", subject="okx.tpsl.attach")
    cid = cluster_of(mem, a)
    assert cid == "C-okx.tpsl" == cluster_id_for("okx.tpsl.other")
    add(mem, "something else entirely", subject="okx.tpsl.more")
    new = mem.supersede(a, "attach algo orders for tp and sl")
    assert cluster_of(mem, a) == cid == cluster_of(mem, new.knowledge_id)
    assert namespace_of(cid) == "okx.tpsl"
    assert namespace_of(cluster_id_for("odd subject/with space.x")) == "odd subject/with space"
    with pytest.raises(NotFoundError):
        cluster_of(mem, "K-" + "2" * 64)
    with pytest.raises(ValidationError):
        namespace_of("okx")


def test_centroid_match_prefers_the_clusters_topic(mem: Memory) -> None:
    for i, t in enumerate(["order stop loss trigger", "stop loss order attach",
                           "trigger price for stop loss"]):
        add(mem, t, subject=f"okx.tpsl.k{i}")
    add(mem, "python packaging with wheels", subject="py.pack.k")
    cid = "C-okx.tpsl"
    near = centroid_match(mem, cid, "stop loss order")
    far = centroid_match(mem, cid, "wheel packaging")
    assert near > far and -1.0 <= far <= near <= 1.0
    assert centroid_match(mem, "C-nothing.here", "x") == 0.0
