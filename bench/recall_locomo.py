"""LoCoMo evidence recall through ``Memory.remember`` / ``Memory.recall``.

Every turn of ../shared/bench-data/locomo/locomo10.json is remembered (one conversation =
one scope of one store, as the issue asks — ``--layout shared``, the default — or one store
per conversation as in the paper, ``--layout per-conversation``; speaker, session date and
dia_id kept), every category 1–4
question is asked through ``recall``, and evidence recall@k is reported per category and
overall — the metric of the LoCoMo paper (Table 3): the share of a question's evidence
dia_ids found among the top-k retrieved turns, averaged over questions.

    .venv/bin/python bench/recall_locomo.py [--embedder minilm|hashing] [--conversations 0-4]

Tuning is done on conversations 0-4 (``--conversations 0-4``); a full run also reports 0-4
("dev") and 5-9 ("held out") separately, so an overfitted change shows as a gap between them.

For fast iterations, ``--embed-cache FILE`` keeps embeddings by (model, text) in a SQLite
file: recall figures are unchanged (same vectors), but ingest throughput is then not the
model's and is not reported. ``--store DIR`` keeps the built store there and reuses it on the
next run (query-time experiments only: an index change needs a fresh store).

Until 2026-11-30 all conversations shared one store and each was asked right after its own
ingest, so conversation N was scored against an index holding conversations 0..N: its
figures depended on the order (same code: 72.9 R@10 that way, 73.6 one store each). Now the
shared layout ingests every conversation before the first question.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sqlite3
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import DATA, median, percentile, save

from amcp.memory import Memory
from amcp.retrieval.embedders import Embedder, get_embedder
from amcp.retrieval.search import HybridSearcher, SearchTuning

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
KS = (1, 5, 10, 25)


def session_time(text: str) -> str:
    """'1:56 pm on 8 May, 2023' → ISO UTC. LoCoMo gives no zone; we read it as UTC."""
    dt = datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)
    return dt.strftime("%Y-%m-%dT%H:%M:%SZ")


def turn_text(turn: dict[str, str]) -> str:
    text = f"{turn['speaker']}: {turn['text']}"
    if turn.get("blip_caption"):
        text += f" [shares a photo: {turn['blip_caption']}]"
    return text


def ingest(mem: Memory, sample: dict[str, object], before: int = 2, after: int = 1) -> int:
    conv = sample["conversation"]
    assert isinstance(conv, dict)
    scope = f"locomo:{sample['sample_id']}"
    n = 0
    sessions = sorted(
        (int(k.split("_")[1]) for k in conv if k.startswith("session_") and k[8:].isdigit()),
    )
    for number in sessions:
        turns = conv[f"session_{number}"]
        when_text = conv[f"session_{number}_date_time"]
        when = session_time(when_text)
        for i, turn in enumerate(turns):
            # Context the turn needs to stand alone: the session date and its neighbours — the
            # two turns before (usually the question it answers) and the one after. Chosen on
            # the first three conversations: (before, after) = (1,1) 72.7, (1,0) 73.0,
            # (2,2) 72.6, (2,0) 73.6, (2,1) 74.7 R@10.
            neighbours = [turn_text(t) for t in turns[max(0, i - before) : i]] + [
                turn_text(t) for t in turns[i + 1 : i + 1 + after]
            ]
            mem.remember(
                turn_text(turn),
                type="KT-CONTEXT",
                scope=scope,
                subject=f"locomo.{sample['sample_id']}.{turn['dia_id'].replace(':', '_')}",
                kind="interaction",
                created_at=when,
                created_by=f"amcp://ai.locomo.{turn['speaker'].lower()}",
                context=f"{when_text}. " + " ".join(neighbours),
                extensions={"x-dia-id": turn["dia_id"], "x-speaker": turn["speaker"]},
            )
            n += 1
    return n


def evidence_ids(qa: dict[str, object], known: set[str]) -> list[str]:
    out: list[str] = []
    for item in qa.get("evidence", []):  # type: ignore[union-attr]
        for raw in str(item).replace(",", ";").split(";"):
            part = raw.strip()
            if part in known and part not in out:
                out.append(part)
    return out


class CachedEmbedder:
    """An embedder that keeps vectors by (model, text) in a SQLite file (``--embed-cache``).

    Same vectors as the wrapped model, so recall is unchanged; only ingest time is not real.
    """

    def __init__(self, inner: Embedder, path: Path) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.dim = inner.dim
        self.db = sqlite3.connect(path)
        self.db.execute("CREATE TABLE IF NOT EXISTS emb (key TEXT PRIMARY KEY, vec BLOB)")

    def _key(self, text: str) -> str:
        return hashlib.sha256(f"{self.model_id}\0{text}".encode()).hexdigest()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        keys = [self._key(t) for t in texts]
        found: dict[str, np.ndarray] = {}
        for key in set(keys):
            row = self.db.execute("SELECT vec FROM emb WHERE key=?", (key,)).fetchone()
            if row:
                found[key] = np.frombuffer(row[0], dtype=np.float32)
        missing = [i for i, key in enumerate(keys) if key not in found]
        if missing:
            vecs = self.inner.embed([texts[i] for i in missing])
            for i, vec in zip(missing, vecs, strict=True):
                found[keys[i]] = vec
                self.db.execute(
                    "INSERT OR REPLACE INTO emb VALUES (?, ?)", (keys[i], vec.tobytes())
                )
            self.db.commit()
        return np.stack([found[key] for key in keys]) if keys else self.inner.embed([])

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed([text])[0]


def pick(spec: str, n: int) -> list[int]:
    """'0-4' / '5-9' / '0,3,7' / '' (all) → conversation indexes."""
    if not spec:
        return list(range(n))
    out: list[int] = []
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    if any(not 0 <= i < n for i in out):
        raise SystemExit(f"--conversations {spec!r}: there are {n} conversations (0-{n - 1})")
    return out


def summarise(per_cat: dict[int, dict[int, list[float]]]) -> dict[str, dict[str, float]]:
    table: dict[str, dict[str, float]] = {}
    all_scores: dict[int, list[float]] = defaultdict(list)
    for cat in sorted(per_cat):
        table[CATEGORIES[cat]] = {f"R@{k}": 100 * sum(v) / len(v) for k, v in per_cat[cat].items()}
        table[CATEGORIES[cat]]["questions"] = len(per_cat[cat][1])
        for k, v in per_cat[cat].items():
            all_scores[k].extend(v)
    table["overall (1-4)"] = {f"R@{k}": 100 * sum(v) / len(v) for k, v in all_scores.items()}
    table["overall (1-4)"]["questions"] = len(all_scores[1])
    return table


def show(title: str, table: dict[str, dict[str, float]]) -> None:
    print(title)
    print(f"{'category':16} {'n':>5} " + " ".join(f"{'R@' + str(k):>7}" for k in KS))
    for name, row in table.items():
        print(
            f"{name:16} {int(row['questions']):5d} " + " ".join(f"{row[f'R@{k}']:7.1f}" for k in KS)
        )


def _pg_store(server: str, where: Path, name: str) -> Any:
    """A PostgresStore in a new database ``locomo_<name>_<random>`` on ``server``."""
    import uuid
    from urllib.parse import urlsplit, urlunsplit

    import psycopg

    from amcp.keyring import Keyring
    from amcp.store.postgres import PostgresStore

    db_name = f"locomo_{name}_{uuid.uuid4().hex[:8]}".replace("-", "_")
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{db_name}"')
    dsn = urlunsplit(urlsplit(server)._replace(path="/" + db_name))
    return PostgresStore(dsn, Keyring(where / "keys"))


# Tuning uses the first five conversations; the last five are held out.
SPLITS = {"dev (conversations 0-4)": range(5), "held out (conversations 5-9)": range(5, 10)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--embedder", default="minilm")
    ap.add_argument("--limit", type=int, default=0, help="only the first N conversations")
    ap.add_argument("--conversations", default="", help="e.g. 0-4, 5-9 or 0,3,7 (default all)")
    ap.add_argument("--out", default="recall_locomo")
    ap.add_argument("--before", type=int, default=2, help="neighbour turns before, as context")
    ap.add_argument("--after", type=int, default=1, help="neighbour turns after, as context")
    ap.add_argument("--embed-cache", type=Path, help="SQLite file of cached embeddings")
    ap.add_argument("--store", type=Path, help="keep the built store here and reuse it")
    ap.add_argument(
        "--layout", choices=["shared", "per-conversation"], default="shared",
        help="shared: one store, one scope per conversation (the issue's method); "
        "per-conversation: one store each (the paper's)",
    )
    ap.add_argument(
        "--postgres", default="", metavar="DSN",
        help="store in PostgreSQL: a new database per store on this server (dropped after)",
    )
    ap.add_argument(
        "--tuning", default="", help="SearchTuning overrides, e.g. rrf_k=20,coverage_weight=0"
    )
    args = ap.parse_args()
    tuning = SearchTuning(
        **{
            key: type(getattr(SearchTuning(), key))(value)
            for key, _, value in (part.partition("=") for part in args.tuning.split(",") if part)
        }
    )
    samples = json.loads((DATA / "locomo" / "locomo10.json").read_text())
    chosen = pick(args.conversations, len(samples))
    if args.limit:
        chosen = chosen[: args.limit]
    per_conv: dict[int, dict[int, dict[int, list[float]]]] = {}
    latencies: list[float] = []
    turns = 0
    t_ingest = 0.0
    timed = not args.embed_cache
    model = "none"
    with tempfile.TemporaryDirectory() as tmp:
        where = args.store or Path(tmp)
        where.mkdir(parents=True, exist_ok=True)
        embedder: str | Embedder = args.embedder
        if args.embed_cache:
            embedder = CachedEmbedder(get_embedder(args.embedder), args.embed_cache)
        elif args.embedder == "minilm":
            embedder = get_embedder("minilm")  # loaded once, shared by the ten stores
        shared = args.layout == "shared"

        def open_store(name: str) -> tuple[Memory, bool]:
            db = where / f"{name}.db"
            built = where / f"{name}.json"
            wanted = {"context_window": [args.before, args.after],
                      "conversations": chosen if shared else name}
            reuse = args.store is not None and built.exists()
            reuse = reuse and json.loads(built.read_text()) == wanted
            if not reuse:
                for old in where.glob(f"{name}.db*"):
                    old.unlink()
            mem = Memory(db, embedder=embedder, store=_pg_store(args.postgres, where, name)
                         if args.postgres else None)
            mem.searcher = HybridSearcher(mem.store, mem.embedder, tuning)
            if args.store and not reuse:
                built.write_text(json.dumps(wanted))
            return mem, reuse

        def fill(mem: Memory, reuse: bool, indexes: list[int]) -> None:
            nonlocal turns, t_ingest, timed
            if reuse:
                timed = False
                turns += mem.stats().records
                return
            t0 = time.perf_counter()
            for index in indexes:
                turns += ingest(mem, samples[index], args.before, args.after)
            t_ingest += time.perf_counter() - t0

        def ask(mem: Memory, index: int) -> None:
            sample = samples[index]
            scope = f"locomo:{sample['sample_id']}"
            known = {
                t["dia_id"]
                for k, v in sample["conversation"].items()
                if k.startswith("session_") and isinstance(v, list)
                for t in v
            }
            per_cat = per_conv.setdefault(index, defaultdict(lambda: defaultdict(list)))
            for qa in sample["qa"]:
                cat = qa["category"]
                if cat not in CATEGORIES:
                    continue
                gold = evidence_ids(qa, known)
                if not gold:
                    continue
                res = mem.recall(qa["question"], k=max(KS), scope=scope, touch=False)
                latencies.append(res.took_ms)
                got = [
                    h.item.record.vendor_extensions.get("x-dia-id")
                    for h in res.hits
                    if h.item.record
                ]
                for k in KS:
                    found = len(set(got[:k]) & set(gold))
                    per_cat[cat][k].append(found / len(gold))

        if shared:
            # The layout: one store, one conversation = one scope. Every conversation
            # is ingested before any question, so no figure depends on the ingest order;
            # term statistics (IDF, common-term pruning) are the whole store's.
            mem, reuse = open_store("shared")
            fill(mem, reuse, chosen)
            for index in chosen:
                ask(mem, index)
            model = mem.embedder.model_id if mem.embedder else "none"
            mem.close()
        else:
            # One store per conversation, as in the paper: the retriever sees that
            # conversation only (IDF and common-term pruning are per store).
            for index in chosen:
                mem, reuse = open_store(f"conv-{index}")
                fill(mem, reuse, [index])
                ask(mem, index)
                model = mem.embedder.model_id if mem.embedder else "none"
                mem.close()

    def merged(indexes: Iterable[int]) -> dict[int, dict[int, list[float]]]:
        out: dict[int, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
        for i in indexes:
            for cat, by_k in per_conv.get(i, {}).items():
                for k, v in by_k.items():
                    out[cat][k].extend(v)
        return out

    table = summarise(merged(chosen))
    show(f"LoCoMo evidence recall — {len(chosen)} conversations, {turns} turns, {model}", table)
    splits = {
        name: summarise(merged(idx))
        for name, idx in SPLITS.items()
        if set(idx) <= set(chosen) and len(idx) < len(chosen)
    }
    for name, sub in splits.items():
        show(name, sub)
    ingest_rate = turns / t_ingest if timed else None
    rate = f"{ingest_rate:.0f} turns/s" if ingest_rate else "not measured (cached or reused)"
    print(
        f"ingest {rate} (remember, one at a time); recall p50 "
        f"{median(latencies):.1f} ms p95 {percentile(latencies, 95):.1f} ms; "
        f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    path = save(
        args.out,
        {
            "embedder": model,
            "context_window": [args.before, args.after],
            "layout": args.layout,
            "tuning": asdict(tuning),
            "conversations": chosen,
            "turns": turns,
            "recall": table,
            "splits": splits,
            "ingest_per_s": ingest_rate,
            "recall_ms": {"p50": median(latencies), "p95": percentile(latencies, 95)},
            "load_average": os.getloadavg(),
        },
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
