"""The peers and sync-lag page (/ui/peers) over real replicating nodes: real sockets, real
stores, the node's own replicator, through TestClient and in the system chromium (flow, no
external requests, CSP, page weight, axe)."""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from tests.node.kit import FAST as FAST_RETRY
from tests.sync.kit import FAST, Node, cut, eventually, heal, start_node, stop_node
from tests.ui.conftest import Served
from tests.ui.kit import BASE, XSS, make_memory, sign_in, ui_client

from amcp.api.http import create_app
from amcp.node import connect
from amcp.session import NodeIdentity, NodeType
from amcp.sync.view import PeerRow
from amcp.ui.peers import lag_charts
from amcp.wire import MsgType

T = TypeVar("T")
CFG = replace(FAST, lag_sample_interval=0.2)  # a chart's worth of samples in a second
MAX_PAGE_BYTES = 200 * 1024


class Loop:
    """An event loop in its own thread, for nodes next to sync code (TestClient and
    playwright each keep the main thread's loop busy)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 60) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        async def settle_tasks() -> None:  # e.g. client heartbeats left by a closed link
            mine = asyncio.current_task()
            rest = [t for t in asyncio.all_tasks() if t is not mine]
            for task in rest:
                task.cancel()
            await asyncio.gather(*rest, return_exceptions=True)

        self.run(settle_tasks())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@contextmanager
def two_nodes(tmp: Path) -> Iterator[tuple[Loop, Node, Node]]:
    """``hub`` with no peers of its own and ``edge`` with ``--peer hub``."""
    loop = Loop()
    hub = loop.run(start_node(tmp, "hub", CFG))
    edge = loop.run(start_node(tmp, "edge", CFG, (hub,)))
    try:
        yield loop, hub, edge
    finally:
        for node in (edge, hub):
            loop.run(stop_node(node))
        loop.close()


def app_of(node: Node, **kwargs: Any) -> FastAPI:
    """The node's HTTP app, wired to its replicator as ``amcp serve`` does."""
    app = create_app(node.memory, **kwargs)
    app.state.ui.sync = node.replicator.view
    return app


def peers_html(node: Node) -> str:
    with TestClient(app_of(node), base_url=BASE) as c:
        r = c.get("/ui/peers")
        assert r.status_code == 200, r.text
        return r.text


def row(node: Node, label: str) -> PeerRow:
    return next(p for p in node.replicator.view().peers if p.label == label)


def settle(loop: Loop, check: Any, timeout: float = 15) -> None:
    async def ok() -> bool:
        return bool(await asyncio.to_thread(check))

    loop.run(eventually(ok, timeout=timeout, every=0.1))


def cell_text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def test_without_replication_the_page_says_how_to_set_it_up(tmp_path: Path) -> None:
    mem = make_memory(tmp_path)
    with ui_client(mem) as c:  # amcp http: no AMCP node in this process
        r = c.get("/ui/peers")
        assert r.status_code == 200
        for part in ("Replication is not configured", "amcp serve --peer HOST:PORT",
                     "[peers.hub]", "docs/replication.md"):
            assert part in r.text, part
        assert "script-src 'self'" in r.headers["content-security-policy"]
        assert '<a href="/ui/peers">Peers</a>' in c.get("/ui").text  # in the nav
    mem.close()


def test_a_node_with_no_peers_yet(tmp_path: Path) -> None:
    loop = Loop()
    node = loop.run(start_node(tmp_path, "alone", CFG))
    try:
        html = peers_html(node)
        assert "No peers yet" in html and "amcp serve --peer HOST:PORT" in html
        assert node.replicator.replica.key[:14] in html  # this node's own identity
        assert "No lag samples yet" in html
    finally:
        loop.run(stop_node(node))
        loop.close()


def both_charts(node: Node, label: str) -> bool:
    charts = [c for c in lag_charts(node.replicator.view()) if c.label == label]
    return bool(charts) and charts[0].their is not None and charts[0].ours is not None


def test_two_nodes_show_each_other_with_state_and_lag(tmp_path: Path) -> None:
    with two_nodes(tmp_path) as (loop, hub, edge):
        kid = loop.run(edge.write(lambda m: m.remember("release on fridays", scope="team:a")))
        loop.run(eventually(lambda: hub.has(kid.knowledge_id)))
        # Both lag series need two samples of their own (a sample taken before the first
        # pull has no "we are behind" value), so wait for the charts, not a sample count.
        settle(loop, lambda: (r := row(edge, "hub")).member == "alive" and r.queued is not None
               and r.queued.records == 0 and both_charts(edge, "hub"))
        html = peers_html(edge)
        peers = html[html.index("<tbody>"):html.index("</tbody>")]
        text = cell_text(peers)
        for part in ("hub configured", f"127.0.0.1:{hub.port}", "connected", "alive",
                     "up to date", "caught up"):
            assert part in text, part
        assert re.search(r"</td>\s*<td>1</td>", peers)  # tier 1
        assert hub.replicator.replica.key[:14] in peers
        assert html.count('<svg class="chart"') == 2  # behind us / we are behind, over time

        # The hub does not dial the edge: it shows it as a member that dials it, with
        # what its connections sent (the pushed record) and how far its pulls have read.
        inbound = row(hub, f"member {edge.replicator.replica.key[:12]}")
        assert inbound.origin == "inbound" and inbound.member == "alive"
        assert inbound.inbound is not None and inbound.inbound["applied"] >= 1
        hub_html = peers_html(hub)
        hub_text = cell_text(hub_html)
        assert "dials us" in hub_text and "it pushes to us" in hub_text
        assert f"127.0.0.1:{edge.port}" in hub_text and "its connections" in hub_text


def test_a_stopped_peer_goes_dead_and_its_pushes_queue(tmp_path: Path) -> None:
    with two_nodes(tmp_path) as (loop, hub, edge):
        settle(loop, lambda: row(edge, "hub").member == "alive")
        port = loop.run(cut(hub))  # the hub's node stops; its store stays
        for i in range(3):
            loop.run(edge.write(lambda m, i=i: m.remember(f"note {i} while the hub is away",
                                                          scope="team:a")))
        settle(loop, lambda: row(edge, "hub").member == "dead")
        gone = row(edge, "hub")
        assert gone.link == "offline" and gone.last_error and "connect" in gone.last_error
        assert gone.queued is not None and gone.queued.records >= 3
        assert gone.queued.seconds is not None and gone.queued.seconds >= 0
        text = cell_text(peers_html(edge))
        assert "offline" in text and "dead for" in text
        assert f"{gone.queued.records} record(s), oldest" in text
        assert "connect: cannot connect to the node" in text

        loop.run(heal(hub, port, CFG))  # back: the queue drains, the member is alive again
        settle(loop, lambda: (r := row(edge, "hub")).member == "alive"
               and r.queued is not None and r.queued.records == 0)
        assert loop.run(hub.read(lambda m: m.stats().records)) == 3


def test_peer_supplied_strings_are_escaped(tmp_path: Path) -> None:
    """A hostile node's member list (key, address, endpoint) reaches the page over the
    network; a peer's last error is put on the board the way a link records one."""
    evil = NodeIdentity.generate()

    async def gossip_xss(port: int) -> None:
        client = await connect("127.0.0.1", port, identity=evil, retry=FAST_RETRY,
                               node_type=NodeType.DB)
        try:
            await client.request(MsgType.HEALTH_CHECK, {"members": [{
                "key": XSS[:64], "node_address": XSS, "endpoint": XSS, "state": "alive",
                "incarnation": 1, "hlc": 0}]})
        finally:
            await client.aclose()

    with two_nodes(tmp_path) as (loop, hub, edge):
        loop.run(gossip_xss(hub.port))
        assert any(p.endpoint == XSS for p in hub.replicator.view().peers)
        edge.replicator.links[f"127.0.0.1:{hub.port}"].status.error(f"push refused: {XSS}")
        for node in (hub, edge):
            html = peers_html(node)
            assert "<script>alert" not in html and "<img src=x" not in html
            assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in html


def test_the_page_needs_a_token_for_every_scope(tmp_path: Path) -> None:
    with two_nodes(tmp_path) as (loop, hub, edge):
        settle(loop, lambda: row(edge, "hub").member == "alive")
        app = app_of(edge, tokens={"root-token": ["*"], "alice-token": ["team:a"]})
        with TestClient(app, base_url=BASE) as c:
            assert c.get("/ui/peers").status_code == 401  # the sign-in form
            sign_in(c, "alice-token")
            refused = c.get("/ui/peers")
            assert refused.status_code == 403
            assert "every scope" in refused.text and str(hub.port) not in refused.text
        with TestClient(app, base_url=BASE) as c:
            sign_in(c, "root-token")
            shown = c.get("/ui/peers")
            assert shown.status_code == 200 and f"127.0.0.1:{hub.port}" in shown.text


@pytest.mark.parametrize("replicating", [True, False], ids=["two-nodes", "no-replication"])
def test_peers_page_in_the_browser(browser: Any, tmp_path: Path, artifacts: Path,
                                   axe_source: str, replicating: bool) -> None:
    with two_nodes(tmp_path) as (loop, _hub, edge):
        settle(loop, lambda: row(edge, "hub").member == "alive"
               and len(edge.replicator.view().history) >= 3)
        app = app_of(edge) if replicating else create_app(edge.memory)
        with Served(app) as srv:
            ctx = browser.new_context(viewport={"width": 1200, "height": 900})
            page = ctx.new_page()
            outside: list[str] = []
            csp: list[str] = []
            sizes: list[Any] = []
            page.on("request", lambda r: outside.append(r.url)
                    if not r.url.startswith(srv.base) else None)
            page.on("console", lambda m: csp.append(m.text)
                    if "Content Security Policy" in m.text else None)
            page.goto(srv.base + "/ui")
            page.on("requestfinished", lambda r: sizes.append(r.sizes()["responseBodySize"]))
            page.get_by_role("link", name="Peers").click()
            page.wait_for_url("**/ui/peers")
            page.wait_for_load_state("networkidle")
            main = page.inner_text("main")
            if replicating:
                assert "alive" in main and "hub" in main
                assert page.locator("svg.chart").count() == 2
            else:
                assert "Replication is not configured" in main
            name = "peers" if replicating else "peers-not-configured"
            page.screenshot(path=str(artifacts / f"{name}.png"), full_page=True)
            assert not outside and not csp, (outside, csp)
            assert sum(sizes) <= MAX_PAGE_BYTES, sizes
            ctx.close()
            axe = browser.new_context(bypass_csp=True)  # only so that axe can be injected
            page = axe.new_page()
            page.goto(srv.base + "/ui/peers", wait_until="networkidle")
            page.add_script_tag(content=axe_source)
            found = page.evaluate("async () => (await axe.run(document)).violations"
                                  ".map(v => ({id: v.id, impact: v.impact}))")
            axe.close()
    assert not [v for v in found if v["impact"] in ("serious", "critical")], found
