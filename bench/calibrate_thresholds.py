"""Relevance thresholds calibrated to the packaged MiniLM (issue 20).

    .venv/bin/python bench/calibrate_thresholds.py

Stores the facts of bench/data/threshold_calibration.json, asks the questions each fact
answers and questions none answers, and prints the query cosine (``Hit.relevance``) of the
answering fact and the best cosine an unanswerable question reaches, beside the fused
recall score (which ranks, and cannot say whether the first hit is any good). The defaults
``resolve_recall`` (RELEVANCE_THRESHOLD) and AMQL ``semantic_match`` / ``centroid_match``
(DEFAULT_MATCH_THRESHOLD) use sit between the two populations. Writes
bench/results/calibrate_thresholds.json.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

from bench.common import save  # noqa: E402

from amcp.agent.capture import resolve_recall  # noqa: E402
from amcp.agent.capture.recovery import RELEVANCE_THRESHOLD  # noqa: E402
from amcp.amql.schema import DEFAULT_MATCH_THRESHOLD  # noqa: E402
from amcp.memory import Memory  # noqa: E402

DATA = ROOT / "bench" / "data" / "threshold_calibration.json"


def main() -> None:
    data = json.loads(DATA.read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory() as tmp, \
            Memory(Path(tmp) / "m.db", witness_dirs=[Path(tmp) / "w"]) as mem:
        ids = [mem.remember(f, scope="cal").knowledge_id for f in data["facts"]]
        answered, top1, found = [], 0, 0
        for question, index in data["relevant"]:
            hits = mem.recall(question, k=5, scope="cal").hits
            own = [h for h in hits if h.knowledge_id == ids[index]]
            answered.append({"q": question, "cosine": own[0].relevance if own else None,
                             "fused": hits[0].score if hits else None})
            top1 += bool(hits) and hits[0].knowledge_id == ids[index]
            found += type(resolve_recall(question, hits)).__name__ == "Found"
        unanswerable, not_found = [], 0
        for question in data["unrelated"]:
            hits = mem.recall(question, k=5, scope="cal").hits
            best = max((h.relevance or 0.0 for h in hits), default=0.0)
            unanswerable.append({"q": question, "best_cosine": best,
                                 "fused": hits[0].score if hits else None})
            not_found += type(resolve_recall(question, hits)).__name__ == "NotFound"
        model = mem.embedder.model_id if mem.embedder else "none"
    cos = sorted(a["cosine"] for a in answered if a["cosine"] is not None)
    neg = sorted(u["best_cosine"] for u in unanswerable)
    result = {
        "model": model, "relevance_threshold": RELEVANCE_THRESHOLD,
        "match_threshold": DEFAULT_MATCH_THRESHOLD,
        "answered_cosine_min_median_max": [cos[0], cos[len(cos) // 2], cos[-1]],
        "unanswerable_best_cosine_sorted": [round(x, 3) for x in neg],
        "top1": f"{top1}/{len(answered)}",
        "resolve_recall_found": f"{found}/{len(answered)}",
        "resolve_recall_not_found": f"{not_found}/{len(unanswerable)}",
        "answered": answered, "unanswerable": unanswerable,
    }
    for key in ("model", "answered_cosine_min_median_max", "unanswerable_best_cosine_sorted",
                "top1", "resolve_recall_found", "resolve_recall_not_found"):
        print(f"{key:32} {result[key]}")
    print(f"wrote {save('calibrate_thresholds', result)}")


if __name__ == "__main__":
    main()
