"""How often the memory firewall's content checks fire on honest data.

Two sets: every LoCoMo turn (``../shared/bench-data/locomo/locomo10.json``, the text
``bench/recall_locomo.py`` stores: "Speaker: text [shares a photo: …]") and the capture
eval set (``tests/agent/data/capture_labelled.jsonl``, what ``bench/capture_eval.py``
scores). For each: the share of texts the instruction rules flag (target ≤ 0.5 %), the
share of term-density outliers, the share that make an attribute statement (what the
contradiction check compares), and every flagged text.

    .venv/bin/python bench/firewall_flags.py [--name NAME]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from bench.common import DATA, save  # noqa: E402
from bench.recall_locomo import turn_text  # noqa: E402

from amcp.firewall import contradiction, density, detector  # noqa: E402

CAPTURE = ROOT / "tests/agent/data/capture_labelled.jsonl"


def locomo_texts() -> list[str]:
    samples = json.loads((DATA / "locomo" / "locomo10.json").read_text())
    out = []
    for sample in samples:
        for key, turns in sample["conversation"].items():
            if key.startswith("session_") and isinstance(turns, list):
                out.extend(turn_text(t) for t in turns)
    return out


def capture_texts() -> list[str]:
    lines = CAPTURE.read_text().splitlines()
    return [json.loads(line)["content"] for line in lines if line.strip()]


def measure(texts: list[str]) -> dict[str, object]:
    t0 = time.perf_counter()
    flagged = [(t, detector.flags(t)) for t in texts]
    took = time.perf_counter() - t0
    hits = [{"text": t, "rules": list(r)} for t, r in flagged if r]
    stuffed = [t for t in texts if density.stuffed(t)]
    claims = sum(contradiction.claim_of(t) is not None for t in texts)
    n = len(texts)
    return {
        "texts": n, "flagged": len(hits), "flag_rate_pct": round(100 * len(hits) / n, 3),
        "stuffed": len(stuffed), "stuffed_pct": round(100 * len(stuffed) / n, 3),
        "attribute_statements": claims, "scan_us_per_text": round(1e6 * took / n, 1),
        "flagged_texts": hits, "stuffed_texts": stuffed[:20],
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--name", default="firewall_flags")
    args = ap.parse_args()
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    sets = {"locomo_turns": measure(locomo_texts()), "capture_eval": measure(capture_texts())}
    for name, r in sets.items():
        print(f"{name:14} {r['flagged']:4}/{r['texts']} flagged ({r['flag_rate_pct']} %), "
              f"{r['stuffed']} stuffed, {r['attribute_statements']} attribute statements, "
              f"{r['scan_us_per_text']} µs/text")
        for hit in r["flagged_texts"][:10]:  # type: ignore[index]
            print(f"    {hit['rules']}: {hit['text'][:140]}")
    print(f"wrote {save(args.name, {'started': started, **sets})}")


if __name__ == "__main__":
    main()
