"""The coding-agent hooks' routes (``POST /v1/hooks/{op}``): token, input checks, answers."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.api.kit import bearer, client_for, make_memory

from amcp.agent.hooks.nodehttp import TOKEN_HEADER

TOKEN = "h" * 43


def test_routes_exist_only_with_a_hook_token(tmp_path: Path) -> None:
    with make_memory(tmp_path) as mem, client_for(mem) as client:
        r = client.post("/v1/hooks/user-scopes", json={}, headers={TOKEN_HEADER: TOKEN})
        assert r.status_code in (404, 405)


def test_token_is_required_and_compared(tmp_path: Path) -> None:
    with make_memory(tmp_path) as mem, client_for(mem, hook_token=TOKEN) as client:
        assert client.post("/v1/hooks/user-scopes", json={}).status_code == 401
        r = client.post("/v1/hooks/user-scopes", json={}, headers={TOKEN_HEADER: TOKEN[:-1]})
        assert r.status_code == 401
        # An API bearer token is not the hook token.
        r = client.post("/v1/hooks/user-scopes", json={}, headers=bearer(TOKEN))
        assert r.status_code == 401
        r = client.post("/v1/hooks/user-scopes", json={}, headers={TOKEN_HEADER: TOKEN})
        assert r.status_code == 200 and r.json() == {"scopes": []}
        assert not any("/v1/hooks" in p for p in client.get("/openapi.json").json()["paths"])


def test_answers_and_writes(tmp_path: Path) -> None:
    h = {TOKEN_HEADER: TOKEN}
    with make_memory(tmp_path) as mem, client_for(mem, hook_token=TOKEN) as client:
        r = client.post("/v1/hooks/remember", headers=h, json={
            "text": "The parser needs Python 3.11", "type": "KT-FACT", "scope": "project:p",
            "kind": "fact", "tags": ["t"], "predicate": "EQUALS", "confidence": 0.9})
        assert r.status_code == 200, r.text
        kid = r.json()["knowledge_id"]
        assert mem.read([kid])[0].record.text == "The parser needs Python 3.11"
        mem.remember("User likes short answers", scope="user:bob", kind="preference")
        assert client.post("/v1/hooks/user-scopes", headers=h, json={}).json() == {
            "scopes": ["user:bob"]}
        lines = client.post("/v1/hooks/pointers", headers=h,
                            json={"scopes": ["project:p"], "limit": 5}).json()["lines"]
        assert [ln[0] for ln in lines] == [kid]
        start = client.post("/v1/hooks/session-start", headers=h, json={
            "scope": "project:p", "limit": 5, "kinds": ["preference"]}).json()
        assert start["user_scopes"] == ["user:bob"]
        assert [ln[0] for ln in start["project"]] == [kid]
        assert [ln[4] for ln in start["preferences"]] == ["User likes short answers"]
        lines = client.post("/v1/hooks/recall", headers=h, json={
            "query": "parser python", "scopes": ["project:p"], "k": 3}).json()["lines"]
        assert lines[0][:3] == [kid, "KT-FACT", "project:p"]
        # "relevant": the prompt hook's test (two shared content words) applied by the node.
        one_word = {"query": "parser zebra", "scopes": ["project:p"], "k": 3}
        assert client.post("/v1/hooks/recall", headers=h, json=one_word).json()["lines"]
        assert client.post("/v1/hooks/recall", headers=h,
                           json={**one_word, "relevant": True}).json()["lines"] == []
        r = client.post("/v1/hooks/capture", headers=h, json={
            "prompt": "From now on always use pytest for tests.", "session": "s",
            "project_scope": "project:p", "user_scope": None})
        assert r.status_code == 200 and r.json()["notes"][0].startswith("remembered K-")


@pytest.mark.parametrize(("op", "body"), [
    ("pointers", {"scopes": "project:p", "limit": 5}),
    ("pointers", {"scopes": ["project:p"], "limit": 0}),
    ("pointers", {"scopes": ["project:p"], "limit": True}),
    ("recall", {"query": 3, "scopes": [], "k": 3}),
    ("recall", {"query": "x", "scopes": [""], "k": 3}),
    ("remember", {"text": "x", "type": "KT-FACT", "scope": "p", "kind": "f",
                  "confidence": 2}),
    ("remember", {"text": "x", "type": "KT-FACT", "scope": "p", "kind": "f",
                  "extensions": []}),
    ("capture", {"prompt": None}),
    ("session-start", {"scope": 5, "limit": 5}),
    ("session-start", {"scope": "project:p", "limit": 5, "kinds": [1]}),
])
def test_bad_input_is_a_400(tmp_path: Path, op: str, body: dict[str, object]) -> None:
    with make_memory(tmp_path) as mem, client_for(mem, hook_token=TOKEN) as client:
        r = client.post(f"/v1/hooks/{op}", headers={TOKEN_HEADER: TOKEN}, json=body)
        assert r.status_code == 400, r.text


def test_unknown_op_and_non_object_body(tmp_path: Path) -> None:
    h = {TOKEN_HEADER: TOKEN}
    with make_memory(tmp_path) as mem, client_for(mem, hook_token=TOKEN) as client:
        assert client.post("/v1/hooks/nope", headers=h, json={}).status_code == 404
        assert client.post("/v1/hooks/recall", headers=h, json=[1]).status_code == 400
