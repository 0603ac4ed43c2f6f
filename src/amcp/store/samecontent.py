"""Finding stored records that say what new ones say (dedup), for a whole batch at once.

``Store.find_same_content_many`` answers "is this already stored, under another id?" for
every record of a write batch with one query per ``CHUNK`` records, where asking record by
record cost one round trip each (on PostgreSQL a batch of 16 spent over a third of its time
there). Both adapters use this SQL and this choice of row, so they answer alike.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from amcp.amf.record import AMFRecord
from amcp.amf.types import Lifecycle
from amcp.store import sqlite_rows as col
from amcp.store.base import StoredRecord
from amcp.store.sqlite_rows import ROW_COLS

CHUNK = 500  # content keys per query (well under SQLite's bound on parameters)
PER_KEY = 4  # rows looked at per key: the first few active ones, oldest first


def select_sql(keys: int, *, sqlite: bool) -> str:
    """The active rows holding any of ``keys`` content keys, ``PER_KEY`` at most per key,
    in rowid order. ``sqlite``: ``?`` placeholders, and ``+lifecycle`` so the planner takes
    the content-key index: without statistics it chose the lifecycle index from four keys
    on and walked every active record (~30 ms a batch at 100k, tests/store/test_samecontent).
    One pass over the rows, no join back to them: PostgreSQL turned that join into a scan
    of the whole table on narrow rows."""
    marks = ",".join(["?" if sqlite else "%s"] * keys)
    lifecycle = "+r.lifecycle" if sqlite else "r.lifecycle"
    return (
        f"SELECT {ROW_COLS} FROM (SELECT r.*, ROW_NUMBER() OVER "
        "(PARTITION BY r.content_key ORDER BY r.rowid) AS copy_n "
        f"FROM records r WHERE r.content_key IN ({marks}) AND {lifecycle}='active') r "
        f"WHERE r.copy_n <= {PER_KEY} ORDER BY r.rowid"
    )


def find_many(records: Sequence[AMFRecord], key: Callable[[AMFRecord], str],
              rows: Callable[[list[str]], Sequence[Any]],
              decode: Callable[[Any], StoredRecord | None]) -> list[StoredRecord | None]:
    """Per record, the oldest active stored record with its content key (``key``: the
    store's keyed hash) among the first ``PER_KEY`` copies, or None. ``rows``: the adapter
    running ``select_sql`` over one chunk of keys; ``decode``: its verifying decode (a row
    that fails it is quarantined, never served)."""
    keys = [key(r) for r in records]
    found: dict[str, StoredRecord] = {}
    for chunk in chunks(keys):  # keys are unique across chunks
        found.update(first_live(rows(chunk), decode))
    return [found.get(k) for k in keys]


def chunks(keys: Iterable[str]) -> list[list[str]]:
    unique = list(dict.fromkeys(keys))
    return [unique[i:i + CHUNK] for i in range(0, len(unique), CHUNK)]


def first_live(rows: Sequence[Any], decode: Callable[[Any], StoredRecord | None]
               ) -> dict[str, StoredRecord]:
    """Content key → the first row per key that verifies and is active; rows come in rowid
    order (the oldest copy answers, as it always did)."""
    found: dict[str, StoredRecord] = {}
    for row in rows:
        key = row[col.CONTENT_KEY]
        if key in found:
            continue
        got = decode(row)
        if got is not None and got.state.lifecycle is Lifecycle.ACTIVE:
            found[key] = got
    return found


__all__ = ["CHUNK", "chunks", "find_many", "first_live", "select_sql"]
