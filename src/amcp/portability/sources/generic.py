"""Any table: CSV, JSON (a list of objects), JSON Lines, or a SQLite table.

``--map field=column,...`` says which column holds what; fields: ``text`` (required),
``created_at``, ``kind``, ``scope``, ``id``, ``agent``, ``tags`` (comma-separated or a
list), ``role``, ``vector`` and ``vector_model``. Without a mapping, columns are guessed
from common names (``text|content|memory|message|body``, ``created_at|timestamp|ts|time|
date``, ``kind|type|category``, ``scope|user_id|namespace``, ``id|uuid``). A scope column
holding a bare user id becomes ``user:<id>``. Vectors are never stored: they come from
another model; their presence is reported and every text is embedded again.
"""

from __future__ import annotations

import contextlib
import csv
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from amcp.errors import ValidationError
from amcp.portability.model import SourceItem
from amcp.portability.reader import (
    SourceFile,
    cell,
    connect_ro,
    is_sqlite,
    iter_lines,
    json_line,
    load_json,
    quote,
    sqlite_tables,
)
from amcp.portability.sources.base import ReadContext, Source, head_text

FIELDS = ("text", "created_at", "kind", "scope", "id", "agent", "tags", "role", "vector",
          "vector_model")
GUESS: dict[str, tuple[str, ...]] = {
    "text": ("text", "content", "memory", "message", "body", "note", "value"),
    "created_at": ("created_at", "timestamp", "ts", "time", "date", "created", "datetime"),
    "kind": ("kind", "type", "category", "label"),
    "scope": ("scope", "user_id", "user", "namespace", "owner"),
    "id": ("id", "uuid", "key", "memory_id"),
    "agent": ("agent", "agent_id", "source", "tool"),
    "tags": ("tags", "labels"),
    "role": ("role", "sender", "author"),
    "vector": ("vector", "embedding", "embeddings"),
    "vector_model": ("vector_model", "embedding_model", "model"),
}
csv.field_size_limit(16 * 1024 * 1024)


def _sniff(src: SourceFile, head: bytes) -> bool:
    """Auto-detection claims a table only when a text column can be found in it: a
    directory's other files (an export's ``user.json``) are then skipped, not misread."""
    suffix = Path(src.name).suffix.lower()
    if is_sqlite(head):
        with src.local_path() as path:
            tables = sqlite_tables(path)
        return any(_has_text(cols) for cols in tables.values())
    text = head_text(head)
    if suffix in {".csv", ".tsv"}:
        header = next(csv.reader([text.split("\n", 1)[0]], delimiter="\t" if suffix == ".tsv"
                                 else ","), [])
        return _has_text(header)
    if suffix in {".json", ".jsonl", ".ndjson"} and text[:1] in "[{":
        keys = re.findall(r'"([A-Za-z_]+)"\s*:', text[:4096])
        return _has_text(keys)
    return False


def _has_text(columns: list[str]) -> bool:
    return any(c.lower() in GUESS["text"] for c in columns)


def column_map(columns: list[str], given: Mapping[str, str], where: str) -> dict[str, str]:
    bad = sorted(set(given) - set(FIELDS))
    if bad:
        raise ValidationError("--map", f"unknown field {bad[0]!r}; fields: {', '.join(FIELDS)}")
    lower = {c.lower(): c for c in columns}
    out: dict[str, str] = {}
    for name in FIELDS:
        if name in given:
            if given[name] not in columns:
                raise ValidationError(
                    "--map", f"{where} has no column {given[name]!r}; columns: {', '.join(columns)}"
                )
            out[name] = given[name]
            continue
        for guess in GUESS[name]:
            if guess in lower and lower[guess] not in out.values():
                out[name] = lower[guess]
                break
    if "text" not in out:
        raise ValidationError(
            where, f"no text column among {', '.join(columns)}; say which with --map text=COLUMN"
        )
    return out


def row_item(
    row: Mapping[str, Any], cols: Mapping[str, str], src: SourceFile, locator: str,
    ctx: ReadContext,
) -> SourceItem:
    def get(name: str) -> Any:
        col = cols.get(name)
        value = row.get(col) if col else None
        return cell(value, f"{src.name}: {locator}.{col}") if name != "vector" else value

    text = get("text")
    if not isinstance(text, str):
        text = "" if text is None else str(text)
    scope = get("scope")
    if scope is not None and ":" not in str(scope) and str(scope) != "*":
        scope = f"user:{scope}"
    tags = get("tags")
    if isinstance(tags, str):
        tags = [t.strip() for t in tags.split(",")]
    vector_model = get("vector_model") if get("vector") not in (None, "", b"") else None
    rid = get("id")
    return SourceItem(
        source="generic", file=src.name, locator=locator, text=text.strip(),
        created_at=get("created_at") if get("created_at") not in ("", None) else ctx.file_time,
        source_id=str(rid) if rid not in (None, "") else None, kind_hint=_str(get("kind")),
        scope=ctx.scope(_str(scope)), agent=_str(get("agent")) or "import",
        tags=tuple(t for t in tags or [] if isinstance(t, str) and t), role=_str(get("role")),
        vector_model=(str(vector_model) if vector_model else "unknown model")
        if get("vector") not in (None, "", b"") else None,
        meta={k: v for k, v in row.items() if k not in cols.values() and _plain(v)},
        fallback_time=get("created_at") in ("", None),
    )


def _str(value: Any) -> str | None:
    return str(value) if value not in (None, "") else None


def _plain(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def _csv(src: SourceFile, ctx: ReadContext) -> Iterator[SourceItem]:
    lines = (text for _n, text in iter_lines(src))
    delimiter = "\t" if Path(src.name).suffix.lower() == ".tsv" else ","
    reader = csv.DictReader(lines, delimiter=delimiter)
    cols = column_map(list(reader.fieldnames or []), ctx.options.mapping, src.name)
    for n, row in enumerate(reader, start=2):
        if None in row:
            raise ValidationError(f"{src.name}: row {n}", "more cells than header columns")
        yield row_item(row, cols, src, f"row {n}", ctx)


def _jsonl(src: SourceFile, ctx: ReadContext) -> Iterator[SourceItem]:
    cols: dict[str, str] | None = None
    for lineno, text in iter_lines(src):
        obj = json_line(text, f"{src.name}: line {lineno}")
        if cols is None:
            cols = column_map(list(obj), ctx.options.mapping, f"{src.name}: line {lineno}")
        yield row_item(obj, cols, src, f"line {lineno}", ctx)


def _json(src: SourceFile, ctx: ReadContext) -> Iterator[SourceItem]:
    doc = load_json(src, ctx.options)
    if isinstance(doc, dict):
        lists = [v for v in doc.values() if isinstance(v, list)]
        doc = lists[0] if len(lists) == 1 else doc
    if not isinstance(doc, list):
        raise ValidationError(src.name, "expected a JSON list of objects (or JSON Lines)")
    cols: dict[str, str] | None = None
    for n, obj in enumerate(doc):
        if not isinstance(obj, dict):
            raise ValidationError(f"{src.name}: [{n}]", "expected an object")
        if cols is None:
            cols = column_map(list(obj), ctx.options.mapping, f"{src.name}: [{n}]")
        yield row_item(obj, cols, src, f"[{n}]", ctx)


def _sqlite(src: SourceFile, ctx: ReadContext) -> Iterator[SourceItem]:
    with src.local_path() as path:
        tables = sqlite_tables(path)
        table = ctx.options.table or (next(iter(tables)) if len(tables) == 1 else None)
        if table is None or table not in tables:
            raise ValidationError(
                src.name, f"say which table with --table (tables: {', '.join(sorted(tables))})"
            )
        cols = column_map(tables[table], ctx.options.mapping, f"{src.name}: table {table}")
        with contextlib.closing(connect_ro(path)) as db:
            names = tables[table]
            # Identifiers come from the file's own schema and are quoted; no values are spliced.
            cols_sql = ", ".join(quote(c) for c in names)
            sql = f"SELECT {cols_sql} FROM {quote(table)} ORDER BY rowid"  # noqa: S608
            for n, row in enumerate(db.execute(sql), start=1):
                yield row_item(dict(zip(names, row, strict=True)), cols, src,
                               f"table {table} row {n}", ctx)


def _read(src: SourceFile, ctx: ReadContext) -> Iterator[SourceItem]:
    suffix = Path(src.name).suffix.lower()
    head = src.head(16)
    if is_sqlite(head):
        yield from _sqlite(src, ctx)
    elif suffix in {".csv", ".tsv"}:
        yield from _csv(src, ctx)
    elif suffix in {".jsonl", ".ndjson"} or (
        suffix != ".json" and head_text(src.head(4096)).startswith("{")
    ):
        yield from _jsonl(src, ctx)
    else:
        yield from _json(src, ctx)


SOURCE = Source("table", "a generic CSV / JSON / JSONL / SQLite table (--map)", _sniff, _read)

