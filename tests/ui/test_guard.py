"""The REST API's browser-facing defences (amcp.api.guard): Host, cross-site writes, CSP."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.ui.kit import make_memory, ui_client

from amcp.api.guard import HostPolicy, host_name


@pytest.mark.parametrize(
    ("header", "name"),
    [("127.0.0.1:8765", "127.0.0.1"), ("[::1]:8765", "::1"), ("LocalHost", "localhost"),
     ("example.com.", "example.com"), ("attacker.example:80", "attacker.example")],
)
def test_host_name(header: str, name: str) -> None:
    assert host_name(header) == name


def test_host_policy() -> None:
    hosts = HostPolicy(["memory.internal"])
    for ok in ("127.0.0.1:8765", "[::1]", "10.0.0.5", "localhost:1", "app.localhost",
               "memory.internal:8765"):
        assert hosts.allows(ok), ok
    for bad in ("attacker.example", "127.0.0.1.nip.io", "", None, "localhost.attacker.example"):
        assert not hosts.allows(bad), bad


def test_forged_host_is_refused_before_any_route(tmp_path: Path) -> None:
    """DNS rebinding: a page on attacker.example re-pointed at 127.0.0.1 sends its own name."""
    mem = make_memory(tmp_path)
    mem.remember("the launch code is 0000", scope=["team:a"], sensitive=True)
    with ui_client(mem) as c:
        r = c.get("/v1/export?include_sensitive=true", headers={"Host": "attacker.example"})
        assert r.status_code == 421
        assert "0000" not in r.text and "attacker.example" in r.json()["error"]
        for path in ("/ui", "/docs", "/openapi.json", "/v1/health"):
            assert c.get(path, headers={"Host": "attacker.example:8765"}).status_code == 421
        assert c.get("/v1/health").status_code == 200  # the same request on a loopback Host
    mem.close()


def test_allowed_host_is_answered(tmp_path: Path) -> None:
    mem = make_memory(tmp_path)
    with ui_client(mem, allowed_hosts=["memory.internal"]) as c:
        assert c.get("/v1/health", headers={"Host": "memory.internal:8765"}).status_code == 200
        assert c.get("/v1/health", headers={"Host": "other.internal"}).status_code == 421
    mem.close()


def test_cross_site_text_plain_import_is_refused(tmp_path: Path) -> None:
    """A page may POST text/plain anywhere without a CORS preflight: the import refuses it."""
    src = make_memory(tmp_path, "src.db")
    src.remember("planted by a web page", scope=["team:a"])
    with ui_client(src) as c:
        dump = c.get("/v1/export").content
    dst = make_memory(tmp_path, "dst.db")
    with ui_client(dst) as c:
        plain = c.post("/v1/import", content=dump, headers={"Content-Type": "text/plain"})
        assert plain.status_code == 415
        cross = c.post("/v1/import", content=dump, headers={
            "Content-Type": "application/x-ndjson", "Origin": "https://attacker.example"})
        assert cross.status_code == 403 and "Origin" in cross.json()["error"]
        fetch = c.post("/v1/import", content=dump, headers={"Sec-Fetch-Site": "cross-site"})
        assert fetch.status_code == 403
        null = c.post("/v1/import", content=dump, headers={"Origin": "null"})
        assert null.status_code == 403
        assert dst.stats().records == 0  # nothing of the refused requests was stored
        ok = c.post("/v1/import", content=dump, headers={
            "Content-Type": "application/x-ndjson", "Origin": "http://127.0.0.1"})
        assert ok.status_code == 200 and ok.json()["created"] == 1
    src.close()
    dst.close()


@pytest.mark.parametrize("ctype", ["text/plain;charset=UTF-8", "application/x-www-form-urlencoded",
                                   "multipart/form-data; boundary=x"])
def test_simple_bodies_refused_on_every_api_write(tmp_path: Path, ctype: str) -> None:
    mem = make_memory(tmp_path)
    kid = mem.remember("keep me", scope=["team:a"]).knowledge_id
    with ui_client(mem) as c:
        for path, body in (("/v1/memories", '{"text": "forged"}'),
                           (f"/v1/memories/{kid}/purge", "{}"),
                           ("/v1/recall", '{"query": "keep"}')):
            r = c.post(path, content=body, headers={"Content-Type": ctype})
            assert r.status_code == 415, path
        assert mem.get(kid).record is not None
        assert mem.stats().records == 1
    mem.close()


def test_same_origin_and_agent_writes_still_work(tmp_path: Path) -> None:
    mem = make_memory(tmp_path)
    with ui_client(mem) as c:
        assert c.post("/v1/memories", json={"text": "from curl"}).status_code == 201
        r = c.post("/v1/memories", json={"text": "from the same origin"},
                   headers={"Origin": "http://127.0.0.1", "Sec-Fetch-Site": "same-origin"})
        assert r.status_code == 201
    mem.close()


def test_strict_csp_on_every_answer(tmp_path: Path) -> None:
    mem = make_memory(tmp_path)
    with ui_client(mem) as c:
        for path in ("/ui", "/docs", "/v1/health", "/ui/static/ui.css", "/no-such-page"):
            r = c.get(path)
            csp = r.headers["content-security-policy"]
            assert "script-src 'self'" in csp and "unsafe-inline" not in csp, path
            assert "frame-ancestors 'none'" in csp
            assert r.headers["x-content-type-options"] == "nosniff"
        refused = c.get("/ui", headers={"Host": "attacker.example"})
        assert "content-security-policy" in refused.headers
    mem.close()


def test_docs_are_local(tmp_path: Path) -> None:
    """/docs used to load Swagger UI from a CDN; now every operation is on the page itself."""
    mem = make_memory(tmp_path)
    with ui_client(mem) as c:
        html = c.get("/docs").text
        assert "cdn." not in html and "https://" not in html
        for op in ("POST /v1/memories", "POST /v1/import", "GET /v1/export", "RememberIn"):
            assert op in html
        assert c.get("/redoc").status_code == 404
    mem.close()
