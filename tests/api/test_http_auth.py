"""Bearer tokens limited to scopes: 401 without/unknown token, 403 outside, nothing stored."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.api.kit import bearer, client_for, make_memory

from amcp.session.policy import AccessPolicy

TOKENS = {"alice-token": ["team:a"], "admin-token": ["*"]}


@pytest.fixture
def setup(tmp_path: Path):
    mem = make_memory(tmp_path)
    with client_for(mem, tokens=TOKENS) as c:
        yield c, mem
    mem.close()


def test_missing_or_unknown_token_is_401(setup) -> None:
    client, mem = setup
    r = client.post("/v1/memories", json={"text": "x", "scope": ["team:a"]})
    assert r.status_code == 401 and r.json()["status"] == 401
    assert r.headers["www-authenticate"] == "Bearer"
    r = client.post("/v1/memories", json={"text": "x", "scope": ["team:a"]},
                    headers=bearer("nope"))
    assert r.status_code == 401
    r = client.get("/v1/memories", headers={"Authorization": "Basic abc"})
    assert r.status_code == 401
    assert mem.stats().records == 0
    assert client.get("/v1/health").status_code == 200  # health needs no token


def test_write_outside_scope_is_403_and_stores_nothing(setup) -> None:
    client, mem = setup
    r = client.post("/v1/memories", json={"text": "x", "scope": ["team:b"]},
                    headers=bearer("alice-token"))
    assert r.status_code == 403 and r.json()["status"] == 403
    r = client.post("/v1/memories", json={"text": "x", "scope": ["team:a", "team:b"]},
                    headers=bearer("alice-token"))
    assert r.status_code == 403
    assert mem.stats().records == 0
    ok = client.post("/v1/memories", json={"text": "x", "scope": ["team:a"]},
                     headers=bearer("alice-token"))
    assert ok.status_code == 201


def test_reads_only_see_readable_scopes(setup) -> None:
    client, _mem = setup
    admin, alice = bearer("admin-token"), bearer("alice-token")
    b_id = client.post("/v1/memories", json={"text": "secret of team b", "scope": ["team:b"]},
                       headers=admin).json()["knowledge_id"]
    a_id = client.post("/v1/memories", json={"text": "secret of team a", "scope": ["team:a"]},
                       headers=admin).json()["knowledge_id"]
    # Unreadable looks like absent: no scope's content leaks through the id.
    assert client.get(f"/v1/memories/{b_id}", headers=alice).status_code == 404
    assert client.get(f"/v1/memories/{a_id}", headers=alice).status_code == 200
    hits = client.post("/v1/recall", json={"query": "secret of team"}, headers=alice).json()
    assert [h["knowledge_id"] for h in hits["results"]] == [a_id]
    assert client.post("/v1/recall", json={"query": "secret", "scope": ["team:b"]},
                       headers=alice).status_code == 403
    listed = client.get("/v1/memories", headers=alice).json()["items"]
    assert [it["knowledge_id"] for it in listed] == [a_id]
    q = client.post("/v1/query", json={"amql": 'RECALL WHERE type = "KT-FACT"'},
                    headers=alice).json()
    assert [r["knowledge_id"] for r in q["results"]] == [a_id]
    # Changing a record needs write access to its scopes.
    r = client.post(f"/v1/memories/{b_id}/invalidate", json={"reason": "x"}, headers=alice)
    assert r.status_code == 404
    r = client.post("/v1/outcomes", json={"knowledge_ids": [b_id], "result": "failure"},
                    headers=alice)
    assert r.status_code == 404
    # Export and tombstone imports span every scope.
    assert client.get("/v1/export", headers=alice).status_code == 403
    assert client.get("/v1/export", headers=admin).status_code == 200


def test_import_outside_scope_is_403_and_stores_nothing(tmp_path: Path, setup) -> None:
    client, _mem = setup
    admin = bearer("admin-token")
    client.post("/v1/memories", json={"text": "in a", "scope": ["team:a"]}, headers=admin)
    client.post("/v1/memories", json={"text": "in b", "scope": ["team:b"]}, headers=admin)
    dump = client.get("/v1/export", headers=admin).content
    other = make_memory(tmp_path, "other.db")
    with client_for(other, tokens=TOKENS) as c2:
        r = c2.post("/v1/import", content=dump, headers=bearer("alice-token"))
        assert r.status_code == 403
        assert other.stats().records == 0
        assert c2.post("/v1/import", content=dump, headers=admin).json()["created"] == 2
    other.close()


def test_policy_file_bearer_entries(tmp_path: Path) -> None:
    policy = AccessPolicy.from_mapping(
        {"peer": [{"name": "ci", "bearer": "ci-token", "read": ["team:*"], "write": []}]}
    )
    mem = make_memory(tmp_path)
    with client_for(mem, policy=policy) as c:
        r = c.post("/v1/memories", json={"text": "x", "scope": ["team:a"]},
                   headers=bearer("ci-token"))
        assert r.status_code == 403
        assert c.post("/v1/recall", json={"query": "x"}, headers=bearer("ci-token")).status_code \
            == 200
        r = c.post("/v1/query", json={"amql": 'REMEMBER {"annotation": {"natural_language": "y"}}'},
                   headers=bearer("ci-token"))
        assert r.status_code == 403
        assert mem.stats().records == 0
        doc = c.get("/openapi.json").json()
        assert doc["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
    mem.close()
