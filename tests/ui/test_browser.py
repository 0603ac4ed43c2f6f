"""The inspector in a real browser (system chromium via Playwright): the issue's flows,
no external requests, page weight, no CSP violations, axe-core, a screenshot per page."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from tests.ui.conftest import Served
from tests.ui.kit import XSS, make_memory

from amcp.amf.types import Lifecycle
from amcp.api.http import create_app
from amcp.memory import Memory

MAX_PAGE_BYTES = 200 * 1024  # the page-weight budget, uncompressed


@dataclass
class Watch:
    """Every request a page makes and any CSP complaint the browser logs."""

    base: str
    requests: list[Any] = field(default_factory=list)
    csp: list[str] = field(default_factory=list)

    def attach(self, page: Any) -> None:
        # A lambda: playwright wraps handlers and cannot wrap a bound builtin method.
        page.on("request", lambda req: self.requests.append(req))  # noqa: PLW0108
        page.on("console", lambda msg: self.csp.append(msg.text)
                if "Content Security Policy" in msg.text else None)

    def weight(self) -> int:
        """Bytes of every response body since the last reset (no compression is used)."""
        total = 0
        for req in self.requests:
            resp = req.response()
            if resp is not None:
                total += int(req.sizes()["responseBodySize"])
        return total

    def reset(self) -> None:
        self.requests.clear()

    def check(self) -> None:
        outside = [r.url for r in self.requests if not r.url.startswith(self.base)]
        assert not outside, f"external requests: {outside}"
        assert not self.csp, self.csp


@pytest.fixture
def seeded(tmp_path: Path) -> Iterator[tuple[Memory, dict[str, str]]]:
    mem = make_memory(tmp_path)
    ids = {
        "deploy": mem.remember("Deploys go out on Tuesdays after the 10:00 stand-up",
                               scope=["team:ops"], type="KT-DECISION", tags=["deploy"]).knowledge_id,
        "xss": mem.remember(f"Rendered safely: {XSS}", scope=["team:ops"]).knowledge_id,
        "other": mem.remember("Bob's payroll deploy runbook", scope=["team:pay"]).knowledge_id,
    }
    for i in range(30):
        mem.remember(f"Ops note {i}: rotate the deploy keys every {i + 1} weeks",
                     scope=["team:ops"])
    draft = mem.put(mem.compose("Maybe: staging is rebuilt nightly", scope=["team:ops"]),
                    lifecycle=Lifecycle.DRAFT)
    ids["draft"] = draft.knowledge_id
    yield mem, ids
    mem.close()


def _shot(page: Any, artifacts: Path, name: str) -> None:
    page.screenshot(path=str(artifacts / f"{name}.png"), full_page=True)


def _weigh(browser: Any, base: str, path: str) -> int:
    """Load ``url`` in a fresh context (empty cache): its whole weight in bytes, checked
    against the budget, with every request to this node only and no CSP complaint."""
    ctx = browser.new_context()
    page = ctx.new_page()
    watch = Watch(base)
    watch.attach(page)
    page.goto(base + path, wait_until="networkidle")
    weight = watch.weight()
    watch.check()
    ctx.close()
    assert weight <= MAX_PAGE_BYTES, f"{path}: {weight} bytes"
    return weight


def test_search_open_supersede_lineage(browser: Any, seeded: Any, artifacts: Path) -> None:
    from playwright.sync_api import expect

    mem, ids = seeded
    with Served(create_app(mem)) as srv:
        ctx = browser.new_context(viewport={"width": 1200, "height": 900})
        page = ctx.new_page()
        watch = Watch(srv.base)
        watch.attach(page)
        page.goto(srv.base + "/ui")
        _shot(page, artifacts, "search-empty")
        page.locator("#q").press_sequentially("when do we deploy", delay=20)
        expect(page).to_have_url(re.compile(r"q=when\+do\+we\+deploy"))
        page.wait_for_selector("details.why")  # recall results carry a score breakdown
        assert "Deploys go out on Tuesdays" in page.inner_text("#results")
        page.locator("details.why").first.click()
        _shot(page, artifacts, "search-results")
        page.click("text=Deploys go out on Tuesdays")
        page.wait_for_selector("h2#h-lineage")
        record_url = page.url
        _shot(page, artifacts, "record")
        page.fill("#edit-text", "Deploys go out on Wednesdays after the 10:00 stand-up")
        page.click("button:has-text('Save new version')")
        page.wait_for_selector("text=Saved as a new version")
        steps = page.locator("ol.timeline > li")
        assert steps.count() == 2
        assert "Tuesdays" in steps.nth(0).inner_text() and "superseded" in steps.nth(0).inner_text()
        assert "Wednesdays" in steps.nth(1).inner_text()
        _shot(page, artifacts, "record-superseded")
        page.goto(srv.base + f"/ui/r/{ids['xss']}")
        assert page.locator("blockquote.text").inner_text().endswith(XSS)  # shown as text
        assert page.locator("img[src=x]").count() == 0
        _shot(page, artifacts, "record-html-escaped")
        for name, path in (("store", "/ui/store"), ("queue", "/ui/queue"), ("docs", "/docs")):
            page.goto(srv.base + path)
            _shot(page, artifacts, name)
        page.goto(srv.base + "/ui/r/K-" + "0" * 64)
        assert "Not found" in page.inner_text("h1")
        _shot(page, artifacts, "not-found")
        watch.check()
        ctx.close()
        weights = {path: _weigh(browser, srv.base, path) for path in (
            "/ui", "/ui?q=deploy", record_url.removeprefix(srv.base), "/ui/store",
            "/ui/queue", "/docs")}
        print("page weights (bytes, uncompressed, empty cache):", weights)
    old = mem.get(ids["deploy"])
    assert old.state.lifecycle is Lifecycle.SUPERSEDED


def test_draft_rejected_from_the_queue(browser: Any, seeded: Any, artifacts: Path) -> None:
    mem, ids = seeded
    with Served(create_app(mem)) as srv:
        page = browser.new_page()
        page.goto(srv.base + "/ui/queue")
        assert "Drafts (1)" in page.inner_text("main")
        page.click("button:has-text('Reject')")
        page.wait_for_selector("text=Invalidated: kept with its reason")
        assert "Drafts (0)" in page.inner_text("main")
        _shot(page, artifacts, "queue-after-reject")
        page.close()
    assert mem.get(ids["draft"]).state.lifecycle is Lifecycle.INVALIDATED


def test_scoped_token_sees_nothing_else(browser: Any, seeded: Any, artifacts: Path) -> None:
    from playwright.sync_api import expect

    mem, ids = seeded
    app = create_app(mem, tokens={"ops-token": ["team:ops"], "admin": ["*"]})
    with Served(app) as srv:
        page = browser.new_page()
        page.goto(srv.base + "/ui")
        assert "Sign in" in page.inner_text("h1")
        _shot(page, artifacts, "login")
        page.fill("#token", "wrong-token")
        page.click("button:has-text('Sign in')")
        assert "not known" in page.inner_text("main")
        page.fill("#token", "ops-token")
        page.click("button:has-text('Sign in')")
        page.wait_for_selector("#q")
        page.locator("#q").press_sequentially("deploy runbook", delay=10)
        expect(page).to_have_url(re.compile(r"q=deploy\+runbook"))
        text = page.inner_text("#results")
        assert "payroll" not in text and "team:pay" not in text
        page.goto(srv.base + f"/ui/r/{ids['other']}")
        assert "Not found" in page.inner_text("h1")
        page.goto(srv.base + "/ui/store")
        assert "team:pay" not in page.inner_text("main")
        _shot(page, artifacts, "store-scoped")
        page.close()


PAGES = ("/ui", "/ui?q=deploy", "/ui/r/{deploy}", "/ui/store", "/ui/queue", "/docs",
         "/ui/r/K-missing")


def test_accessibility(browser: Any, seeded: Any, axe_source: str) -> None:
    """axe-core on every page: no serious or critical violations. The test's context
    bypasses the CSP only so that axe itself can be injected."""
    mem, ids = seeded
    with Served(create_app(mem)) as srv:
        ctx = browser.new_context(bypass_csp=True)
        page = ctx.new_page()
        report = {}
        for path in PAGES:
            page.goto(srv.base + path.format(**ids), wait_until="networkidle")
            page.add_script_tag(content=axe_source)
            found = page.evaluate("async () => (await axe.run(document)).violations"
                                  ".map(v => ({id: v.id, impact: v.impact, n: v.nodes.length}))")
            report[path] = found
        ctx.close()
    print("axe:", report)
    bad = {p: [v for v in vs if v["impact"] in ("serious", "critical")] for p, vs in report.items()}
    assert not any(bad.values()), bad
