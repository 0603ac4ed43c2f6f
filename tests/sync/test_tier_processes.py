"""``amcp serve --tier-max-records`` with ``--peer``: an edge process evicts to its hub."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.amcp_process import amcp_argv
from tests.sync.test_processes import RETRY, _serve, _stop

from amcp.memory import Memory
from amcp.node import SyncClient

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX processes")


def _peers(port: int, *json_flag: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(amcp_argv("peers", "--node", f"127.0.0.1:{port}", *json_flag),
                          capture_output=True, timeout=60, check=True)


def test_an_edge_process_evicts_to_its_hub_and_fetches_back(tmp_path: Path) -> None:
    config = tmp_path / "edge.toml"
    config.write_text("[tiers]\nidle_days = 0\ninterval = 0.5\n")
    hub, hub_port, _ = _serve(tmp_path, "hub")
    edge, edge_port, _ = _serve(tmp_path, "edge", "--peer", f"127.0.0.1:{hub_port}",
                                "--config", str(config), "--tier-max-records", "10")
    try:
        with Memory(tmp_path / "writer" / "memory.db", embedder="hashing") as writer:
            amfs = [writer.compose(f"decision {i} on the release train", type="KT-DECISION",
                                   scope="team:a").to_dict() for i in range(30)]
        with SyncClient.connect("127.0.0.1", edge_port, retry=RETRY) as node:
            ids = [node.write(amf).knowledge_id for amf in amfs]
        tiers: dict = {}  # type: ignore[type-arg]
        for _ in range(240):
            tiers = json.loads(_peers(edge_port, "--json").stdout)["tiers"] or {}
            if tiers.get("evicted", 0) >= 22:
                break
            time.sleep(0.25)
        else:
            raise AssertionError(f"the edge never evicted: {tiers}")
        assert tiers["tier0_records"] == 8 and tiers["holders"] == [f"127.0.0.1:{hub_port}"]
        assert b"tier 0: 8 records" in _peers(edge_port).stdout
        with SyncClient.connect("127.0.0.1", edge_port, retry=RETRY) as node:
            got = node.read_ids([i for i in ids if i is not None])
        assert len(got.records) == 30 and got.payload["network_fetches"] == 22
    finally:
        for proc, name in ((edge, "edge"), (hub, "hub")):
            _stop(proc, 15, tmp_path / f"{name}.err")
