"""``amcp context | outcome | signal | event``: the CSE and evolution commands.

Plain functions, listed in ``amcp.cli.commands``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from amcp.cli.common import emit_json, friendly, open_memory, out, pick
from amcp.cli.options import EmbedOpt, JsonOpt, StoreOpt
from amcp.errors import ValidationError


@friendly
def context(
    task: Annotated[str, typer.Option("--task", "-t", help="What the agent is about to do.")],
    budget: Annotated[int, typer.Option("--budget", "-b", help="Context budget in tokens.")] = 8000,
    project: Annotated[str | None, typer.Option(help="Project name for the confirmation.")] = None,
    scope: Annotated[list[str] | None, typer.Option("--scope", help="e.g. project:x")] = None,
    working: Annotated[int, typer.Option(help="Tokens the conversation already uses.")] = 0,
    now: Annotated[float | None, typer.Option(help="Clock (epoch s), for reproducible packs.")]
    = None,
    store: StoreOpt = None,
    embedder: EmbedOpt = "auto",
    json_: JsonOpt = False,
) -> None:
    """Build a deterministic cold-boot context pack (pointers, zones, digest)."""
    from amcp.cse.tiers import tiers_of

    with open_memory(store, embedder) as mem:
        pack = mem.context(task, budget_tokens=budget, project=project, scopes=scope,
                           working_tokens=working, now=now)
    if json_:
        emit_json(pack.to_dict())
        return
    out.print(pack.confirmation)
    for zone, use in pack.zones.items():
        out.print(f"  {zone.value:<16} {use.used:>7} / {use.budget:<7} tokens")
    tiers = tiers_of(pack)
    summaries = dict(tiers.summaries)
    for kid, line in zip(tiers.ids, tiers.pointers, strict=True):
        out.print(line, markup=False)
        if kid in summaries and summaries[kid] not in line:
            out.print(f"    {summaries[kid]}", markup=False)
    for sig in pack.urgent_signals:
        out.print(f"URGENT {sig['signal_id']} emitted {sig['emitted_at']}", markup=False)
    for why in pack.degraded:
        out.print(f"degraded: {why}", markup=False)
    out.print(f"digest {pack.digest}")


@friendly
def outcome(
    ids: Annotated[
        list[str], typer.Argument(help="Knowledge ids the agent used (a unique start is enough).")
    ],
    result: Annotated[str, typer.Option("--result", "-r", help="success | failure | neutral")],
    store: StoreOpt = None,
    embedder: EmbedOpt = "auto",
    json_: JsonOpt = False,
) -> None:
    """Learn trust weights from the outcome of a task."""
    with open_memory(store, embedder) as mem:
        updates = mem.outcome([pick(mem, ref) for ref in ids], result)
    if json_:
        emit_json([{"knowledge_id": u.knowledge_id, "weight": u.weight,
                    "confidence": u.confidence, "previous": u.previous} for u in updates])
        return
    for u in updates:
        out.print(f"{u.knowledge_id}  weight {u.previous:.3f} → {u.weight:.3f}  "
                  f"confidence {u.confidence:.3f}")


@friendly
def signal(
    file: Annotated[str, typer.Argument(help="A JSON file with the signal, or - for stdin.")],
    store: StoreOpt = None,
    embedder: EmbedOpt = "auto",
    json_: JsonOpt = False,
) -> None:
    """Record a QEF signal (or a status change of one) from JSON."""
    text = sys.stdin.read() if file == "-" else Path(file).read_text(encoding="utf-8")
    try:
        data: Any = json.loads(text)
    except ValueError as exc:
        raise ValidationError("signal", f"not valid JSON: {exc}") from None
    with open_memory(store, embedder) as mem:
        res = mem.signal(data)
    if json_:
        emit_json({"signal_id": res.signal_id, "knowledge_id": res.signal_knowledge_id,
                   "status": res.status.value, "changed": res.changed,
                   "updated": [{"knowledge_id": u.knowledge_id, "weight": u.weight}
                               for u in res.updated]})
        return
    verb = "recorded" if res.changed else "unchanged"
    out.print(f"{verb} {res.signal_id} [{res.status.value}] as {res.signal_knowledge_id}")
    for u in res.updated:
        out.print(f"  {u.knowledge_id} weight → {u.weight:.3f}")


@friendly
def event(
    name: Annotated[str, typer.Argument(help="Event name listed in records' decay models.")],
    store: StoreOpt = None,
    embedder: EmbedOpt = "auto",
    json_: JsonOpt = False,
) -> None:
    """Fire an invalidation event: records whose decay model lists it are invalidated."""
    with open_memory(store, embedder) as mem:
        done = mem.fire_event(name)
    if json_:
        emit_json({"event": name, "invalidated": list(done)})
        return
    out.print(f"event {name}: {len(done)} record(s) invalidated")
    for kid in done:
        out.print(f"  {kid}")


__all__ = ["context", "event", "outcome", "signal"]
