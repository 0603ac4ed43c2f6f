"""Ids people can type: unique prefixes, as in git (amcp.refs through Memory.resolve_id)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

from amcp.errors import AmbiguousIdError, NotFoundError, ValidationError
from amcp.memory import Memory


@pytest.fixture
def mem(tmp_path: Path) -> Memory:
    m = Memory(tmp_path / "m.db", embedder=None)
    yield m
    m.close()


def two_sharing_a_prefix(mem: Memory, scope: str = "*") -> tuple[str, str, str]:
    """Store records until two ids share their first 4 hex digits (a birthday collision:
    ~300 records of 65,536 prefixes); returns the prefix and both ids."""
    seen: dict[str, list[str]] = defaultdict(list)
    for start in range(0, 5000, 250):
        batch = ({"text": f"fact number {i}", "scope": scope} for i in range(start, start + 250))
        for res in mem.remember_many(batch):
            key = res.knowledge_id[:6]
            seen[key].append(res.knowledge_id)
            if len(seen[key]) == 2:
                return key, seen[key][0], seen[key][1]
    raise AssertionError("no collision in 5000 records")


def test_whole_id_short_prefix_bare_hex_uppercase_and_copied_ellipsis(mem: Memory) -> None:
    kid = mem.remember("Alice prefers tabs").knowledge_id
    for ref in (kid, kid[:8], kid[2:10], kid[:12].upper(), kid[:14] + "…", f"  {kid[:9]} "):
        assert mem.resolve_id(ref) == kid, ref


def test_a_prefix_that_matches_two_ids_lists_both(mem: Memory) -> None:
    prefix, a, b = two_sharing_a_prefix(mem)
    with pytest.raises(AmbiguousIdError) as caught:
        mem.resolve_id(prefix)
    assert set(caught.value.candidates) == {a, b}
    assert "ambiguous" in str(caught.value) and a[:14] in str(caught.value)
    assert mem.resolve_id(a[:20]) == a  # one more digit or so settles it


def test_a_prefix_that_matches_none_is_not_found(mem: Memory) -> None:
    mem.remember("something")
    kid = mem.remember("other").knowledge_id
    wrong = "K-" + ("0" if kid[2] != "0" else "1") + kid[3:10]
    with pytest.raises(NotFoundError, match="no record starts with"):
        mem.resolve_id(wrong)


@pytest.mark.parametrize("ref", ["K-12", "ab", ""])
def test_too_short_is_a_validation_error(mem: Memory, ref: str) -> None:
    with pytest.raises((ValidationError, NotFoundError)):
        mem.resolve_id(ref)


@pytest.mark.parametrize("ref", ["hello", "K-xyz1", "K-" + "a" * 65])
def test_not_an_id_at_all(mem: Memory, ref: str) -> None:
    with pytest.raises(NotFoundError, match="hex digits"):
        mem.resolve_id(ref)


def test_hidden_records_are_neither_matched_nor_listed(mem: Memory) -> None:
    prefix, a, b = two_sharing_a_prefix(mem)
    assert mem.resolve_id(prefix, visible=lambda kid: kid != b) == a
    with pytest.raises(NotFoundError):
        mem.resolve_id(prefix, visible=lambda kid: False)


def test_purged_records_still_resolve(mem: Memory) -> None:
    kid = mem.remember("a secret to erase").knowledge_id
    mem.purge(kid)
    assert mem.resolve_id(kid[:10]) == kid
