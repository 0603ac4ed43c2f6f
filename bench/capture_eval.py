"""Precision/recall of the capture rules on the hand-labelled turns, per category and split.

    .venv/bin/python bench/capture_eval.py [--data PATH] [--out PATH] [--errors]

Each labelled turn is run through a fresh engine (no snapshots/checkpoints, no dedup
across turns) and the set of captured categories is compared with its labels. Both the
`dev` split (rules were tuned on it) and the `heldout` split (written after the rules were
frozen) are reported; only the held-out numbers say anything about unseen phrasing.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from collections import Counter
from pathlib import Path

from amcp.agent.capture import CaptureConfig, CaptureEngine, Category

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests/agent/data/capture_labelled.jsonl"
OUT = ROOT / "bench/results/capture_eval.json"
CONFIG = CaptureConfig(checkpoint_every=0, snapshots=False)


def predict(role: str, content: str) -> set[str]:
    engine = CaptureEngine(CONFIG)
    return {o.category.value for o in engine.process({"role": role, "content": content})
            if hasattr(o, "category")}


def prf(tp: int, fp: int, fn: int) -> dict[str, float | int | None]:
    p = tp / (tp + fp) if tp + fp else None
    r = tp / (tp + fn) if tp + fn else None
    f = 2 * p * r / (p + r) if p and r else None
    return {"tp": tp, "fp": fp, "fn": fn, "precision": p, "recall": r, "f1": f}


def evaluate(rows: list[dict[str, object]]) -> tuple[dict[str, object], list[str]]:
    counts: dict[str, Counter[str]] = {c.value: Counter() for c in Category}
    errors: list[str] = []
    for row in rows:
        gold = set(row["labels"])  # type: ignore[call-overload]
        pred = predict(str(row["role"]), str(row["content"]))
        for cat, c in counts.items():
            if cat in pred and cat in gold:
                c["tp"] += 1
            elif cat in pred:
                c["fp"] += 1
                errors.append(f"FP {cat:16} {row['content']}")
            elif cat in gold:
                c["fn"] += 1
                errors.append(f"FN {cat:16} {row['content']}")
    per = {cat: prf(c["tp"], c["fp"], c["fn"]) for cat, c in counts.items()}
    total = Counter[str]()
    for c in counts.values():
        total.update(c)
    return {"turns": len(rows), "per_category": per,
            "micro": prf(total["tp"], total["fp"], total["fn"])}, errors


def fmt(x: object) -> str:
    return f"{x:.3f}" if isinstance(x, float) else "  -  "


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--errors", action="store_true", help="list every false positive/negative")
    args = ap.parse_args()
    rows = [json.loads(line) for line in args.data.read_text("utf-8").splitlines() if line.strip()]
    t0 = time.perf_counter()
    report: dict[str, object] = {
        "data": str(args.data.relative_to(ROOT) if args.data.is_relative_to(ROOT) else args.data),
        "platform": {"python": sys.version.split()[0],
                     "implementation": platform.python_implementation(),
                     "system": platform.system(), "release": platform.release(),
                     "machine": platform.machine(), "processor": platform.processor()},
        "splits": {},
    }
    splits: dict[str, object] = {}
    for split in ("dev", "heldout", "all"):
        part = rows if split == "all" else [r for r in rows if r.get("split", "dev") == split]
        if not part:
            continue
        result, errors = evaluate(part)
        splits[split] = result
        n_en = sum(r["lang"] == "en" for r in part)
        print(f"\n== {split}: {len(part)} turns (en {n_en}, zh {len(part) - n_en})")
        print(f"{'category':18} {'P':>6} {'R':>6} {'F1':>6}  tp fp fn")
        per = result["per_category"]
        assert isinstance(per, dict)
        for cat, m in [*per.items(), ("micro", result["micro"])]:
            print(f"{cat:18} {fmt(m['precision']):>6} {fmt(m['recall']):>6} {fmt(m['f1']):>6}"
                  f"  {m['tp']:2} {m['fp']:2} {m['fn']:2}")
        if args.errors and split != "all":
            print("\n".join(errors))
    report["splits"] = splits
    report["seconds"] = round(time.perf_counter() - t0, 3)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", "utf-8")
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
