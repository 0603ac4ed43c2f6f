"""The blocking SyncClient, edge↔hub sync into a second Memory, and the trust CLI."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import typer
from tests.node.kit import FAST, make_memory, record
from typer.testing import CliRunner

from amcp.cli.serve_cmd import serve, trust_app
from amcp.node import NodeServer, SyncClient


def test_sync_client_and_pull_into_another_memory(tmp_path: Path) -> None:
    hub, edge = make_memory(tmp_path, "hub"), make_memory(tmp_path, "edge")
    loop = asyncio.new_event_loop()
    server = NodeServer(hub)
    loop.run_until_complete(server.start("127.0.0.1", 0))
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        with SyncClient.connect("127.0.0.1", server.port, retry=FAST) as node:
            r = record(hub, "shared across nodes")
            assert node.write(r).status == 201
            gone = record(hub, "erase me")
            node.write(gone)
            hub.purge(gone["knowledge_id"], "gdpr")
            assert node.health()["state"] == "ACTIVE"
            result = node.sync_pull(0, apply_to=edge)
            assert result["applied"] >= 2
            assert edge.get(r["knowledge_id"]).record is not None
            tomb = edge.store.get(gone["knowledge_id"])
            assert tomb is not None and tomb.record is None  # purged: a tombstone only
            again = node.sync_pull(0, apply_to=edge)
            assert again["applied"] == 0  # idempotent
    finally:
        asyncio.run_coroutine_threadsafe(server.close(), loop).result()
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()
        hub.close()
        edge.close()


def test_trust_cli(tmp_path: Path) -> None:
    app = typer.Typer()
    app.command()(serve)
    app.add_typer(trust_app, name="trust")
    runner = CliRunner()
    ca = tmp_path / "ca"
    res = runner.invoke(app, ["trust", "anchor", "--name", "team", "--out", str(ca)])
    assert res.exit_code == 0, res.output
    from amcp.session import NodeIdentity

    pub = NodeIdentity.generate().public_key_b64
    chain = tmp_path / "node.pem"
    res = runner.invoke(app, ["trust", "issue", "--anchor", str(ca / "anchor.pem"),
                              "--anchor-key", str(ca / "anchor_key.pem"), "--public-key", pub,
                              "--node-uri", "amcp://db.amcp.fp-abcdef.local", "--out",
                              str(chain)])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["trust", "show", str(chain)])
    assert res.exit_code == 0
    assert "amcp://db.amcp.fp-abcdef.local" in res.output
