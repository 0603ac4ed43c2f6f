"""Every inspector page through TestClient: content, escaping, the issue's bad inputs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from tests.ui.kit import XSS, field, make_memory, sign_in, ui_client

from amcp.amf.types import Lifecycle
from amcp.memory import Memory
from amcp.web.access import build_policy


@pytest.fixture
def mem(tmp_path: Path) -> Memory:
    m = make_memory(tmp_path)
    yield m
    m.close()


def _no_raw_markup(html: str) -> None:
    assert "<script>alert" not in html and "<img src=x" not in html
    assert 'onerror=alert(1)>"' not in html


def test_pages_answer(mem: Memory) -> None:
    kid = mem.remember("Deploys go out on Tuesdays", scope=["team:ops"], tags=["deploy"]).knowledge_id
    with ui_client(mem) as c:
        assert c.get("/", follow_redirects=False).headers["location"] == "/ui"
        home = c.get("/ui")
        assert home.status_code == 200 and "Deploys go out on Tuesdays" in home.text
        assert 'src="/ui/static/ui.js"' in home.text and "<script>" not in home.text
        record = c.get(f"/ui/r/{kid}").text
        for part in ("Provenance and verification", "verified", "(this node's key)", "Lineage",
                     "Change log entries naming this record", "<svg", "Full AMF record",
                     '&#34;knowledge_id&#34;: &#34;' + kid):
            assert part in record, part
        assert ">put<" in record  # the log entry of its write
        store = c.get("/ui/store").text
        assert "The change log verifies" in store and "team:ops" in store and "<svg" in store
        assert c.get("/ui/queue").status_code == 200
        assert c.get("/ui/static/ui.css").status_code == 200


def test_search_filters_and_breakdown(mem: Memory) -> None:
    mem.remember("Deploys go out on Tuesdays", scope=["team:ops"], type="KT-DECISION")
    mem.remember("Deploy freezes happen in December", scope=["team:pay"])
    old = mem.remember("Deploys used to go out on Mondays", scope=["team:ops"]).knowledge_id
    mem.invalidate(old, "changed in 2025")
    with ui_client(mem) as c:
        r = c.get("/ui/results", params={"q": "deploys"}).text
        assert "Tuesdays" in r and "December" in r and "Mondays" not in r
        assert "Score breakdown" in r and "lexical (BM25 rank)" in r and "recency" in r
        assert "trust (learned weight" in r and "vector (cosine rank)" in r
        ops = c.get("/ui/results", params={"q": "deploys", "scope": "team:ops"}).text
        assert "Tuesdays" in ops and "December" not in ops
        typed = c.get("/ui/results", params={"q": "deploys", "type": "KT-DECISION"}).text
        assert "Tuesdays" in typed and "December" not in typed
        gone = c.get("/ui/results", params={"q": "deploys", "lifecycle": "invalidated"}).text
        assert "Mondays" in gone and "Tuesdays" not in gone
        origin = c.get("/ui/results", params={"q": "deploys", "origin": "nobody-else"}).text
        assert "Nothing recalled" in origin
        later = c.get("/ui/results", params={"q": "deploys", "after": "2999-01-01"}).text
        assert "Nothing recalled" in later
        since = c.get("/ui/results", params={"q": "deploys", "after": "2000-01-01",
                                              "before": "2999-12-31"}).text
        assert "Tuesdays" in since
        wrong = c.get("/ui/results", params={"q": "deploys", "after": "yesterday"}).text
        assert 'class="error"' in wrong
        bad = c.get("/ui/results", params={"q": "deploys", "type": "KT-BOGUS"})
        assert bad.status_code == 200 and "unknown type" in bad.text
        assert c.get("/ui", params={"lifecycle": "nonsense"}).status_code == 400


def test_html_in_records_is_escaped_everywhere(mem: Memory) -> None:
    kid = mem.remember(XSS, scope=[f"team:{XSS}"], tags=[XSS], subject=XSS).knowledge_id
    draft = mem.put(mem.compose(f"draft {XSS}", scope=["team:a"]), lifecycle=Lifecycle.DRAFT)
    with ui_client(mem) as c:
        pages = [c.get("/ui").text, c.get("/ui/results", params={"q": "alert"}).text,
                 c.get("/ui", params={"q": XSS}).text, c.get(f"/ui/r/{kid}").text,
                 c.get("/ui/store").text, c.get("/ui/queue").text,
                 c.get(f"/ui/r/{draft.knowledge_id}").text]
        for html in pages:
            _no_raw_markup(html)
        assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in pages[3]
        page = pages[3]
        r = c.post(f"/ui/r/{kid}/forget", data={
            "csrf": field(page, "csrf"), "base": field(page, "base"), "reason": XSS})
        _no_raw_markup(r.text)
        assert "&lt;script&gt;" in r.text  # the reason, shown escaped
        _no_raw_markup(c.get(f"/ui/r/{kid}/nothing").text)
        _no_raw_markup(c.get(f"/ui/r/{XSS}").text)


def test_unknown_and_purged_records(mem: Memory) -> None:
    kid = mem.remember("secret plan", scope=["team:a"]).knowledge_id
    with ui_client(mem) as c:
        r = c.get("/ui/r/K-" + "0" * 64)
        assert r.status_code == 404 and "no record" in r.text
        assert c.get("/ui/r/not-an-id").status_code == 404
        mem.purge(kid, "asked to forget")
        gone = c.get(f"/ui/r/{kid}")
        assert gone.status_code == 410 and "secret plan" not in gone.text
        assert "tombstone" in gone.text
        assert "secret plan" not in c.get("/ui", params={"lifecycle": "any"}).text


def test_huge_record(mem: Memory) -> None:
    text = "word " * 60_000  # 300,000 characters
    kid = mem.remember(text, scope=["team:a"]).knowledge_id
    with ui_client(mem) as c:
        rows = c.get("/ui").text
        assert len(rows) < 20_000  # the list shows a snippet
        page = c.get(f"/ui/r/{kid}")
        assert page.status_code == 200 and text.strip() in page.text


def _restricted(tmp_path: Path) -> tuple[Memory, dict[str, list[str]]]:
    m = make_memory(tmp_path, "r.db")
    return m, {"alice-token": ["team:a"], "admin-token": ["*"]}


def test_token_sees_only_its_scopes(tmp_path: Path) -> None:
    m, tokens = _restricted(tmp_path)
    mine = m.remember("alice's deploy notes", scope=["team:a"]).knowledge_id
    theirs = m.remember("bob's deploy notes", scope=["team:b"]).knowledge_id
    purged = m.remember("alice's purged deploy", scope=["team:a"]).knowledge_id
    m.purge(purged)
    with ui_client(m, tokens=tokens) as c:
        first = c.get("/ui")
        assert first.status_code == 401 and "Sign in" in first.text
        sign_in(c, "alice-token")
        assert "alice&#39;s deploy" in c.get("/ui/results", params={"q": "deploy"}).text
        for html in (c.get("/ui/results", params={"q": "deploy"}).text, c.get("/ui").text,
                     c.get("/ui/store").text, c.get("/ui/queue").text):
            assert "bob" not in html and "team:b" not in html
        assert "Your token sees the counts of its own scopes only" in c.get("/ui/store").text
        assert c.get(f"/ui/r/{theirs}").status_code == 404
        assert c.get(f"/ui/r/{purged}").status_code == 404  # restricted: purged is unknown
        assert c.get("/ui/results", params={"q": "deploy", "scope": "team:b"}).status_code == 200
        assert "not allowed" in c.get("/ui/results", params={"q": "x", "scope": "team:b"}).text
        page = c.get(f"/ui/r/{mine}").text
        r = c.post(f"/ui/r/{theirs}/forget", data={
            "csrf": field(page, "csrf"), "base": "0", "reason": "not yours"})
        assert r.status_code == 404
        assert m.get(theirs).state.lifecycle is Lifecycle.ACTIVE
    m.close()


def test_unknown_and_revoked_tokens(tmp_path: Path) -> None:
    m, tokens = _restricted(tmp_path)
    with ui_client(m, tokens=tokens) as c:
        page = c.get("/ui/login")
        r = c.post("/ui/login", data={"csrf": field(page.text, "csrf"), "token": "guess"})
        assert r.status_code == 401 and "not known" in r.text
        stale = c.post("/ui/login", data={"csrf": "forged", "token": "alice-token"},
                       follow_redirects=False)
        assert stale.headers["location"] == "/ui/login?stale=1"
        sign_in(c, "alice-token")
        assert c.get("/ui").status_code == 200
        # Revoke alice: the node's policy no longer names her token.
        c.app.state.ui.sessions.policy = build_policy(None, {"admin-token": ["*"]})
        after = c.get("/ui")
        assert after.status_code == 401 and "Sign in" in after.text
        assert c.get("/ui/store").status_code == 401  # the session was dropped
    m.close()


def test_sign_out(tmp_path: Path) -> None:
    m, tokens = _restricted(tmp_path)
    with ui_client(m, tokens=tokens) as c:
        sign_in(c, "admin-token")
        page = c.get("/ui").text
        assert "Sign out" in page
        c.post("/ui/logout", data={"csrf": field(page, "csrf")})
        assert c.get("/ui").status_code == 401
    m.close()


def test_pages_count_no_access(mem: Memory) -> None:
    kid = mem.remember("inspected, not used", scope=["team:a"]).knowledge_id
    with ui_client(mem) as c:
        c.get(f"/ui/r/{kid}")
        c.get("/ui/results", params={"q": "inspected"})
    assert mem.get(kid).state.access_count == 0


def test_draft_queue_reject_and_confirm(mem: Memory) -> None:
    """Memory.confirm exists now (the memory firewall's review): the queue confirms."""
    draft = mem.put(mem.compose("maybe true", scope=["team:a"]), lifecycle=Lifecycle.DRAFT)
    other = mem.put(mem.compose("maybe false", scope=["team:a"]), lifecycle=Lifecycle.DRAFT)
    with ui_client(mem) as c:
        q = c.get("/ui/queue").text
        assert "Drafts (2)" in q and "maybe true" in q and "Quarantined (0)" in q
        assert "confirming them waits" not in q
        bases = dict(re.findall(r'/ui/queue/(K-[0-9a-f]+)/confirm".*?name="base" value="(\d+)"',
                                q, re.S))
        confirm = c.post(f"/ui/queue/{draft.knowledge_id}/confirm", follow_redirects=False,
                         data={"csrf": field(q, "csrf"), "base": bases[draft.knowledge_id]})
        assert confirm.status_code == 303, confirm.text
        assert mem.get(draft.knowledge_id).state.lifecycle is Lifecycle.ACTIVE
        q = c.get("/ui/queue").text
        base = re.search(r'name="base" value="(\d+)"', q)
        assert base is not None
        r = c.post(f"/ui/r/{other.knowledge_id}/forget", follow_redirects=False, data={
            "csrf": field(q, "csrf"), "base": base.group(1), "from": "queue",
            "reason": "rejected in review"})
        assert r.headers["location"].startswith("/ui/queue?done=invalidated")
        assert "Drafts (0)" in c.get("/ui/queue").text
    assert mem.get(other.knowledge_id).state.reason == "rejected in review"


def test_weight_history_from_the_signed_log(mem: Memory) -> None:
    kid = mem.remember("Use the staging cluster for load tests", scope=["team:a"]).knowledge_id
    with ui_client(mem) as c:
        assert "No outcome has changed its weight yet" in c.get(f"/ui/r/{kid}").text
        mem.outcome([kid], "success")
        mem.outcome([kid], "failure")
        page = c.get(f"/ui/r/{kid}").text
        assert "Learned weight, round by round" in page and "round 2" in page
        assert page.count(">weight<") == 2  # the two log entries, in the change-log table


def test_quarantined_record_in_queue_and_store(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "q.db"
    m = Memory(path, embedder="hashing")
    kid = m.remember("will be edited behind amcp's back", scope=["team:a"]).knowledge_id
    m.remember("stays fine", scope=["team:a"])
    m.close()
    with sqlite3.connect(path) as db:  # a change outside amcp: the row no longer matches its seal
        db.execute("UPDATE records SET reason='edited' WHERE knowledge_id=?", (kid,))
    m = Memory(path, embedder="hashing")
    try:
        with ui_client(m) as c:
            assert "stays fine" in c.get("/ui").text
            assert "will be edited" not in c.get("/ui").text
            queue = c.get("/ui/queue").text
            assert "Quarantined (1)" in queue and kid in queue and "seal" in queue
            assert c.get(f"/ui/r/{kid}").status_code == 404
        with ui_client(m, tokens={"a": ["team:a"]}) as c:
            sign_in(c, "a")
            assert "Quarantined (0)" in c.get("/ui/queue").text  # restricted: not shown
    finally:
        m.close()
