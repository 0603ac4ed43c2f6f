"""Ops in the change feed (issue 17): a weight change does not travel, and one entry a node
cannot apply — a `weight` from another build, an op it does not know, a broken entry — is
refused and counted on its own while the rest of its batch applies."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from amcp.evolution.outcomes import apply_outcome
from amcp.memory import Memory
from amcp.node import connect, serve
from amcp.sync import apply_changes, pull_changes
from amcp.sync.digest import scope_digests


def _mem(tmp_path: Path, name: str) -> Memory:
    return Memory(tmp_path / name / "memory.db", embedder="hashing")


def test_weights_are_not_in_the_feed_and_peers_still_converge(tmp_path: Path) -> None:
    a, b = _mem(tmp_path, "a"), _mem(tmp_path, "b")
    try:
        first = a.remember("deploys go out on tuesdays", type="KT-DECISION", scope="team:w")
        second = a.remember("staging mirrors production", type="KT-DECISION", scope="team:w")
        apply_outcome(a, [first.knowledge_id], "success")
        changes = pull_changes(a, 0).changes
        ops = [c["op"] for c in changes]
        assert "weight" not in ops and ops.count("put") == 2
        # the change log itself still has it (signed, local state)
        assert "weight" in [c.op.value for c in a.store.changes(0, 100)]
        result = apply_changes(b, changes)
        assert (result.applied, result.conflicts) == (2, 0)
        assert scope_digests(a) == scope_digests(b)
        # each node's weight is its own learning
        assert a.get(first.knowledge_id).state.weight > 0.5
        assert b.get(first.knowledge_id).state.weight == 0.5
        assert b.get(second.knowledge_id).state.lifecycle.value == "active"
    finally:
        a.close()
        b.close()


def _bad_entries(kid: str) -> list[Any]:
    return [
        {"op": "weight", "knowledge_id": kid, "hlc": 5, "weight": 0.9},  # another build's
        {"op": "teleport", "knowledge_id": kid, "hlc": 6},  # an op nobody knows
        {"op": "put", "knowledge_id": kid, "hlc": 7},  # a put without its record
        {"op": "invalidate", "knowledge_id": "not an id", "hlc": 8},
        "not even a map",
    ]


def test_one_bad_entry_does_not_stall_the_batch(tmp_path: Path) -> None:
    a, b = _mem(tmp_path, "a"), _mem(tmp_path, "b")
    try:
        kept = [a.remember(f"fact number {i} about the build", type="KT-DECISION",
                           scope="team:w") for i in range(3)]
        good = list(pull_changes(a, 0).changes)
        mixed = [good[0], *_bad_entries(kept[0].knowledge_id), good[1], good[2]]
        result = apply_changes(b, mixed)
        assert result.applied == 3
        assert result.malformed == 5 and result.conflicts == 5
        assert result.watermark == max(c["hlc"] for c in good)  # the puller moves past all
        problems = " | ".join(result.problems)
        assert "op: must be one of" in problems and "changes[5]: must be a map" in problems
        for outcome in kept:
            assert b.store.get(outcome.knowledge_id) is not None
        # nothing the bad entries named was changed: the first record is still plain active
        assert b.get(kept[0].knowledge_id).state.weight == 0.5
    finally:
        a.close()
        b.close()


def test_a_pushed_batch_with_a_weight_entry_applies_the_rest(tmp_path: Path) -> None:
    """Over the wire: SYNC_PUSH from an older build that still sends `weight` entries."""
    src, dst = _mem(tmp_path, "src"), _mem(tmp_path, "dst")

    async def main() -> dict[str, Any]:
        server = await serve(dst, "127.0.0.1", 0)
        try:
            client = await connect("127.0.0.1", server.port)
            try:
                return await client.sync_push(changes)
            finally:
                await client.aclose()
        finally:
            await server.close()

    try:
        rec = src.remember("the cache is warmed at boot", type="KT-DECISION", scope="team:w")
        other = src.remember("the cache holds one hour", type="KT-DECISION", scope="team:w")
        feed = list(pull_changes(src, 0).changes)
        changes = [feed[0], {"op": "weight", "knowledge_id": rec.knowledge_id,
                             "hlc": feed[0]["hlc"] + 1}, feed[1]]
        ack = asyncio.run(main())
        assert (ack["applied"], ack["conflicts"]) == (2, 1)
        assert any("op: must be one of" in p for p in ack["problems"])
        assert dst.store.get(other.knowledge_id) is not None
    finally:
        src.close()
        dst.close()
