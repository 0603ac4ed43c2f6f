"""The rows one ``SQLiteStore.put_many`` inserts, table by table (one ``executemany`` each),
and the answer to a put of an id already stored."""

from __future__ import annotations

import sqlite3
from typing import Any

from amcp.amf.types import Lifecycle
from amcp.errors import ConflictError, GoneError
from amcp.store import sqlite_census as census
from amcp.store import termpeaks
from amcp.store.base import PutResult
from amcp.store.sqlite_derived import EVENTS_SQL, LINKS_SQL
from amcp.store.sqlite_rows import INSERT_SEALED


class Batch:
    """The rows one ``put_many`` inserts, table by table (one ``executemany`` each)."""

    __slots__ = ("changes", "events", "lexical", "links", "records", "scopes", "tags", "vectors")

    def __init__(self) -> None:
        self.records: list[tuple[Any, ...]] = []
        self.changes: list[tuple[Any, ...]] = []
        self.scopes: list[tuple[int, str]] = []
        self.tags: list[tuple[int, str]] = []
        self.events: list[tuple[int, str]] = []
        self.links: list[tuple[int, str, str]] = []
        self.lexical: list[tuple[int, str, str]] = []
        self.vectors: list[tuple[int, bytes]] = []

    def write(self, db: sqlite3.Connection) -> dict[str, int]:
        """Insert every table's rows; the census counts of the index rows added."""
        db.executemany(
            "INSERT INTO changes(seq, hlc, op, knowledge_id, details, hash) VALUES (?,?,?,?,?,?)",
            self.changes,
        )
        db.executemany(INSERT_SEALED, self.records)
        scopes = db.executemany(
            "INSERT OR IGNORE INTO record_scopes(rid, scope) VALUES (?,?)", self.scopes
        ).rowcount
        tags = db.executemany(
            "INSERT OR IGNORE INTO record_tags(rid, tag) VALUES (?,?)", self.tags
        ).rowcount
        db.executemany(EVENTS_SQL, self.events)
        db.executemany(LINKS_SQL, self.links)
        db.executemany(
            "INSERT INTO records_fts(rowid, terms, context) VALUES (?,?,?)", self.lexical
        )
        termpeaks.count((t, c) for _r, t, c in self.lexical).apply(db)
        db.executemany("INSERT INTO vectors(rowid, vec) VALUES (?,?)", self.vectors)
        return {
            census.SCOPES: max(scopes, 0), census.TAGS: max(tags, 0),
            census.LEXICAL: len(self.lexical), census.VECTORS: len(self.vectors),
        }


def rewrite_result(kid: str, checksum: str, found: tuple[Any, ...]) -> PutResult:
    """A put of an id already stored: idempotent if identical, else 410 or 409."""
    if found[1] == Lifecycle.PURGED:
        raise GoneError(f"{kid} was purged and cannot be stored again")
    if found[0] == checksum:
        return PutResult(kid, created=False, hlc=found[2], rowid=found[3])
    raise ConflictError(
        f"{kid} already exists with different content; write a new record that supersedes it"
    )
