"""``amcp serve --peer``: two real node processes, separate stores (the user's view)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from tests.amcp_process import amcp_argv
from tests.cli.test_serve_signals import _free_port, _start, _stop, _wait_for

from amcp.agent.hooks.runtime import read_runtime
from amcp.memory import Memory
from amcp.node import SyncClient
from amcp.node.client import RetryPolicy

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX processes")
RETRY = RetryPolicy(ack_timeout=2.0, backoff=(2.0, 5.0), request_timeout=20.0,
                    connect_timeout=5.0)


def _serve(tmp: Path, name: str, *extra: str) -> tuple[subprocess.Popen[bytes], int, int]:
    store = tmp / name / "memory.db"
    port, http = _free_port(), _free_port()
    err = tmp / f"{name}.err"
    proc = _start(["serve", "--store", str(store), "--port", str(port), "--http-port",
                   str(http), "--embedder", "hashing", *extra], err)
    _wait_for(lambda: read_runtime(store) is not None, proc, err)
    return proc, port, http


def test_a_write_on_a_reaches_b_with_peer_and_amcp_peers_shows_it(tmp_path: Path) -> None:
    b, b_port, _ = _serve(tmp_path, "b")
    a, a_port, a_http = _serve(tmp_path, "a", "--peer", f"127.0.0.1:{b_port}")
    try:
        with Memory(tmp_path / "writer" / "memory.db", embedder="hashing") as writer:
            amf = writer.compose("the release branch is cut on fridays", type="KT-FACT",
                                 scope="team:a").to_dict()
        with SyncClient.connect("127.0.0.1", a_port, retry=RETRY) as node_a:
            ack = node_a.write(amf)
        kid = ack.knowledge_id
        assert kid is not None
        with SyncClient.connect("127.0.0.1", b_port, retry=RETRY) as node_b:
            for _ in range(200):
                if node_b.read_ids([kid]).records:
                    break
                time.sleep(0.025)
            else:
                raise AssertionError("the write on a never reached b")
        shown = subprocess.run(amcp_argv("peers", "--node", f"127.0.0.1:{a_port}", "--json"),
                               capture_output=True, timeout=60, check=True)
        board = json.loads(shown.stdout)["sync"]
        (peer,) = board["peers"]
        assert peer["endpoint"] == f"127.0.0.1:{b_port}" and peer["state"] == "connected"
        assert board["totals"]["pushed"] >= 1
        health = httpx.get(f"http://127.0.0.1:{a_http}/v1/health", timeout=10).json()
        assert health["sync"]["pushed"] >= 1 and health["sync"]["peers_connected"] == 1
        # amcp serve hands its replicator to the inspector too (/ui/peers, docs/ui.md)
        page = httpx.get(f"http://127.0.0.1:{a_http}/ui/peers", timeout=10)
        assert page.status_code == 200 and f"127.0.0.1:{b_port}" in page.text
        assert "Replication is not configured" not in page.text
    finally:
        for proc, name in ((a, "a"), (b, "b")):
            _stop(proc, 15, tmp_path / f"{name}.err")
