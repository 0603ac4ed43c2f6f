"""``amcp import`` and ``amcp export``: arriving from and leaving to other tools."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from amcp.cli.common import emit_json, err, friendly, new_store_or_nothing, open_memory, out
from amcp.cli.options import EmbedOpt, StoreOpt


def _mapping(items: list[str] | None) -> dict[str, str]:
    out_map: dict[str, str] = {}
    for raw in items or []:
        for pair in raw.split(","):
            field, sep, column = pair.partition("=")
            if not sep or not field.strip() or not column.strip():
                raise typer.BadParameter(f"--map wants field=column, got {pair!r}")
            out_map[field.strip()] = column.strip()
    return out_map


@friendly
def import_cmd(
    source: Annotated[str, typer.Argument(
        metavar="PATH", help="A file, a directory, a .zip export, or a postgresql:// DSN "
        "holding LangGraph's PostgresStore.")],
    from_: Annotated[str, typer.Option("--from", help="Source kind, or auto.")] = "auto",
    scope: Annotated[str | None, typer.Option(help="Put everything in this scope.")] = None,
    assume_tz: Annotated[
        str | None, typer.Option("--assume-tz", help="Zone of naive times (UTC, Europe/Paris).")
    ] = None,
    day_first: Annotated[bool, typer.Option(help="03/04/2024 is 3 April.")] = False,
    drop_logs: Annotated[bool, typer.Option(help="Do not keep system logs at all.")] = False,
    map_: Annotated[
        list[str] | None, typer.Option("--map", help="Generic tables: text=COL,created_at=COL…")
    ] = None,
    table: Annotated[str | None, typer.Option(help="Generic SQLite: the table to read.")] = None,
    dry_run: Annotated[bool, typer.Option(help="Only the health report; write nothing.")] = False,
    report: Annotated[
        Path | None, typer.Option(help="Write the reports here as .md and .json.")
    ] = None,
    batch: Annotated[int, typer.Option(help="Records per atomic batch.")] = 256,
    store: StoreOpt = None,
    embedder: EmbedOpt = "auto",
    json_: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Import another tool's memories (mem0, MCP memory, Letta, ChatGPT, Claude, ...).

    Reads everything first and stops on the first bad item, naming file and line, before
    writing anything; then writes in atomic batches and verifies the result (exit 1 when a
    check fails). Re-running finishes an interrupted import without duplicates.
    """
    from amcp.portability.amcp_ndjson import is_amcp_export, run_amcp_import
    from amcp.portability.model import ImportOptions
    from amcp.portability.pgsource import is_dsn

    where: Path | str = source if is_dsn(source) else Path(source)
    if isinstance(where, Path) and not where.exists():
        raise typer.BadParameter(f"{where} does not exist")
    path = where if isinstance(where, Path) else None
    with new_store_or_nothing(store, keep=not dry_run):
        if path is not None and (
            from_ == "amcp" or (from_ == "auto" and is_amcp_export(path))
        ):
            with open_memory(store, embedder, create=True) as mem:
                emit = run_amcp_import(mem, path, dry_run=dry_run)
            _print(emit, json_)
            return
        options = ImportOptions(kind=from_, scope=scope, assume_tz=assume_tz,
                                day_first=day_first, drop_logs=drop_logs,
                                mapping=_mapping(map_), table=table, batch=max(1, batch))
        result = _run_import(store, embedder, where, options, dry_run=dry_run, quiet=json_)
        if report is not None:
            _write_reports(report, result)
        _print_result(result, json_)
        if not result.ok:
            raise typer.Exit(1)


def _print_result(result: Any, json_: bool) -> None:
    """The health (and, after a write, verification) report of an import."""
    if json_:
        emit_json(result.to_dict())
        return
    out.print(result.health.to_markdown(), markup=False)
    if result.verification is not None:
        out.print(result.verification.to_markdown(), markup=False)
        out.print(f"created {result.created}, already stored {result.already}, "
                  f"superseded {result.superseded}")


def _run_import(
    store: str | None, embedder: str, path: Path | str, options: Any, *, dry_run: bool,
    quiet: bool,
) -> Any:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from amcp.portability.api import import_path

    with (
        open_memory(store, embedder, create=True) as mem,
        Progress(TextColumn("importing"), BarColumn(), MofNCompleteColumn(),
                 TextColumn("{task.fields[rate]:.0f} records/s"), transient=True,
                 disable=quiet or dry_run, console=err) as bar,
    ):
        task = bar.add_task("import", total=None, rate=0.0)

        def tick(p: object) -> None:
            bar.update(task, completed=p.done, total=p.total, rate=p.rate)  # type: ignore[attr-defined]

        return import_path(mem, path, options, dry_run=dry_run, progress=tick)


def _write_reports(base: Path, result: object) -> None:
    from amcp.portability.api import ImportResult

    assert isinstance(result, ImportResult)
    base.parent.mkdir(parents=True, exist_ok=True)
    md = result.health.to_markdown()
    if result.verification is not None:
        md += "\n" + result.verification.to_markdown()
    base.with_suffix(".md").write_text(md, encoding="utf-8")
    import json

    base.with_suffix(".json").write_text(
        json.dumps(result.to_dict(), ensure_ascii=False, indent=2) + "\n", encoding="utf-8")


def _print(data: dict[str, object], json_: bool) -> None:
    if json_:
        emit_json(data)
    else:
        out.print(", ".join(f"{k} {v}" for k, v in data.items() if k != "errors"))
    if not data.get("ok", True):
        raise typer.Exit(1)


@friendly
def export_cmd(
    path: Annotated[Path, typer.Argument(help="Output file (a directory for markdown), or -.")],
    to: Annotated[
        str, typer.Option("--to", help="amcp (NDJSON) | portable | mem0 | mcp-memory | markdown")
    ] = "amcp",
    scope: Annotated[list[str] | None, typer.Option("--scope", help="Only these scopes.")] = None,
    include_sensitive: Annotated[
        bool, typer.Option(help="Also export sensitive records, decrypted (left out by default).")
    ] = False,
    store: StoreOpt = None,
    embedder: EmbedOpt = "auto",
) -> None:
    """Export the store, as amcp NDJSON or in another tool's format (streaming)."""
    from amcp.portability.export import export_to

    with open_memory(store, embedder) as mem:
        if str(path) == "-":
            rep = export_to(mem, sys.stdout, to, scopes=scope, include_sensitive=include_sensitive)
            return
        rep = export_to(mem, path, to, scopes=scope, include_sensitive=include_sensitive)
    out.print(
        f"exported {rep.records} records to {path} ({to})"
        + (f", {rep.tombstones} tombstones" if rep.tombstones else "")
        + (f" ({rep.skipped_sensitive} sensitive left out)" if rep.skipped_sensitive else "")
    )
