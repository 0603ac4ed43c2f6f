"""The web inspector's page times at 100k records (issue 21).

Targets: first page load (``/ui``) <= 300 ms server time, search-as-you-type
(``/ui/results`` per keystroke prefix) <= 100 ms p95, record page (``/ui/r/{id}``) <=
150 ms, page weight (HTML + stylesheet + script + icon, uncompressed) <= 200 KB. The peers
page (``/ui/peers``) is timed on the same store served by a replicating node with one live
and one unreachable peer (``measure_peers``). Pages are requested in-process through
Starlette's TestClient, so the figure is the server's time to answer plus the client's
in-process overhead (~1 ms), no network.

The store (hashing embedder, 100k records built with ``Memory.remember_many`` in batches)
is cached under /tmp/amcp-bench-ui/ and reused while its parameters match.

    .venv/bin/python bench/ui_pages.py [--records 100000] [--rounds 200]

Writes bench/results/ui_pages.json.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from bench.common import median, percentile, save  # noqa: E402

from amcp.memory import Memory  # noqa: E402

CACHE = Path("/tmp/amcp-bench-ui")
BATCH = 2_000
TOPICS = (
    "deploy release rollback staging production database index query cache latency "
    "budget invoice payroll customer ticket incident alert pager oncall review merge "
    "branch commit test flaky build docker kubernetes node cluster shard replica backup "
    "restore migration schema token secret rotate key certificate domain dns proxy "
    "alice bob carol dave erin frank tuesday friday morning weekly quarterly"
)
WORDS = TOPICS.split()
TYPES = ("KT-FACT", "KT-DECISION", "KT-PITFALL", "KT-CONTEXT")
QUERIES = ("when do we deploy to production", "rotate the database key",
           "who is oncall for payroll incidents", "flaky docker build cache",
           "restore a backup of the replica", "alice prefers friday reviews")


def _vocabulary(rng: random.Random, n: int = 20_000) -> list[str]:
    """Pseudo-words, so that most terms are rare as in real notes; topic words are common."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    return ["".join(rng.choice(letters) for _ in range(rng.randint(4, 9))) for _ in range(n)]


def _text(rng: random.Random, vocab: list[str], i: int) -> str:
    words = rng.sample(WORDS, 3) + rng.sample(vocab, 8)
    rng.shuffle(words)
    return f"Note {i}: {' '.join(words)}."


def build(path: Path, records: int) -> float:
    """Create the store (if missing); the seconds it took, 0 when cached."""
    marker = path.with_suffix(".built")
    if marker.exists() and marker.read_text() == str(records):
        return 0.0
    shutil.rmtree(path.parent, ignore_errors=True)
    path.parent.mkdir(parents=True)
    rng = random.Random(21)
    vocab = _vocabulary(rng)
    started = time.perf_counter()
    with Memory(path, embedder="hashing") as mem:
        for start in range(0, records, BATCH):
            mem.remember_many(
                {"text": _text(rng, vocab, i), "scope": [f"team:{i % 25}"],
                 "type": TYPES[i % len(TYPES)], "tags": [WORDS[i % len(WORDS)]]}
                for i in range(start, min(start + BATCH, records))
            )
            print(f"  built {min(start + BATCH, records)}/{records}", end="\r", flush=True)
    marker.write_text(str(records))
    print()
    return time.perf_counter() - started


def timed(client: Any, url: str) -> float:
    started = time.perf_counter()
    r = client.get(url)
    took = (time.perf_counter() - started) * 1000
    if r.status_code != 200:
        raise RuntimeError(f"{url}: {r.status_code} {r.text[:200]}")
    return took


def summary(values: list[float]) -> dict[str, float]:
    return {"n": len(values), "p50_ms": round(median(values), 2),
            "p95_ms": round(percentile(values, 95), 2), "max_ms": round(max(values), 2)}


def sample_ids(mem: Memory, n: int, rng: random.Random) -> list[str]:
    out: list[str] = []
    while len(out) < n:
        after = "K-" + "".join(rng.choice("0123456789abcdef") for _ in range(8))
        page = mem.list_records(limit=1, after=after)
        if page:
            out.append(page[0].knowledge_id)
    return out


def measure(path: Path, rounds: int) -> dict[str, Any]:
    from fastapi.testclient import TestClient

    from amcp.api.http import create_app

    rng = random.Random(7)
    opened = time.perf_counter()
    mem = Memory(path, embedder="hashing")
    open_s = time.perf_counter() - opened
    try:
        with TestClient(create_app(mem), base_url="http://127.0.0.1") as c:
            first = timed(c, "/ui")  # the first page of a freshly opened node
            cold_search = timed(c, "/ui/results?q=warm+up")  # loads the vector index
            warm = [timed(c, "/ui") for _ in range(20)]
            typing: list[float] = []
            while len(typing) < rounds:
                for query in QUERIES:
                    for end in range(3, len(query) + 1, 2):  # a keystroke pause every 2 chars
                        typing.append(timed(c, f"/ui/results?q={query[:end]}"))
            ids = sample_ids(mem, rounds, rng)
            record = [timed(c, f"/ui/r/{kid}") for kid in ids]
            scoped = [timed(c, f"/ui/results?q={q}&scope=team:3") for q in QUERIES * 5]
            store = [timed(c, "/ui/store") for _ in range(5)]
            weight = {p: len(c.get(p).content) for p in ("/ui", f"/ui/r/{ids[0]}", "/ui/store")}
    finally:
        mem.close()
    return {
        "open_s": round(open_s, 2),
        "first_page_ms": round(first, 2),
        "first_search_ms": round(cold_search, 2),
        "first_page_warm": summary(warm),
        "search_as_you_type": summary(typing),
        "search_scoped": summary(scoped),
        "record_page": summary(record),
        "store_page": summary(store),
        "html_bytes": weight,
    }


class _Loop:
    """An event loop in a thread for the nodes, next to the sync TestClient."""

    def __init__(self) -> None:
        import asyncio
        import threading

        self.asyncio = asyncio
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coro: Any) -> Any:
        return self.asyncio.run_coroutine_threadsafe(coro, self.loop).result(120)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


async def _node(mem: Memory, peers: tuple[Any, ...] = ()) -> Any:
    from amcp.node.replicator import attach
    from amcp.node.server import NodeServer
    from amcp.sync.peers import SyncConfig

    server = NodeServer(mem)
    replicator = attach(server, SyncConfig(peers=peers, lag_sample_interval=1.0))
    await server.start("127.0.0.1", 0)
    replicator.replica.membership.me.endpoint = f"127.0.0.1:{server.port}"
    await replicator.start()
    return server, replicator


async def _stop(server: Any, replicator: Any) -> None:
    await replicator.close()
    await server.close()


def measure_peers(path: Path, rounds: int) -> dict[str, Any]:
    """``/ui/peers`` of the 100k-record node replicating with two peers: a live one it has
    already pushed its whole log to (its stored watermarks say so, so no bulk sync runs
    during the timing) and an unreachable one it never reached — the worst case, whose
    queued-push count reads the most change-log entries (``amcp.sync.lag.BACKLOG_CAP``)."""
    import tempfile

    from fastapi.testclient import TestClient

    from amcp.api.http import create_app
    from amcp.sync.peers import PeerSpec

    loop = _Loop()
    with tempfile.TemporaryDirectory() as tmp:
        edge_mem = Memory(Path(tmp) / "edge.db", embedder="hashing")
        edge = loop.run(_node(edge_mem))
        mem = Memory(path, embedder="hashing")
        live = PeerSpec("127.0.0.1", edge[0].port, name="edge")
        top = str(mem.store.max_hlc())  # the replicator's own meta keys (PeerLink)
        mem.store.set_meta(f"sync.pushed.{live.endpoint}", top)
        mem.store.set_meta(f"sync.pulled.{live.endpoint}", "0")
        gone = PeerSpec("127.0.0.1", 9, name="away")  # discard port: nothing listens
        hub = loop.run(_node(mem, (live, gone)))
        try:
            time.sleep(3)  # connected, probed, a few lag samples
            app = create_app(mem)
            app.state.ui.sync = hub[1].view
            with TestClient(app, base_url="http://127.0.0.1") as c:
                first = timed(c, "/ui/peers")
                times = [timed(c, "/ui/peers") for _ in range(max(20, rounds // 4))]
                html = c.get("/ui/peers").text
            shown = {p.label: (p.link, p.member, p.queued.records if p.queued else None)
                     for p in hub[1].view().peers}
        finally:
            loop.run(_stop(*hub))
            loop.run(_stop(*edge))
            loop.close()
            mem.close()
            edge_mem.close()
    return {"peers_first_ms": round(first, 2), "peers_page": summary(times),
            "peers_html_bytes": len(html.encode()), "peers_shown": shown}


def page_weights(path: Path, html: dict[str, int]) -> dict[str, int]:
    """Each page's whole weight: its HTML plus the stylesheet, script and icon it loads."""
    static = ROOT / "src" / "amcp" / "ui" / "static"
    assets = sum((static / n).stat().st_size for n in ("ui.css", "ui.js", "favicon.svg"))
    return {page: n + assets for page, n in html.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=200)
    args = ap.parse_args()
    path = CACHE / f"ui-{args.records}.db"
    built = build(path, args.records)
    load = list(os.getloadavg())  # the machine is shared: say how busy it was
    result = measure(path, args.rounds)
    result.update(measure_peers(path, args.rounds))
    result["page_weight_bytes"] = page_weights(path, {
        **result["html_bytes"], "/ui/peers": result["peers_html_bytes"]})
    targets = {
        "first_page_ms<=300": result["first_page_ms"] <= 300,
        "search_as_you_type_p95<=100": result["search_as_you_type"]["p95_ms"] <= 100,
        "record_page_p95<=150": result["record_page"]["p95_ms"] <= 150,
        "page_weight<=200KB": max(result["page_weight_bytes"].values()) <= 200 * 1024,
    }
    out = save("ui_pages", {"records": args.records, "build_s": round(built, 1),
                            "load_before": load, "load_after": list(os.getloadavg()),
                            **result, "targets_met": targets})
    for key, value in result.items():
        print(f"{key}: {value}")
    print("targets:", targets)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
