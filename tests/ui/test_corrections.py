"""Corrections from the inspector: supersede, invalidate, purge; CSRF; concurrent edits."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from tests.ui.kit import field, make_memory, ui_client

from amcp.amf.types import Lifecycle
from amcp.memory import Memory


@pytest.fixture
def mem(tmp_path: Path) -> Memory:
    m = make_memory(tmp_path)
    yield m
    m.close()


def _form(c: TestClient, kid: str) -> tuple[str, str]:
    page = c.get(f"/ui/r/{kid}").text
    return field(page, "csrf"), field(page, "base")


def test_edit_is_a_supersede_with_lineage(mem: Memory) -> None:
    kid = mem.remember("Deploys go out on Tuesdays", scope=["team:ops"]).knowledge_id
    with ui_client(mem) as c:
        csrf, base = _form(c, kid)
        r = c.post(f"/ui/r/{kid}/supersede", follow_redirects=False,
                   data={"csrf": csrf, "base": base, "text": "Deploys go out on Wednesdays"})
        assert r.status_code == 303 and r.headers["location"].endswith("?done=superseded")
        new = r.headers["location"].split("/ui/r/")[1].split("?")[0]
        page = c.get(r.headers["location"]).text
        assert "Saved as a new version" in page
        assert "Wednesdays" in page and "Tuesdays" in page  # both versions on the timeline
        old_page = c.get(f"/ui/r/{kid}").text
        assert ">superseded<" in old_page and new[:14] in old_page
        assert ">supersede<" in old_page  # the signed change-log entry of the edit
    assert mem.get(kid).state.lifecycle is Lifecycle.SUPERSEDED
    assert mem.get(new).record is not None
    assert mem.get(new).record.causal.supersedes == kid  # type: ignore[union-attr]
    assert mem.store.verify().ok


def test_concurrent_edits_second_gets_a_conflict_nothing_lost(mem: Memory) -> None:
    kid = mem.remember("The office opens at 9", scope=["team:a"]).knowledge_id
    with ui_client(mem) as alice, ui_client(mem) as bob:
        a_csrf, a_base = _form(alice, kid)
        b_csrf, b_base = _form(bob, kid)
        first = alice.post(f"/ui/r/{kid}/supersede", follow_redirects=False,
                           data={"csrf": a_csrf, "base": a_base, "text": "The office opens at 8"})
        assert first.status_code == 303
        second = bob.post(f"/ui/r/{kid}/supersede",
                          data={"csrf": b_csrf, "base": b_base, "text": "The office opens at 10"})
        assert second.status_code == 409
        assert "changed after this page was loaded" in second.text
        assert "The office opens at 10" in second.text  # bob's text is handed back
        new = first.headers["location"].split("/ui/r/")[1].split("?")[0]
        assert new[:14] in second.text or new in second.text  # and where the edit went
        again = bob.post(f"/ui/r/{kid}/forget",
                         data={"csrf": b_csrf, "base": b_base, "reason": "stale form"})
        assert again.status_code == 409
    assert mem.get(new).record.text == "The office opens at 8"  # type: ignore[union-attr]
    assert mem.get(kid).state.superseded_by == new
    assert mem.stats().records == 2  # exactly one new version


def test_forms_need_their_csrf_token(mem: Memory) -> None:
    kid = mem.remember("keep this", scope=["team:a"]).knowledge_id
    with ui_client(mem) as c:
        _csrf, base = _form(c, kid)
        for data in ({"base": base, "text": "forged"}, {"csrf": "forged", "base": base,
                                                         "text": "forged"}):
            r = c.post(f"/ui/r/{kid}/supersede", data=data)
            assert r.status_code == 403 and "CSRF" in r.text
        with ui_client(mem) as other:  # another browser's token is not this session's
            other_csrf, _ = _form(other, kid)
        r = c.post(f"/ui/r/{kid}/purge", data={"csrf": other_csrf, "confirm": kid[:10]})
        assert r.status_code == 403
        cross = c.post(f"/ui/r/{kid}/forget", data={"csrf": _csrf, "base": base, "reason": "x"},
                       headers={"Origin": "https://attacker.example"})
        assert cross.status_code == 403
    assert mem.get(kid).state.lifecycle is Lifecycle.ACTIVE


def test_forget_needs_a_reason(mem: Memory) -> None:
    kid = mem.remember("wrong fact", scope=["team:a"]).knowledge_id
    with ui_client(mem) as c:
        csrf, base = _form(c, kid)
        blank = c.post(f"/ui/r/{kid}/forget", data={"csrf": csrf, "base": base, "reason": "  "})
        assert blank.status_code == 400 and "say why" in blank.text
        ok = c.post(f"/ui/r/{kid}/forget", data={"csrf": csrf, "base": base,
                                                  "reason": "it was wrong"})
        assert ok.status_code == 200 and "Invalidated" in ok.text
        assert "it was wrong" in ok.text
    assert mem.get(kid).state.lifecycle is Lifecycle.INVALIDATED


def test_purge_needs_the_typed_confirmation(mem: Memory) -> None:
    kid = mem.remember("my home address is 1 Main St", scope=["user:a"]).knowledge_id
    with ui_client(mem) as c:
        csrf, _base = _form(c, kid)
        for typed in ("", "yes", kid[:9], "PURGE"):
            r = c.post(f"/ui/r/{kid}/purge", data={"csrf": csrf, "confirm": typed})
            assert r.status_code == 400 and kid[:10] in r.text, typed
        assert mem.get(kid).record is not None
        done = c.post(f"/ui/r/{kid}/purge", data={"csrf": csrf, "confirm": kid[:10],
                                                   "reason": "user asked"})
        assert done.status_code == 410 and "1 Main St" not in done.text
    found = mem.store.get(kid)
    assert found is not None and found.record is None and found.state.reason == "user asked"
    assert mem.store.verify().ok


def test_edit_refuses_empty_text_and_bad_marker(mem: Memory) -> None:
    kid = mem.remember("stays as is", scope=["team:a"]).knowledge_id
    with ui_client(mem) as c:
        csrf, base = _form(c, kid)
        assert c.post(f"/ui/r/{kid}/supersede",
                      data={"csrf": csrf, "base": base, "text": " "}).status_code == 400
        assert c.post(f"/ui/r/{kid}/supersede",
                      data={"csrf": csrf, "base": "x", "text": "new"}).status_code == 400
        same = c.post(f"/ui/r/{kid}/supersede",
                      data={"csrf": csrf, "base": base, "text": "stays as is"})
        assert same.status_code == 400 and "unchanged" in same.text
    assert mem.get(kid).state.lifecycle is Lifecycle.ACTIVE
