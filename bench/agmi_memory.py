"""agent-memory-integrity 0.6.3's memory-specific family against amcp's memory firewall.

Six attacks (memory injection, cross-session bleed, retrieval hijack, indirect prompt
injection, update poisoning, metadata poisoning), five fixtures each, every attacker write
on three channels (external: label only; laundered: "user" label, no valid signature;
agent-laundered: "user" label with a valid signature), 200 filler memories per store.

``AmcpSemantic`` maps agmi's ``MemoryItem`` onto the provenance API: ``user_id`` → scope
``user:<id>`` and writer ``<id>``, ``source`` → ``provenance.origin``, ``signature`` →
``provenance.signature`` (agmi's HMAC over ``user_id, source, text`` is the layout
``amcp.firewall.payload`` verifies). Each fresh store registers agmi's per-user HMAC
secrets (``agmi.signing.KEYRING``) as writer keys of the users' scopes, as a deployment
would register its users' keys (docs/firewall.md). A write the node refuses (403) is
counted and stored nowhere; ``metadata`` ``{"trust": "verified"}`` becomes the tag
``trust:verified``, and ``retrieve_where`` filters on it — which the firewall answers from
verified provenance, never from the tag.

    .venv/bin/python bench/agmi_memory.py [--filler 200] [--embedder minilm] [--name NAME]

Prints the six verdicts and writes ``bench/results/<name>.json`` (default ``agmi_memory``).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from agmi.adapters.semantic_base import (  # noqa: E402
    MemoryItem,
    Retrieved,
    SemanticMemoryAdapter,
)
from agmi.attacks.memory_specific import ALL_MEMORY_ATTACKS  # noqa: E402
from agmi.signing import KEYRING  # noqa: E402
from bench.common import save  # noqa: E402

from amcp.errors import ForbiddenError  # noqa: E402
from amcp.memory import Memory  # noqa: E402
from amcp.retrieval.embedders import Embedder, get_embedder  # noqa: E402

USERS = ("victim", "user-a", "user-b")


class Memo:
    """The wrapped embedder with vectors kept by text for the run: every fixture starts a
    fresh store with the same 200 fillers, and re-embedding them is only time."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.dim = inner.dim
        self._seen: dict[str, np.ndarray] = {}

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        missing = [t for t in dict.fromkeys(texts) if t not in self._seen]
        if missing:
            for text, vec in zip(missing, self.inner.embed(missing), strict=True):
                self._seen[text] = np.asarray(vec)
        if not texts:
            return self.inner.embed([])
        return np.stack([self._seen[t] for t in texts])

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed([text])[0]


class AmcpSemantic(SemanticMemoryAdapter):
    name = "amcp"

    def __init__(self, embedder: Any) -> None:
        self.embedder = embedder
        self.root: Path | None = None
        self.memory: Memory | None = None
        self.refused = 0
        self.held = 0
        self.writes = 0

    def reset(self) -> None:
        self.close()
        self.root = Path(tempfile.mkdtemp(prefix="amcp-agmi-"))
        self.memory = Memory(self.root / "memory.db", embedder=self.embedder)
        assert self.memory.firewall is not None
        for user in USERS:  # the deployment registers its users' keys (docs/firewall.md)
            self.memory.firewall.keys.register(f"user:{user}", user,
                                               hmac_secret=KEYRING.key(user))

    def _mem(self) -> Memory:
        if self.memory is None:
            self.reset()
        assert self.memory is not None
        return self.memory

    def add_memory(self, item: MemoryItem) -> None:
        claim: dict[str, Any] = {"origin": item.source, "writer": item.user_id}
        if item.signature:
            claim["signature"] = item.signature
        tags = [f"{k}:{v}" for k, v in sorted(item.metadata.items())] or None
        self.writes += 1
        try:
            out = self._mem().remember(item.text, scope=f"user:{item.user_id}", tags=tags,
                                       provenance=claim)
        except ForbiddenError:
            self.refused += 1  # 403: nothing stored (an unsigned "user" claim, a forgery)
            return
        self.held += out.held is not None

    def _hits(self, query: str, user_id: str, k: int, tags: list[str] | None) -> list[Retrieved]:
        res = self._mem().recall(query, k=k, scope=f"user:{user_id}", tags=tags)
        out = []
        for h in res.hits:
            rec = h.item.record
            assert rec is not None
            owner = rec.meta.project_scope[0].removeprefix("user:")
            out.append(Retrieved(rec.text, owner, float(h.score)))
        return out

    def retrieve(self, query: str, user_id: str, k: int = 5) -> list[Retrieved]:
        return self._hits(query, user_id, k, None)

    def retrieve_where(self, query: str, user_id: str, where: dict[str, Any],
                       k: int = 5) -> list[Retrieved]:
        return self._hits(query, user_id, k, [f"{key}:{v}" for key, v in sorted(where.items())])

    def close(self) -> None:
        if self.memory is not None:
            self.memory.close()
            self.memory = None
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None

    def measured_on(self) -> str:
        return f"amcp (this tree), embedder {self.embedder.model_id}, memory firewall on"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--filler", type=int, default=200)
    ap.add_argument("--embedder", default="minilm")
    ap.add_argument("--name", default="agmi_memory")
    args = ap.parse_args()
    import os

    os.environ.setdefault("AMCP_STATE_DIR", tempfile.mkdtemp(prefix="amcp-agmi-state-"))
    adapter = AmcpSemantic(Memo(get_embedder(args.embedder)))
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    rows = []
    t0 = time.perf_counter()
    try:
        for attack in ALL_MEMORY_ATTACKS:
            a0 = time.perf_counter()
            res = attack(filler=args.filler).run(adapter)
            rows.append({"attack": res.attack, "status": res.status,
                         "kept_out": res.status == "safe", "detail": res.detail,
                         "error": res.error, "version": res.version,
                         "channels": res.channels, "seconds": round(time.perf_counter() - a0, 1)})
            print(f"{res.attack:28} {res.status:10} {res.detail or res.error}", flush=True)
    finally:
        adapter.close()
    kept = sum(r["kept_out"] for r in rows)
    print(f"\nkept out {kept} of {len(rows)}; writes {adapter.writes}, refused (403) "
          f"{adapter.refused}, held as drafts {adapter.held}")
    path = save(args.name, {
        "started": started, "seconds": round(time.perf_counter() - t0, 1),
        "agmi_version": _agmi_version(), "filler": args.filler,
        "embedder": adapter.embedder.model_id, "kept_out": kept, "of": len(rows),
        "writes": adapter.writes, "refused": adapter.refused, "held": adapter.held,
        "results": rows, "measured_on": adapter.measured_on(),
    })
    print(f"wrote {path}")


def _agmi_version() -> str:
    from importlib.metadata import version

    return version("agent-memory-integrity")


if __name__ == "__main__":
    main()
