"""What opening the MiniLM ONNX graph costs a new process, and what a query costs after it.

    python3 bench/onnx_session.py [--repeats 5]

Each variant runs in a fresh process (as ``amcp recall`` does), and reports the CPU time of
``InferenceSession(...)`` (after ``import onnxruntime``), then the CPU time of one query
(12 tokens) and of one batch (16 x 30 tokens), single-threaded, once the session is warm:

* ``export``: the cached export as exported (weights inline, optimisers run at load);
* ``export-no-opt``: the same with no optimiser (what optimising costs at load);
* ``prepared``: the copy ``amcp init`` prepares (retrieval/onnxserve.py: optimised once,
  weights in a file beside it, no optimiser at load);
* ``prepared-no-prepack``: the same without weight pre-packing (cheaper to open, slower to
  run: the choice the figures below argue against).

Needs the machine's export (``amcp init`` makes it). Writes bench/results/onnx_session.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

from bench.common import median, save  # noqa: E402

PROBE = r"""
import json, sys, time
import numpy as np
import onnxruntime as ort
from amcp.retrieval.onnxserve import session_options
path, prepared, prepack = sys.argv[1], sys.argv[2] == "1", sys.argv[3] == "1"
opts = session_options(1, prepared=prepared)
if sys.argv[4] == "0":
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
if not prepack:
    opts.add_session_config_entry("session.disable_prepacking", "1")
t = time.process_time()
sess = ort.InferenceSession(path, sess_options=opts, providers=["CPUExecutionProvider"])
open_ms = (time.process_time() - t) * 1000
rng = np.random.default_rng(0)
out = {"open_cpu_ms": open_ms}
for name, shape, n in (("query_cpu_ms", (1, 12), 40), ("batch16_cpu_ms", (16, 30), 8)):
    ids = rng.integers(1000, 20000, shape)
    feed = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
    sess.run(None, feed)
    t = time.process_time()
    for _ in range(n):
        sess.run(None, feed)
    out[name] = (time.process_time() - t) * 1000 / n
print(json.dumps(out))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    from amcp.retrieval import onnxserve
    from amcp.retrieval.minilm import MiniLMEmbedder, onnx_path

    MiniLMEmbedder(precision="fp32").load()  # the export and its prepared copy, if missing
    export = onnx_path()
    prepared = onnxserve.serving_dir(export) / onnxserve.GRAPH
    variants = {  # path, prepared, prepack, optimise
        "export": (export, "0", "1", "1"),
        "export-no-opt": (export, "0", "1", "0"),
        "prepared": (prepared, "1", "1", "0"),
        "prepared-no-prepack": (prepared, "1", "0", "0"),
    }
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"),
                                                      os.environ.get("PYTHONPATH", "")]))
    result: dict[str, object] = {"repeats": args.repeats, "load_average": os.getloadavg()}
    for name, (path, prep, prepack, opt) in variants.items():
        runs = [json.loads(subprocess.run(
            [sys.executable, "-c", PROBE, str(path), prep, prepack, opt], env=env, check=True,
            capture_output=True, text=True).stdout) for _ in range(args.repeats)]
        result[name] = {k: round(median([r[k] for r in runs]), 2) for k in runs[0]}
        print(name, json.dumps(result[name]))
    print(f"wrote {save('onnx_session', result)}")


if __name__ == "__main__":
    main()
