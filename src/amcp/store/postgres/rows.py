"""The ``records`` row as the PostgreSQL adapter reads and writes it.

The column list and the positions are the SQLite adapter's (``sqlite_rows``: the sealed
columns in ``rowseal.SEALED`` order, then body, seal and the access counters), so the
verifying read path (``sqlite_verified``), ``admit`` and the seals read a row of either
backend the same way; only the statements' placeholders differ.
"""

from __future__ import annotations

from amcp.store.rowseal import SEALED
from amcp.store.sqlite_rows import ROW_COLS

GET_BY_ID = f"SELECT {ROW_COLS} FROM records r WHERE r.knowledge_id=%s"
GET_MANY = f"SELECT {ROW_COLS} FROM records r WHERE r.knowledge_id = ANY(%s)"
UPDATE_SEALED = (
    "UPDATE records SET "
    + ", ".join(f"{c}=%s" for c in SEALED if c != "knowledge_id")
    + ", body=%s, seal=%s WHERE rowid=%s"
)
# The head of a multi-row insert (``database.insert_rows``): rowid, the sealed columns,
# body, seal.
INSERT_SEALED = "INSERT INTO records(rowid, " + ", ".join(SEALED) + ", body, seal) VALUES "
