"""``amcp drafts`` / ``confirm`` / ``reject`` (what the memory firewall held) and
``amcp writers`` (the writer keys provenance signatures are checked against).
docs/firewall.md describes both."""

from __future__ import annotations

import base64
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from amcp.cli.common import emit_json, friendly, open_memory, out, require_store, store_location
from amcp.cli.options import JsonOpt, StoreOpt, group
from amcp.cli.views import item_json


@contextmanager
def _bare(store: str | None, *, create: bool = False) -> Iterator[Any]:
    """The store without its embedder: listing and refusing drafts or editing writer keys
    embeds nothing, so it need not load a model (``confirm`` does: the released record
    joins the vector index)."""
    from amcp.memory import Memory

    path = store_location(store)
    if not create:
        require_store(path)
    with Memory(path, embedder=None, check_embedder=False) as mem:
        yield mem


writers_app = group("Writer keys per scope: what provenance signatures verify against "
                    "(docs/firewall.md).")


@friendly
def drafts(
    scope: Annotated[list[str] | None, typer.Option(
        "--scope", help="Only drafts in this scope (repeatable).")] = None,
    limit: Annotated[int, typer.Option("--limit", "-n", help="At most this many.")] = 100,
    store: StoreOpt = None,
    json_: JsonOpt = False,
) -> None:
    """List what the memory firewall holds as drafts (never served until confirmed)."""
    with _bare(store) as mem:
        held = mem.drafts(scope, limit=limit)
    if json_:
        emit_json({"items": [item_json(it) for it in held]})
        return
    if not held:
        out.print("no drafts")
        return
    table = Table("id", "text", "why held", box=None)
    for it in held:
        text = it.record.text[:80] if it.record is not None else "(purged)"
        table.add_row(it.knowledge_id[:14] + "…", text, it.state.reason or "")
    out.print(table)


@friendly
def confirm(
    knowledge_id: Annotated[str, typer.Argument(help="The draft's knowledge id (K-…).")],
    store: StoreOpt = None,
) -> None:
    """Release a held draft: it is served from now on."""
    with open_memory(store, "auto") as mem:
        mem.confirm(knowledge_id)
    out.print(f"confirmed {knowledge_id}")


@friendly
def reject(
    knowledge_id: Annotated[str, typer.Argument(help="The draft's knowledge id (K-…).")],
    reason: Annotated[str | None, typer.Option(help="Why (kept with the record).")] = None,
    store: StoreOpt = None,
) -> None:
    """Refuse a held draft: invalidated with the reason, never served."""
    with _bare(store) as mem:
        mem.reject(knowledge_id, reason)
    out.print(f"rejected {knowledge_id}")


@writers_app.command("add")
@friendly
def writers_add(
    scope: Annotated[str, typer.Argument(help="The scope the key may write, e.g. user:alice")],
    writer: Annotated[str, typer.Argument(help="The writer's identity, as it signs")],
    ed25519: Annotated[str | None, typer.Option(
        help="The writer's Ed25519 public key (base64 of the 32 raw bytes).")] = None,
    hmac_file: Annotated[Path | None, typer.Option(
        help="A file holding the writer's shared HMAC secret (raw bytes).")] = None,
    new_hmac: Annotated[bool, typer.Option(
        "--new-hmac", help="Generate a 32-byte HMAC secret and print it once (base64).")] = False,
    store: StoreOpt = None,
) -> None:
    """Register (or add to) a writer's key for a scope."""
    secret = hmac_file.read_bytes() if hmac_file is not None else None
    if new_hmac:
        secret = secrets.token_bytes(32)
    public = base64.b64decode(ed25519, validate=True) if ed25519 else None
    with _bare(store, create=True) as mem:
        assert mem.firewall is not None
        mem.firewall.keys.register(scope, writer, ed25519_public=public, hmac_secret=secret)
    out.print(f"registered writer {writer!r} for scope {scope!r}")
    if new_hmac and secret is not None:
        out.print(f"hmac secret (shown once): {base64.b64encode(secret).decode()}")


@writers_app.command("list")
@friendly
def writers_list(store: StoreOpt = None, json_: JsonOpt = False) -> None:
    """Scopes with writer keys, and which kinds of key each writer has."""
    with _bare(store) as mem:
        assert mem.firewall is not None
        keys = mem.firewall.keys
        rows = [(k.scope, k.writer, bool(k.ed25519), bool(k.hmac))
                for scope in keys.scopes() for k in keys.writers(scope)]
    if json_:
        emit_json([{"scope": s, "writer": w, "ed25519": e, "hmac": h} for s, w, e, h in rows])
        return
    table = Table("scope", "writer", "ed25519", "hmac", box=None)
    for s, w, e, h in rows:
        table.add_row(s, w, "yes" if e else "", "yes" if h else "")
    out.print(table if rows else "no writer keys registered")


@writers_app.command("remove")
@friendly
def writers_remove(scope: str, writer: str, store: StoreOpt = None) -> None:
    """Remove a writer's keys from a scope (its earlier records then read as unverified)."""
    with _bare(store) as mem:
        assert mem.firewall is not None
        gone = mem.firewall.keys.remove(scope, writer)
    out.print(("removed" if gone else "no such writer") + f" {writer!r} in {scope!r}")


__all__ = ["confirm", "drafts", "reject", "writers_app"]
