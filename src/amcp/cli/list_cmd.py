"""``amcp list``: the records of a store, newest first, filtered the way people ask.

Listed in ``amcp.cli.commands`` as ``list``.
"""

from __future__ import annotations

import re
import time
from typing import Annotated

import typer

from amcp.cli.common import emit_json, friendly, open_memory, out
from amcp.cli.options import ScopesOpt, StoreOpt, TypesOpt

_AGO = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
LIFECYCLES = ("active", "superseded", "invalidated", "archived", "purged", "draft")


def since_value(text: str | None, now: float | None = None) -> str | float | None:
    """``7d`` / ``12h`` / ``30m`` / ``2w`` (that long ago, as epoch seconds) or anything
    ``normalise_timestamp`` takes (ISO 8601 with a zone, epoch seconds)."""
    if text is None:
        return None
    found = _AGO.fullmatch(text.strip().lower())
    if found is None:
        return text
    return (time.time() if now is None else now) - float(found[1]) * _UNIT[found[2]]


@friendly
def list_cmd(
    scope: ScopesOpt = None,
    type_: TypesOpt = None,
    kind: Annotated[
        list[str] | None, typer.Option("--kind", help="Only these kinds (repeatable).")
    ] = None,
    lifecycle: Annotated[
        list[str] | None,
        typer.Option(
            "--lifecycle", "-l",
            help="active (default), superseded, invalidated, archived, purged, draft, or all.",
        ),
    ] = None,
    since: Annotated[
        str | None, typer.Option(help="Created at or after: 7d, 12h, or an ISO 8601 time.")
    ] = None,
    until: Annotated[
        str | None, typer.Option(help="Created before: 7d, 12h, or an ISO 8601 time.")
    ] = None,
    limit: Annotated[int, typer.Option("-n", "--limit", min=1, help="At most this many.")] = 50,
    store: StoreOpt = None,
    json_: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """List records, newest first (filters by scope, type, kind, lifecycle and time)."""
    from amcp.refs import short_id

    with open_memory(store, None) as mem:
        items = mem.list_filtered(
            scopes=scope, types=type_, kinds=kind,
            lifecycles=None if lifecycle and "all" in lifecycle else (lifecycle or ["active"]),
            created_after=since_value(since), created_before=since_value(until), limit=limit,
        )
    if json_:
        from amcp.cli.views import item_json

        emit_json([item_json(it) for it in items])
        return
    if not items:
        out.print("no records match")
        return
    for it in items:
        rec = it.record
        text = rec.text[:90] if rec is not None else "(purged: content erased)"
        kind_ = rec.type.value if rec is not None else "-"
        created = rec.meta.created_at[:16] if rec is not None else ""
        out.print(f"{short_id(it.knowledge_id)}  {created:16}  {kind_:12}  "
                  f"{it.state.lifecycle.value:11}  {text}", markup=False, highlight=False)
    out.print(f"[dim]{len(items)} records (amcp show <id> for one; an id's start is enough)[/dim]")
