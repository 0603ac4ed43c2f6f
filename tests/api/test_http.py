"""HTTP API: every endpoint through FastAPI's TestClient, and the bad inputs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.api.kit import client_for, make_memory


@pytest.fixture
def client(tmp_path: Path):
    mem = make_memory(tmp_path)
    with client_for(mem) as c:
        yield c
    mem.close()


def remember(client, text: str, **fields) -> str:
    r = client.post("/v1/memories", json={"text": text, **fields})
    assert r.status_code in (200, 201), r.text
    return r.json()["knowledge_id"]


def test_remember_then_read_and_idempotent_rewrite(client) -> None:
    r = client.post(
        "/v1/memories",
        json={"text": "Deploys go out on Tuesdays", "scope": ["team:ops"], "tags": ["deploy"],
              "type": "KT-DECISION"},
    )
    assert r.status_code == 201
    body = r.json()
    assert body["created"] is True and body["status"] == 201
    again = client.post(
        "/v1/memories",
        json={"text": "Deploys go out on Tuesdays", "scope": ["team:ops"], "tags": ["deploy"],
              "type": "KT-DECISION"},
    )
    assert again.status_code == 200
    assert again.json()["knowledge_id"] == body["knowledge_id"]
    got = client.get(f"/v1/memories/{body['knowledge_id']}").json()
    assert got["amf"]["type"] == "KT-DECISION"
    assert got["amf"]["meta"]["project_scope"] == ["team:ops"]
    assert got["state"]["lifecycle"] == "active"


def test_sensitive_is_redacted_unless_revealed(client) -> None:
    kid = remember(client, "the vault PIN is 4711", sensitive=True)
    hidden = client.get(f"/v1/memories/{kid}").json()
    assert "4711" not in json.dumps(hidden["amf"])
    shown = client.get(f"/v1/memories/{kid}", params={"reveal": "true"}).json()
    assert "4711" in json.dumps(shown["amf"])


def test_list_filters_and_cursor_pagination(client) -> None:
    ids = {remember(client, f"note number {i}", scope=["p:a" if i % 2 else "p:b"],
                    tags=["even"] if i % 2 == 0 else None) for i in range(7)}
    seen: list[str] = []
    after = None
    pages = 0
    while True:
        params = {"limit": 3, **({"after": after} if after else {})}
        page = client.get("/v1/memories", params=params).json()
        seen.extend(it["knowledge_id"] for it in page["items"])
        pages += 1
        after = page["next_after"]
        if after is None:
            break
    assert pages == 3
    assert set(seen) == ids and len(seen) == len(ids)
    only_a = client.get("/v1/memories", params={"scope": "p:a"}).json()["items"]
    assert {it["amf"]["meta"]["project_scope"][0] for it in only_a} == {"p:a"}
    assert len(only_a) == 3
    even = client.get("/v1/memories", params={"tag": "even"}).json()["items"]
    assert len(even) == 4
    facts = client.get("/v1/memories", params={"type": "KT-PITFALL"}).json()["items"]
    assert facts == []


def test_supersede_invalidate_purge_lifecycle(client) -> None:
    old = remember(client, "the API port is 8000")
    r = client.post(f"/v1/memories/{old}/supersede", json={"text": "the API port is 8765"})
    assert r.status_code == 201
    new = r.json()["knowledge_id"]
    assert client.get(f"/v1/memories/{old}").json()["state"]["superseded_by"] == new
    listed = client.get("/v1/memories", params={"lifecycle": "superseded"}).json()["items"]
    assert [it["knowledge_id"] for it in listed] == [old]

    r = client.post(f"/v1/memories/{new}/invalidate", json={"reason": "port moved again"})
    assert r.status_code == 200 and r.json()["status"] == 204
    state = client.get(f"/v1/memories/{new}").json()["state"]
    assert state["lifecycle"] == "invalidated" and state["reason"] == "port moved again"

    r = client.post(f"/v1/memories/{new}/purge", json={"reason": "gdpr"})
    assert r.status_code == 200
    gone = client.get(f"/v1/memories/{new}")
    assert gone.status_code == 410 and gone.json()["status"] == 410
    assert client.post(f"/v1/memories/{old}/purge").status_code == 200  # body is optional


def test_recall_query_context_outcomes(client) -> None:
    kid = remember(client, "pytest fixtures live in conftest.py", type="KT-PATTERN",
                   sample_size=3, scope=["proj:x"])
    remember(client, "the office coffee machine is on floor 3")
    r = client.post("/v1/recall", json={"query": "where do pytest fixtures go", "k": 1})
    assert r.status_code == 200
    results = r.json()["results"]
    assert results[0]["knowledge_id"] == kid and results[0]["score"] > 0

    scoped = client.post("/v1/recall", json={"query": "coffee", "scope": ["proj:x"]}).json()
    assert all("proj:x" in h["amf"]["meta"]["project_scope"] or
               "*" in h["amf"]["meta"]["project_scope"] for h in scoped["results"])

    q = client.post("/v1/query", json={"amql": 'RECALL WHERE type = "KT-PATTERN"'})
    assert q.status_code == 200
    assert [row["knowledge_id"] for row in q.json()["results"]] == [kid]

    c = client.post("/v1/context", json={"task": "write a pytest fixture", "budget_tokens": 8000})
    assert c.status_code == 200
    assert c.json()["confirmation"].startswith("[AMCP")
    assert any(it["knowledge_id"] == kid for it in c.json()["pack"]["items"])

    o = client.post("/v1/outcomes", json={"knowledge_ids": [kid], "result": "success"})
    assert o.status_code == 200
    update = o.json()["updates"][0]
    assert update["knowledge_id"] == kid and update["weight"] > update["previous"]


def test_export_import_round_trip(tmp_path: Path, client) -> None:
    a = remember(client, "alpha fact")
    b = remember(client, "beta fact")
    client.post(f"/v1/memories/{a}/invalidate", json={"reason": "wrong"})
    r = client.get("/v1/export")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("application/x-ndjson")
    lines = r.content.splitlines()
    assert json.loads(lines[0])["amcp_export"] == 1
    assert "amcp_export_end" in json.loads(lines[-1])

    other = make_memory(tmp_path, "other.db")
    with client_for(other) as c2:
        imp = c2.post("/v1/import", content=r.content,
                      headers={"content-type": "application/x-ndjson"})
        assert imp.status_code == 200, imp.text
        rep = imp.json()
        assert rep["created"] == 2 and rep["complete"] is True and rep["errors"] == []
        assert c2.get(f"/v1/memories/{a}").json()["state"]["lifecycle"] == "invalidated"
        assert c2.get(f"/v1/memories/{b}").json()["amf"]["annotation"]["natural_language"] == (
            "beta fact")
        again = c2.post("/v1/import", content=r.content).json()
        assert again["created"] == 0 and again["already"] == 2
    other.close()


def test_malformed_ndjson_line_is_named_and_nothing_is_stored(tmp_path: Path, client) -> None:
    remember(client, "one record")
    good = client.get("/v1/export").content.splitlines(keepends=True)
    other = make_memory(tmp_path, "other.db")
    with client_for(other) as c2:
        bad = b"".join([good[0], good[1], b"{not json\n", *good[2:]])
        r = c2.post("/v1/import", content=bad)
        assert r.status_code == 400
        assert r.json()["field"] == "line 3" and "line 3" in r.json()["error"]
        assert c2.get("/v1/health").json()["records"] == 0
        r = c2.post("/v1/import", content=b"[1, 2]\n")
        assert r.status_code == 400 and r.json()["field"] == "line 1"
        r = c2.post("/v1/import", content=b'{"amf": {"type": "KT-FACT"}}\n')
        assert r.status_code == 400 and r.json()["field"] == "line 1"
    other.close()


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/v1/memories", {"text": 42}, "text"),
        ("/v1/memories", {}, "text"),
        ("/v1/memories", {"text": "x", "confidence": 2}, "confidence"),
        ("/v1/memories", {"text": "x", "type": "KT-NOPE"}, "type"),
        ("/v1/memories", {"text": "x", "scope": []}, "scope"),
        ("/v1/memories", {"text": "x", "sensitive": "yes"}, "sensitive"),
        ("/v1/memories", {"text": "x", "surprise": 1}, "surprise"),
        ("/v1/recall", {"query": "x", "k": 0}, "k"),
        ("/v1/recall", {"query": ""}, "query"),
        ("/v1/context", {"task": "t", "budget_tokens": -1}, "budget_tokens"),
        ("/v1/outcomes", {"knowledge_ids": [], "result": "success"}, "knowledge_ids"),
        ("/v1/outcomes", {"knowledge_ids": ["K-x"], "result": "great"}, "result"),
        ("/v1/query", {"amql": 7}, "amql"),
    ],
)
def test_bad_inputs_are_400_naming_the_field(client, path, body, field) -> None:
    r = client.post(path, json=body)
    assert r.status_code == 400, r.text
    problem = r.json()
    assert problem["status"] == 400 and problem["field"] == field and problem["error"]
    assert client.get("/v1/health").json()["records"] == 0


def test_lone_surrogate_is_400_not_500(client) -> None:
    r = client.post("/v1/memories", content=b'{"text": "a\\ud800b"}',
                    headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["field"] == "text"


def test_errors_from_memory_carry_amcp_status(client) -> None:
    r = client.get("/v1/memories/K-doesnotexist")
    assert r.status_code == 404 and r.json()["status"] == 404
    r = client.post("/v1/query", json={"amql": "RECALL WHERE"})
    assert r.status_code == 400 and r.json()["field"] == "amql"
    r = client.post("/v1/outcomes", json={"knowledge_ids": ["K-nothing"], "result": "failure"})
    assert r.status_code == 404
    kid = remember(client, "v1")
    assert client.post(f"/v1/memories/{kid}/supersede", json={"text": "v2"}).status_code == 201
    r = client.post(f"/v1/memories/{kid}/supersede", json={"text": "v3"})
    assert r.status_code == 409 and r.json()["status"] == 409
    assert client.post("/v1/memories", content=b"{", headers={
        "content-type": "application/json"}).status_code == 400
    r = client.get("/v1/nowhere")
    assert r.status_code == 404 and r.json()["status"] == 404


def test_huge_bodies_are_refused_with_413(tmp_path: Path) -> None:
    mem = make_memory(tmp_path)
    with client_for(mem, max_body=10_000, max_import=20_000) as c:
        r = c.post("/v1/memories", json={"text": "x" * 20_000})
        assert r.status_code == 413 and r.json()["status"] == 413

        def chunks():
            yield b'{"text": "'
            for _ in range(50):
                yield b"y" * 1000
            yield b'"}'

        r = c.post("/v1/memories", content=chunks(), headers={"content-type": "application/json"})
        assert r.status_code == 413
        r = c.post("/v1/import", content=b"{}\n" * 10_000)
        assert r.status_code == 413
        # A memory longer than the schema allows is a 400 even under the byte cap.
    with client_for(mem) as c:
        r = c.post("/v1/memories", json={"text": "x" * 40_000})
        assert r.status_code == 400 and r.json()["field"] == "text"
        assert c.get("/v1/health").json()["records"] == 0
    mem.close()


def test_openapi_document(client) -> None:
    doc = client.get("/openapi.json").json()
    paths = doc["paths"]
    for path in ("/v1/memories", "/v1/memories/{knowledge_id}", "/v1/recall", "/v1/query",
                 "/v1/context", "/v1/outcomes", "/v1/export", "/v1/import", "/v1/health",
                 "/v1/memories/{knowledge_id}/supersede", "/v1/memories/{knowledge_id}/invalidate",
                 "/v1/memories/{knowledge_id}/purge"):
        assert path in paths
    assert "422" not in json.dumps(doc["paths"])
    assert "application/x-ndjson" in paths["/v1/import"]["post"]["requestBody"]["content"]
    assert "securitySchemes" not in doc.get("components", {})


def test_a_single_scope_string_is_accepted_as_a_list(client) -> None:
    res = client.post("/v1/memories", json={"text": "one scope as text", "scope": "team:a"})
    assert res.status_code == 201, res.text
    kid = res.json()["knowledge_id"]
    assert client.get(f"/v1/memories/{kid}").json()["amf"]["meta"]["project_scope"] == ["team:a"]
