"""The core commands (``init``, ``remember``, ``recall``, ``show`` …): each a few lines over
``Memory``. Plain functions; ``amcp.cli.commands`` names them and where they live."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from amcp.cli.common import (
    default_home,
    default_scope,
    emit_json,
    friendly,
    open_memory,
    out,
    pick,
    read_text_input,
    require_store,
    store_location,
    warm_up,
)
from amcp.cli.options import EmbedOpt, JsonOpt, ScopesOpt, StoreOpt, TypesOpt
from amcp.cli.views import hit_json, item_json, print_item
from amcp.refs import short_id

if TYPE_CHECKING:
    from amcp.memory_writes import WriteOutcome


@friendly
def init(store: StoreOpt = None, embedder: EmbedOpt = "auto") -> None:
    """Create a store (idempotent)."""
    with open_memory(store, embedder, create=True) as mem:
        warm_up(mem)  # prepares the model now, so no later command or request waits for it
        stats = mem.stats()
        out.print(
            f"store ready at {store_location(store)} ({stats.records} records, "
            f"embedder {stats.embedding_model or 'none'})"
        )


IdArg = Annotated[
    str, typer.Argument(help="The record's id, or a unique start of it (K-3f2a or 3f2a).")
]


@friendly
def remember(
    text: Annotated[
        str | None,
        typer.Argument(help="What to remember; - reads it from stdin (or use --file)."),
    ] = None,
    file: Annotated[
        Path | None, typer.Option("--file", "-f", help="Read the text from this file.")
    ] = None,
    scope: Annotated[
        list[str] | None,
        typer.Option("--scope", help="Who or what it is about, e.g. user:alice (repeatable)."),
    ] = None,
    type_: Annotated[
        str, typer.Option("--type", "-t", help="KT-FACT, KT-PITFALL, KT-DECISION, ...")
    ] = "KT-FACT",
    tag: Annotated[list[str] | None, typer.Option("--tag", help="A tag (repeatable).")] = None,
    kind: Annotated[str | None, typer.Option(help="preference, task, skill, ...")] = None,
    confidence: Annotated[
        float, typer.Option(help="How sure the writer is, 0 to 1.")
    ] = 0.9,
    ttl: Annotated[float | None, typer.Option(help="Seconds until it expires.")] = None,
    sensitive: Annotated[
        bool, typer.Option(help="Encrypt at rest; redacted in recall and exports.")
    ] = False,
    origin: Annotated[str | None, typer.Option(
        help="user, agent, tool, external, import or peer (docs/firewall.md)")] = None,
    writer: Annotated[str | None, typer.Option(help="The signing writer's identity.")] = None,
    signature: Annotated[str | None, typer.Option(help="The writer's signature.")] = None,
    store: StoreOpt = None,
    embedder: EmbedOpt = "auto",
    json_: JsonOpt = False,
) -> None:
    """Store a memory (text as an argument, from stdin with -, or from --file)."""
    body = read_text_input(text, file)
    claim = None
    if origin or writer or signature:
        claim = {"origin": origin or "user", "writer": writer, "signature": signature}
        claim = {k: v for k, v in claim.items() if v is not None}
    with open_memory(store, embedder, create=True) as mem:
        res = mem.remember(
            body, scope=scope or [default_scope()],  # none given: this project's, never "*"
            type=type_, tags=tag, kind=kind, confidence=confidence, ttl=ttl,
            sensitive=sensitive, provenance=claim,
        )
    _report_write(res, json_)


def _report_write(res: WriteOutcome, json_: bool) -> None:
    if json_:
        emit_json({"knowledge_id": res.knowledge_id, "status": int(res.status),
                   "duplicate_of": res.duplicate_of, "near_duplicates": res.near_duplicates,
                   "held": res.held})
        return
    verb = "stored" if res.created else "already stored"
    out.print(f"{verb} {res.knowledge_id}")
    if res.held:
        out.print(f"  held as a draft: {res.held} (amcp drafts; amcp confirm ID)")
    for kid, score in res.near_duplicates:
        out.print(f"  near-duplicate of {kid} (cosine {score:.3f})")


@friendly
def recall(
    query: Annotated[str, typer.Argument(help="What to look for, in your own words.")],
    k: Annotated[int, typer.Option("-k", help="How many results.")] = 10,
    scope: ScopesOpt = None,
    type_: TypesOpt = None,
    tag: Annotated[
        list[str] | None, typer.Option("--tag", help="Only records with every tag given.")
    ] = None,
    store: StoreOpt = None,
    embedder: EmbedOpt = "auto",
    json_: JsonOpt = False,
) -> None:
    """Search memories (hybrid lexical + vector)."""
    with open_memory(store, embedder) as mem:
        res = mem.recall(query, k=k, scope=scope, types=type_, tags=tag)
    if json_:
        emit_json(
            {
                "query": query,
                "took_ms": round(res.took_ms, 2),
                "results": [hit_json(h, res.trust.get(h.knowledge_id)) for h in res.hits],
            }
        )
        return
    if not res.hits:
        out.print("nothing found")
        return
    from rich.table import Table

    table = Table("score", "id", "type", "text", "from", box=None)
    for h in res.hits:
        rec = h.item.record
        assert rec is not None
        trust = res.trust.get(h.knowledge_id)
        table.add_row(f"{h.score:.4f}", short_id(h.knowledge_id), rec.type.value,
                      rec.text[:100], trust.label() if trust else "")
    out.print(table)
    out.print(f"[dim]{len(res.hits)} results in {res.took_ms:.1f} ms "
              "(amcp show <id>: an id's first characters are enough)[/dim]")


@friendly
def show(
    knowledge_id: IdArg,
    store: StoreOpt = None,
    reveal: Annotated[bool, typer.Option(help="Show sensitive content.")] = False,
    json_: JsonOpt = False,
) -> None:
    """Show one record with its state."""
    from amcp.errors import NotFoundError

    with open_memory(store, None) as mem:
        kid = pick(mem, knowledge_id)
        found = mem.read([kid], reveal=reveal)
    if not found:
        raise NotFoundError(f"no record {kid}")
    item = found[0]
    if json_:
        emit_json(item_json(item))
    else:
        print_item(item)


@friendly
def supersede(
    knowledge_id: IdArg,
    text: Annotated[str, typer.Argument(help="The new version; - reads it from stdin.")],
    store: StoreOpt = None,
    embedder: EmbedOpt = "auto",
    json_: JsonOpt = False,
) -> None:
    """Replace a record with a new version (the old one is kept, superseded)."""
    body = read_text_input(text, None)
    with open_memory(store, embedder) as mem:
        kid = pick(mem, knowledge_id)
        res = mem.supersede(kid, body)
    if json_:
        emit_json({"knowledge_id": res.knowledge_id, "supersedes": kid})
    else:
        out.print(f"{short_id(kid)} superseded by {res.knowledge_id}")


@friendly
def forget(
    knowledge_id: IdArg,
    reason: Annotated[str, typer.Option("--reason", "-r", help="Why it is no longer true.")],
    store: StoreOpt = None,
    embedder: EmbedOpt = "auto",
) -> None:
    """Invalidate a record (it is kept, with the reason, and no longer recalled)."""
    with open_memory(store, embedder) as mem:
        kid = pick(mem, knowledge_id)
        mem.invalidate(kid, reason)
    out.print(f"invalidated {kid}")


@friendly
def purge(
    knowledge_id: IdArg,
    reason: Annotated[
        str | None, typer.Option("--reason", "-r", help="Why (kept with the tombstone).")
    ] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask.")] = False,
    store: StoreOpt = None,
    embedder: EmbedOpt = "auto",
) -> None:
    """Erase a record's content for privacy; a tombstone stays so it never comes back."""
    with open_memory(store, embedder) as mem:
        kid = pick(mem, knowledge_id)  # the whole id is what the question names
        if not yes and sys.stdin.isatty() and not typer.confirm(f"Erase {kid} for good?"):
            raise typer.Exit(1)
        mem.purge(kid, reason)
    out.print(f"purged {kid} (tombstone kept)")


@friendly
def query(
    amql: Annotated[
        str, typer.Argument(help="One AMQL statement: RECALL, REMEMBER, FORGET, DISTILL.")
    ],
    scope: Annotated[list[str] | None, typer.Option("--scope", help="Only these scopes.")] = None,
    explain: Annotated[bool, typer.Option(help="Print the plan (pushed vs residual).")] = False,
    store: StoreOpt = None,
    embedder: EmbedOpt = "auto",
    json_: JsonOpt = False,
) -> None:
    """Run an AMQL statement (docs/amql.md)."""
    with open_memory(store, embedder, create=True) as mem:
        # current_project(): the first --scope, else the project this directory is in
        res = mem.query(amql, scopes=scope, project=None if scope else default_scope())
    if json_:
        emit_json(res.to_response())
        return
    if explain:
        out.print(f"[dim]{res.explain}[/dim]")
    if res.written or res.invalidated:
        for kid in res.written:
            out.print(f"stored {kid}")
        for kid in res.invalidated:
            out.print(f"invalidated {kid}")
        return
    if not res.records:
        out.print("no records match")
        return
    from rich.table import Table

    table = Table("id", "type", "conf", "text", box=None)
    for item in res.records:
        rec = item.record
        if rec is not None:
            table.add_row(
                item.knowledge_id[:14] + "…",
                rec.type.value,
                f"{rec.core.confidence:.2f}",
                rec.text[:100],
            )
    out.print(table)
    out.print(
        f"[dim]{len(res.records)} records, {res.total_tokens} tokens"
        + (" (truncated)" if res.truncated else "")
        + "[/dim]"
    )


@friendly
def stats(store: StoreOpt = None, json_: JsonOpt = False) -> None:
    """Counts by lifecycle, type and scope; size; embedding model."""
    with open_memory(store, "auto") as mem:
        s = mem.stats()
        report = mem.store.verify()  # the whole chain, signed head, row digest, witnesses
        quarantined = len(mem.store.quarantined())
        from amcp.sync.tiers import usage_view

        tiers = usage_view(mem, None)  # tier 0's size and its evicted pointers
    data = {
        "records": s.records,
        "by_lifecycle": s.by_lifecycle,
        "by_type": s.by_type,
        "scopes": s.scopes,
        "vectors": s.vectors,
        "changes": s.changes,
        "bytes": s.bytes,
        "embedding_model": s.embedding_model,
        "schema_version": s.schema_version,
        "integrity": {
            "check": "chain, signed head, row count and digest, witnesses "
            "(every record body: `amcp verify`)",
            "ok": report.ok,
            "problems": list(report.problems),
            "quarantined": quarantined,
        },
    }
    if tiers is not None:
        data["tiers"] = tiers
    from amcp.cli.peers_cmd import running_sync

    sync = running_sync(store)
    if sync is not None:
        data["sync"] = sync
    if json_:
        emit_json(data)
        return
    for key, value in data.items():
        out.print(f"{key:16} {value}")


@friendly
def reindex(
    store: StoreOpt = None,
    embedder: EmbedOpt = "auto",
) -> None:
    """Re-embed every record with the chosen embedder (after a model change)."""
    from amcp.memory import Memory

    path = store_location(store)
    require_store(path)
    # Opened without an embedder so a store made by another model can be opened at all.
    with Memory(path, embedder=None, check_embedder=False) as mem:
        from amcp.cli.embedconf import embedder_for

        chosen = embedder_for(embedder, default_home())
        n = mem.reindex(None if chosen == "none" else chosen)
        model = mem.stats().embedding_model or "none"
    out.print(f"re-embedded {n} records with {model}")


@friendly
def demo(
    directory: Annotated[Path | None, typer.Option(help="Where to create the demo stores.")] = None,
    embedder: EmbedOpt = "auto",
) -> None:
    """A scripted walkthrough: two agents remember, recall, export, import."""
    from amcp.cli.demo import run_demo

    run_demo(directory, embedder)
