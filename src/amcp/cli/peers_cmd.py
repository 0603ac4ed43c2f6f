"""``amcp peers``: who this node replicates with — state, lag, last error, counters.

Asks the running node (HEALTH_CHECK over AMCP; a local caller gets the sync status board,
docs/replication.md). Listed in ``amcp.cli.commands`` as ``peers``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from amcp.cli.common import emit_json, friendly, out, store_path
from amcp.cli.options import JsonOpt, StoreOpt

NodeOpt = Annotated[str | None, typer.Option(
    "--node", help="HOST:PORT of the node (default: the one serving --store, else 7707).")]


def node_health(node: str | None, store: str | Path | None) -> dict[str, Any]:
    """The HEALTH_RESPONSE of the node at ``node`` or serving ``store``."""
    from amcp.agent.hooks.runtime import read_runtime
    from amcp.node import SyncClient
    from amcp.node.client import RetryPolicy
    from amcp.sync.peers import parse_endpoint

    if node is not None:
        host, port = parse_endpoint(node)
    else:
        rt = read_runtime(store_path(store))
        host, port = rt.amcp if rt is not None and rt.amcp else ("127.0.0.1", 7707)
    retry = RetryPolicy(connect_timeout=3.0, request_timeout=10.0, ack_timeout=3.0)
    with SyncClient.connect(host, port, retry=retry, budget_tokens=2100,
                            task="amcp peers") as client:
        return client.health(tiers=True)


def _ago(value: float | None) -> str:
    import time

    return "-" if value is None else f"{time.time() - value:.0f}s ago"


@friendly
def peers(node: NodeOpt = None, store: StoreOpt = None, json_: JsonOpt = False) -> None:
    """The running node's peers and members: state, lag, last sync, last error, counters."""
    health = node_health(node, store)
    sync = health.get("sync")
    if json_:
        emit_json({"members": health.get("members", []), "sync": sync,
                   "tiers": health.get("tiers")})
        return
    if sync is None:
        out.print("this node does not replicate (no --peer / [peers]), or did not show its "
                  "status to this caller")
        return
    board = sync.get("peers", [])
    if not board:
        out.print("no peers configured or learned yet")
    for p in board:
        c = p.get("counters", {})
        lag = p.get("lag_ms")
        out.print(f"{p['peer']:24} {p['state']:10} tier {p['tier']}  "
                  f"lag {'-' if lag is None else f'{lag} ms':>9}  last sync "
                  f"{_ago(p.get('last_sync_at'))}  pushed {c.get('pushed', 0)} pulled "
                  f"{c.get('pulled', 0)} applied {c.get('applied', 0)} conflicts "
                  f"{c.get('conflicts', 0)}")
        if p.get("last_error"):
            out.print(f"{'':24} last error ({_ago(p.get('last_error_at'))}): "
                      f"{p['last_error']}")
    members = list(health.get("members", [])[1:])
    if members:
        out.print("members: " + ", ".join(
            f"{m.get('endpoint') or m.get('key', '?')[:12]} {m.get('state')}" for m in members))
    totals = sync.get("totals", {})
    out.print("totals: " + ", ".join(f"{k} {v}" for k, v in totals.items() if v))
    tiers = health.get("tiers")
    if isinstance(tiers, dict):
        out.print(f"tier 0: {tiers.get('tier0_records', 0)} records, "
                  f"{tiers.get('tier0_bytes', 0)} bytes; evicted {tiers.get('evicted', 0)} "
                  f"({tiers.get('evicted_bytes', 0)} bytes) held at "
                  f"{', '.join(tiers.get('holders') or []) or 'no tier-1 peer'}; fetched back "
                  f"{tiers.get('fetched_back', 0)}, cache misses {tiers.get('cache_misses', 0)}")


def running_sync(store: str | Path | None) -> dict[str, Any] | None:
    """``amcp stats``' sync section: the totals of the node serving ``store``, when one runs
    and replicates; None otherwise (no node, no replication, or it did not answer)."""
    from amcp.agent.hooks.runtime import read_runtime
    from amcp.errors import AmcpError

    rt = read_runtime(store_path(store))
    if rt is None or rt.amcp is None:
        return None
    try:
        health = node_health(f"{rt.amcp[0]}:{rt.amcp[1]}", store)
    except (AmcpError, OSError):
        return None
    sync = health.get("sync")
    if not (isinstance(sync, dict) and "totals" in sync):
        return None
    out = dict(sync["totals"])
    tiers = health.get("tiers")
    if isinstance(tiers, dict):  # what the node's tier rounds did since it started
        for key in ("evicted_since_start", "fetched_back", "cache_misses"):
            if isinstance(tiers.get(key), int):
                out[f"tiers_{key}"] = tiers[key]
    return out
