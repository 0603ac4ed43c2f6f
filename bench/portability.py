"""Portability benchmark (issue 19): formats, round trips, the messy corpus, import speed.

    .venv/bin/python bench/portability.py [--quick] [--no-minilm] [--no-tools]

1. **formats** — every importer on its fixture (made by the real tool, or the real Letta
   files in ../shared/bench-data/portability): created records and the five checks;
2. **round trips** — mem0 → amcp → mem0 and MCP memory → amcp → MCP memory through the
   real tools (installed from tests/portability/fixtures/tools on first use);
3. **messy corpus** — 10k generated items across three tools (bench/portability_corpus.py)
   imported into one store: classification against the labels (confusion table), items
   lost, duplicate groups merged;
4. **speed** — the corpus import with the hashing embedder (items/s), and with MiniLM
   against MiniLM alone embedding the same texts in the same run.

Writes bench/results/portability.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from common import save  # noqa: E402
from portability_corpus import generate  # noqa: E402
from tests.portability import realtools  # noqa: E402
from tests.portability.kit import FIXTURES, LETTA  # noqa: E402

from amcp.memory import Memory  # noqa: E402
from amcp.portability.api import ImportResult, import_path  # noqa: E402
from amcp.portability.export import export_to  # noqa: E402
from amcp.portability.model import ImportOptions  # noqa: E402
from amcp.portability.plan import norm  # noqa: E402

KINDS = ["preference", "fact", "task", "event", "log"]


def _store(tmp: Path, name: str, embedder: str = "hashing") -> Memory:
    return Memory(tmp / name / "memory.db", embedder=embedder)


def formats(tmp: Path) -> dict[str, Any]:
    csv = tmp / "table.csv"
    csv.write_text("when,what,who\n1709647500,Carol prefers email,carol\n"
                   "1709647600000,ERROR db timeout,carol\n")
    portable = tmp / "portable.jsonl"
    portable.write_text(json.dumps({"id": "p1", "type": "preference", "content": "Dana likes tea",
                                    "scope": "user:dana", "created_at": 1709647500}) + "\n")
    cases: list[tuple[str, Path, dict[str, Any]]] = [
        ("mem0 get_all JSON", FIXTURES / "mem0_get_all.json", {}),
        ("mem0 local dir (history.db + FAISS)", FIXTURES / "mem0_local", {}),
        ("MCP memory server memory.jsonl", FIXTURES / "mcp_memory.jsonl", {}),
        ("Letta .af (real files)", LETTA, {}),
        ("ChatGPT export", FIXTURES / "chatgpt_export", {}),
        ("Claude export", FIXTURES / "claude_export", {}),
        ("basic-memory notes", FIXTURES / "basic_memory", {}),
        ("OpenAI Agents SDK SQLiteSession", FIXTURES / "agents_session.db", {}),
        ("LangGraph SqliteStore", FIXTURES / "langgraph_store.db", {}),
        ("generic CSV with --map", csv, {"mapping": {"text": "what", "created_at": "when",
                                                     "scope": "who"}}),
        ("amcp portable records", portable, {}),
    ]
    out = []
    for n, (name, path, opts) in enumerate(cases):
        with _store(tmp, f"fmt{n}") as mem:
            res = import_path(mem, path, ImportOptions(**opts))
            out.append({"format": name, "real_tool_fixture": "hand-written" not in name,
                        "items": res.health.items, "created": res.created, "ok": res.ok,
                        "checks": [c.ok for c in res.verification.checks]})  # type: ignore[union-attr]
    ok = [f for f in out if f["ok"] and f["created"] > 0]
    return {"formats": out, "imported_ok": len(ok)}


def round_trips(tmp: Path) -> dict[str, Any]:
    original = json.loads((FIXTURES / "mem0_get_all.json").read_text())["results"]
    with _store(tmp, "rt_mem0") as mem:
        import_path(mem, FIXTURES / "mem0_get_all.json")
        export_to(mem, tmp / "back.json", "mem0")
    back = json.loads((tmp / "back.json").read_text())["results"]
    exact = sum(1 for o in original if o in back)
    reloaded = realtools.mem0_load(tmp / "back.json")["results"]
    keys = ("memory", "hash", "metadata", "user_id", "agent_id", "run_id", "role")
    want = [{k: o.get(k) for k in keys} for o in original]
    got = [{k: r.get(k) for k in keys} for r in reloaded]
    via_mem0 = sum(1 for w in want if w in got)
    graph = realtools.mcp_make(tmp / "memory.jsonl")
    with _store(tmp, "rt_mcp") as mem:
        import_path(mem, tmp / "memory.jsonl")
        export_to(mem, tmp / "graph.jsonl", "mcp-memory")
    again = realtools.mcp_load(tmp / "graph.jsonl")
    n_items = len(graph["entities"]) + len(graph["relations"])
    same = sum(1 for e in graph["entities"] if e in again["entities"]) + sum(
        1 for r in graph["relations"] if r in again["relations"])
    return {
        "mem0": {"items": len(original), "export_identical": exact,
                 "through_real_mem0_text_and_metadata": via_mem0,
                 "preserved_pct": 100.0 * min(exact, via_mem0) / len(original),
                 "note": "mem0 assigns new ids and times on add; compared: " + ", ".join(keys)},
        "mcp_memory": {"entities_and_relations": n_items, "identical_after_round_trip": same,
                       "observations": sum(len(e["observations"]) for e in graph["entities"]),
                       "preserved_pct": 100.0 * same / n_items, "graph_equal": again == graph},
    }


def import_corpus(
    mem: Memory, corpus: Path, prefetch: bool = False
) -> tuple[list[ImportResult], float]:
    started = time.perf_counter()
    results = [
        import_path(mem, corpus / "mem0.json", ImportOptions(kind="mem0", prefetch=prefetch)),
        import_path(mem, corpus / "tool_b.sqlite", ImportOptions(
            kind="table", prefetch=prefetch, mapping={
                "text": "content", "created_at": "created", "kind": "kind", "scope": "user_id",
                "id": "id", "vector": "embedding", "vector_model": "embedding_model"})),
        import_path(mem, corpus / "tool_c.csv", ImportOptions(
            kind="table", assume_tz="UTC", prefetch=prefetch, mapping={
                "text": "note", "created_at": "timestamp", "kind": "category", "scope": "owner",
                "id": "uuid", "vector": "embedding", "vector_model": "model"})),
    ]
    return results, time.perf_counter() - started


def messy(tmp: Path, corpus: Path) -> dict[str, Any]:
    labels = json.loads((corpus / "labels.json").read_text())
    with _store(tmp, "messy") as mem:
        results, took = import_corpus(mem, corpus)
        stored: dict[str, str] = {}
        after = None
        while page := mem.list_records(limit=1000, after=after, reveal=True):
            for row in page:
                ext = row.record.vendor_extensions  # type: ignore[union-attr]
                stored[str(ext["x-source-key"])] = str(row.record.kind)  # type: ignore[union-attr]
            after = page[-1].knowledge_id
        vectors = mem.stats().vectors
    # A group: items that say the same thing for the same user (a planted duplicate and its
    # original, or two generated items that happen to coincide). Exactly one record each.
    groups: dict[tuple[str, str], list[str]] = {}
    for key, lab in labels.items():
        groups.setdefault((lab["user"], norm(lab["text"])), []).append(key)
    lost = sum(1 for members in groups.values() if not any(m in stored for m in members))
    unmerged = sum(1 for members in groups.values() if sum(m in stored for m in members) > 1)
    planted = [k for k, v in labels.items() if v["duplicate_of"]]
    planted_merged = sum(
        1 for k in planted if k not in stored or labels[k]["duplicate_of"] not in stored)
    confusion: Counter[tuple[str, str]] = Counter()
    for key, kind in stored.items():
        confusion[(labels[key]["label"], kind)] += 1
    correct = sum(n for (a, b), n in confusion.items() if a == b)
    table = {a: {b: confusion.get((a, b), 0) for b in KINDS} for a in KINDS}
    return {
        "items": len(labels), "groups": len(groups),
        "duplicate_items": sum(1 for v in labels.values() if v["duplicate_of"]),
        "stored_records": len(stored), "lost": lost, "planted_duplicates": len(planted),
        "planted_duplicates_merged": planted_merged, "duplicate_groups_not_merged": unmerged,
        "classified_correctly": correct, "accuracy_pct": 100.0 * correct / len(stored),
        "confusion_rows_true_cols_stored": table,
        "verification_ok": all(r.ok for r in results), "vectors_in_store": vectors,
        "foreign_vectors_discarded": sum(
            n for r in results for _m, n in r.health.vectors_discarded),
        "import_seconds": round(took, 2), "items_per_s_hashing": round(len(labels) / took, 1),
        "merged_reported": sum(r.health.decisions["merge"] for r in results),
    }


# (MiniLM workers, prefetch): the import's configurations measured, each against MiniLM
# alone with the same workers (MiniLMEmbedder(threads=N): N single-threaded ONNX sessions
# in parallel, one batch of 16 texts each). 2 = this machine's cores, the default.
MINILM_CONFIGS: tuple[tuple[int, bool], ...] = ((2, False), (2, True), (1, True))


def _name(threads: int, prefetch: bool) -> str:
    return f"t{threads}" + ("_prefetch" if prefetch else "")


def _alone(emb: Any, texts: list[str]) -> tuple[float, float]:
    started, c0 = time.perf_counter(), time.process_time()
    for i in range(0, len(texts), 256):  # the importer's batch size
        emb.embed(texts[i : i + 256])
    return time.perf_counter() - started, time.process_time() - c0


def _stored_texts(mem: Memory) -> list[str]:
    """What the import embedded: every record it stored, held drafts and the versions it
    superseded included (active records alone are ~8% fewer, which understated the
    import's throughput against the embedder's)."""
    from amcp.retrieval.indexing import embed_text
    from amcp.store.base import RecordFilter

    texts: list[str] = []
    after = None
    every = RecordFilter(lifecycles=None)
    while page := mem.list_records(every, limit=1000, after=after, reveal=True):
        texts += [embed_text(r.record, r.state.sensitive)  # type: ignore[arg-type]
                  for r in page]
        after = page[-1].knowledge_id
    return texts


def minilm_speed(tmp: Path, corpus: Path, rounds: int = 3) -> dict[str, Any]:
    """The corpus import with MiniLM, and MiniLM alone on the same texts with the same
    worker count, alternated ``rounds`` times (the machine is shared: alternating spreads
    its load over every configuration); medians reported, wall and process CPU."""
    from amcp.retrieval.embedders import get_embedder

    models = {t: get_embedder("minilm", threads=t) for t in {t for t, _p in MINILM_CONFIGS}}
    for emb in models.values():
        emb.embed(["warm up the model", "and its bulk sessions"] * 20)
    wall: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}
    loads: list[float] = []
    texts: list[str] = []
    ok = True

    def note(name: str, took: float, spent: float) -> None:
        wall.setdefault(name, []).append(took)
        cpu.setdefault(name, []).append(spent)
        loads.append(os.getloadavg()[0])
        print(f"  {name}: {took:.2f} s wall, {spent:.2f} s CPU, load {loads[-1]:.1f}",
              file=sys.stderr, flush=True)

    for n in range(rounds):
        for threads, prefetch in MINILM_CONFIGS:
            name = _name(threads, prefetch)
            with Memory(tmp / f"minilm{n}{name}" / "m.db", embedder=models[threads]) as mem:
                c0 = time.process_time()
                results, took = import_corpus(mem, corpus, prefetch=prefetch)
                note("import_" + name, took, time.process_time() - c0)
                ok = ok and all(r.ok for r in results)
                texts = texts or _stored_texts(mem)
            if len(wall.get(f"alone_t{threads}", [])) <= n:  # once per round and workers
                note(f"alone_t{threads}", *_alone(models[threads], texts))
    med = {k: statistics.median(v) for k, v in wall.items()}
    cmed = {k: statistics.median(v) for k, v in cpu.items()}
    configs = {}
    for threads, prefetch in MINILM_CONFIGS:
        name = _name(threads, prefetch)
        alone = f"alone_t{threads}"
        configs[name] = {
            "minilm_workers": threads, "prefetch": prefetch,
            "import_records_per_s": round(len(texts) / med["import_" + name], 1),
            "import_items_per_s": round(10_000 / med["import_" + name], 1),
            "alone_texts_per_s": round(len(texts) / med[alone], 1),
            "ratio_pct": round(100.0 * med[alone] / med["import_" + name], 1),
            "cpu_ratio_pct": round(100.0 * cmed[alone] / cmed["import_" + name], 1),
            "non_embedding_cpu_ms_per_record": round(
                1000 * (cmed["import_" + name] - cmed[alone]) / len(texts), 3),
        }
    return {
        "records_embedded": len(texts), "rounds": rounds, "configs": configs,
        "seconds": {k: [round(x, 2) for x in v] for k, v in wall.items()},
        "cpu_seconds": {k: [round(x, 2) for x in v] for k, v in cpu.items()},
        "load_1min": {"min": min(loads), "max": max(loads), "median": statistics.median(loads)},
        "verification_ok": ok,
        "note": "ratio = import throughput of embedded records / MiniLM alone on those texts "
                "with the same workers (wall); cpu_ratio = the same with process CPU seconds "
                "(all threads): on a shared machine the wall ratio swings with other jobs",
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only-minilm", action="store_true", help="just the MiniLM speed part")
    ap.add_argument("--no-minilm", action="store_true")
    ap.add_argument("--no-tools", action="store_true", help="skip the real-tool round trips")
    args = ap.parse_args()
    payload: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        if args.only_minilm:
            generate(tmp / "corpus")
            payload["minilm"] = minilm_speed(tmp, tmp / "corpus", rounds=3)
            print("minilm:", json.dumps(payload["minilm"], indent=1), flush=True)
            print("wrote", save("portability_minilm", payload))
            return
        payload["formats"] = formats(tmp)
        print("formats imported ok:", payload["formats"]["imported_ok"], flush=True)
        if not args.no_tools:
            payload["round_trips"] = round_trips(tmp)
            print("round trips:", json.dumps(payload["round_trips"]), flush=True)
        corpus = tmp / "corpus"
        payload["corpus"] = generate(corpus)
        payload["messy"] = messy(tmp, corpus)
        m = payload["messy"]
        print(f"messy: {m['accuracy_pct']:.2f}% classified, lost {m['lost']}, unmerged "
              f"{m['duplicate_groups_not_merged']}, {m['items_per_s_hashing']} items/s", flush=True)
        if not args.no_minilm:
            payload["minilm"] = minilm_speed(tmp, corpus)
            print("minilm:", json.dumps(payload["minilm"]), flush=True)
    print("wrote", save("portability", payload))



if __name__ == "__main__":
    main()
