"""Ids by unique prefix over HTTP, without revealing records the caller may not read."""

from __future__ import annotations

from pathlib import Path

from tests.api.kit import bearer, client_for, make_memory
from tests.memory.test_refs import two_sharing_a_prefix


def test_prefixes_resolve_and_ambiguity_lists_only_visible_candidates(tmp_path: Path) -> None:
    mem = make_memory(tmp_path)
    prefix, a, b = two_sharing_a_prefix(mem, scope="team:a")
    hidden = mem.remember("team b's secret plan", scope="team:b").knowledge_id
    with client_for(mem, tokens={"alice": ["team:a"], "admin": ["*"]}) as c:
        r = c.get(f"/v1/memories/{a[:20]}", headers=bearer("alice"))
        assert r.status_code == 200 and r.json()["knowledge_id"] == a
        r = c.get(f"/v1/memories/{prefix}", headers=bearer("alice"))
        assert r.status_code == 400 and "ambiguous" in r.json()["error"]
        assert a[:14] in r.json()["error"] and b[:14] in r.json()["error"]
        r = c.get(f"/v1/memories/{hidden[:12]}", headers=bearer("alice"))
        # the same answer as for a prefix nothing starts with: no hint the record exists
        assert r.status_code == 404 and r.json()["error"] == f"no record starts with {hidden[:12]}"
        r = c.get(f"/v1/memories/{hidden[:12]}", headers=bearer("admin"))
        assert r.status_code == 200 and r.json()["knowledge_id"] == hidden
        r = c.post(f"/v1/memories/{a[:20]}/invalidate", json={"reason": "wrong"},
                   headers=bearer("admin"))
        assert r.status_code == 200 and r.json()["knowledge_id"] == a
    mem.close()
