"""``amcp demo``: a scripted walkthrough of the memory engine on the embedded default."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from amcp.cli.common import out
from amcp.memory import Memory

CLAUDE = "amcp://ai.anthropic.claude-code.fp-0000000000000001.local"
CODEX = "amcp://ai.openai.codex.fp-0000000000000002.local"

FACTS: list[tuple[str, str, dict[str, object]]] = [
    (
        CLAUDE,
        "Alice prefers tabs over spaces in Python code",
        {"type": "KT-PRINCIPLE", "scope": "user:alice", "kind": "preference", "tags": ["style"]},
    ),
    (
        CLAUDE,
        "The payments service must call attachAlgoOrds to set take-profit and stop-loss; "
        "tpTriggerPx alone is silently ignored",
        {"type": "KT-PITFALL", "scope": "project:payments", "tags": ["okx", "api"]},
    ),
    (
        CLAUDE,
        "Project payments deploys from the release branch every Thursday",
        {"type": "KT-FACT", "scope": "project:payments"},
    ),
    (
        CODEX,
        "Integration tests for payments need the sandbox API key from the team vault",
        {"type": "KT-FACT", "scope": "project:payments", "tags": ["testing"]},
    ),
    (
        CODEX,
        "We chose PostgreSQL over MongoDB for the ledger because we need transactions",
        {"type": "KT-DECISION", "scope": "project:payments"},
    ),
    (
        CODEX,
        "Alice is on holiday until 12 December",
        {"type": "KT-CONTEXT", "scope": "user:alice", "kind": "lifefact"},
    ),
]


def run_demo(directory: Path | None, embedder: str) -> None:
    """The walkthrough in ``directory``, kept for a look afterwards; without one, in a
    temporary directory that is removed at the end (stores, keys and witnesses alike)."""
    if directory is not None:
        Path(directory).mkdir(parents=True, exist_ok=True)
        _walkthrough(Path(directory), embedder)
        out.print(f"[dim]the demo stores stay in {directory}[/dim]")
        return
    with tempfile.TemporaryDirectory(prefix="amcp-demo-") as tmp:
        _walkthrough(Path(tmp), embedder)
    out.print("[dim]temporary demo stores removed (pass --directory to keep them)[/dim]")


def _walkthrough(base: Path, embedder: str) -> None:
    first, second = base / "laptop" / "memory.db", base / "new-agent" / "memory.db"
    witness = [base / "witness"]  # beside the demo stores: removed with them
    chosen = None if embedder == "none" else embedder
    out.rule("[bold]amcp demo[/bold]")
    out.print(f"stores under {base}")
    t0 = time.perf_counter()
    export = base / "export.ndjson"
    with Memory(first, embedder=chosen, witness_dirs=witness) as mem:
        _first_agent(mem, first, export)
    with Memory(second, embedder=chosen, witness_dirs=witness) as other:
        _second_agent(other, export)
    out.print(f"[dim]done in {time.perf_counter() - t0:.1f} s[/dim]")


def _first_agent(mem: Memory, path: Path, export: Path) -> None:
    """Steps 1-7: remember, dedup, recall, supersede, invalidate, purge, export."""
    out.print(
        f"1. opened {path.name} "
        f"(embedder: {mem.embedder.model_id if mem.embedder else 'none'})"
    )
    ids = []
    for agent, text, fields in FACTS:
        res = mem.remember(text, created_by=agent, **fields)  # type: ignore[arg-type]
        ids.append(res.knowledge_id)
        out.print(
            f"   {agent.split('.')[1]:>9} remembered {res.knowledge_id[:14]}…  {text[:60]}"
        )
    again = mem.remember(FACTS[2][1], created_by=CODEX, **FACTS[2][2])  # type: ignore[arg-type]
    out.print(
        f"2. the same fact from another agent → already stored as {again.knowledge_id[:14]}…"
    )
    for q, scope in [
        ("how do I set a stop loss on OKX orders?", "project:payments"),
        ("what indentation does Alice like?", "user:alice"),
    ]:
        hits = mem.recall(q, k=2, scope=scope).hits
        out.print(f"3. recall {q!r} in {scope}:")
        for h in hits:
            assert h.item.record is not None
            out.print(f"     {h.score:.4f}  {h.item.record.text[:70]}")
    new = mem.supersede(
        ids[2], "Project payments deploys from the release branch every Tuesday"
    )
    out.print(f"4. superseded the Thursday deploy fact by {new.knowledge_id[:14]}…")
    mem.invalidate(ids[5], reason="Alice came back early")
    out.print("5. invalidated the holiday fact (kept, with its reason)")
    mem.purge(ids[3], reason="privacy request")
    out.print("6. purged the vault note: content erased, tombstone kept")
    with export.open("w", encoding="utf-8") as fh:
        rep = mem.export(fh)
    out.print(
        f"7. exported {rep.records} records + {rep.tombstones} tombstone to {export.name}"
    )


def _second_agent(other: Memory, export: Path) -> None:
    """Steps 8-10: import twice (idempotent), recall, verify."""
    with export.open("rb") as fh:
        imp = other.import_(fh)
    with export.open("rb") as fh:
        again_rep = other.import_(fh)
    out.print(
        f"8. imported into a second store: {imp.created} created, {imp.tombstones} tombstone;"
        f" re-import: {again_rep.created} created, {again_rep.already} already stored"
    )
    hits = other.recall("when does payments deploy?", k=1, scope="project:payments").hits
    assert hits
    assert hits[0].item.record is not None
    out.print(f"9. the new agent recalls: {hits[0].item.record.text!r}")
    s = other.stats()
    ok = other.store.verify(full=True).ok
    out.print(
        f"10. second store: {s.records} records {s.by_lifecycle}; integrity "
        + ("[green]ok[/green]" if ok else "[red]FAILED[/red]")
    )
