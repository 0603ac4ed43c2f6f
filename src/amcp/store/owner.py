"""Is this SQLite file an amcp store? Asked before anything is written to it.

``amcp recall --store other_app.db`` used to add amcp's tables to another program's database
and switch it to WAL. A file is ours to write when it is empty (a new store), or when it
already holds amcp's tables; any other SQLite database, or any other file, is refused
unchanged. Reading ``sqlite_master`` and ``user_version`` writes nothing.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

from amcp.errors import StoreError

# Tables every amcp schema version has had since migration 1 (store/schema.py).
_OURS = frozenset({"records", "changes", "store_meta"})


def check_ours(db: sqlite3.Connection, path: Path) -> None:
    """Raise StoreError unless the database on ``db`` is empty or an amcp store."""
    try:
        names = {
            str(row[0])
            for row in db.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")
        }
    except sqlite3.DatabaseError as exc:
        raise StoreError(
            f"{path} is not a readable amcp store: {exc}; it was left unchanged"
        ) from exc
    if not names or names >= _OURS:
        return
    shown = ", ".join(sorted(names)[:5]) + (", ..." if len(names) > 5 else "")
    raise StoreError(
        f"{path} is a SQLite database of another program (tables {shown}), not an amcp "
        "store; it was left unchanged — give amcp a new file (amcp init --store NEW.db)"
    )


def check_file(path: Path) -> None:
    """``check_ours`` for a file that may exist: nothing to check for a missing or empty
    one (it becomes a new store); a file that is not SQLite at all is refused too."""
    try:
        if path.stat().st_size == 0:
            return
    except FileNotFoundError:
        return
    except OSError as exc:
        raise StoreError(f"cannot read {path}: {exc}") from exc
    with open(path, "rb") as fh:
        if fh.read(16) != b"SQLite format 3\x00":
            raise StoreError(
                f"{path} is not a readable amcp store: not a SQLite database; it was left "
                "unchanged"
            )
    # A plain read-write connection that only reads: the file stays byte-for-byte as it was.
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as db:
        check_ours(db, path)


__all__ = ["check_file", "check_ours"]
