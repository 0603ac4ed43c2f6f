"""The ``records`` row as the SQLite adapter reads it: one column list, named positions.

Every read that may serve a record selects ``ROW_COLS`` and takes its fields by the
positions defined beside it, so the list and the positions cannot drift apart.
"""

from __future__ import annotations

from amcp.store.rowseal import SEALED

ROW_COLS = (
    "r.rowid, "
    + ", ".join(f"r.{c}" for c in SEALED)
    + ", r.body, r.seal, r.access_count, r.last_access"
)
ROWID = 0
_BASE = 1  # the sealed columns start here, in rowseal.SEALED order
FACTS = slice(_BASE, _BASE + len(SEALED))
KID = _BASE + SEALED.index("knowledge_id")
TYPE = _BASE + SEALED.index("type")
KIND = _BASE + SEALED.index("kind")
SUBJECT = _BASE + SEALED.index("subject")
CREATED_BY = _BASE + SEALED.index("created_by")
CONTENT_KEY = _BASE + SEALED.index("content_key")
CREATED_AT = _BASE + SEALED.index("created_at")
LIFECYCLE = _BASE + SEALED.index("lifecycle")
HLC = _BASE + SEALED.index("hlc")
SUPERSEDED_BY = _BASE + SEALED.index("superseded_by")
REASON = _BASE + SEALED.index("reason")
EXPIRES_AT = _BASE + SEALED.index("expires_at")
SENSITIVE = _BASE + SEALED.index("sensitive")
WEIGHT = _BASE + SEALED.index("weight")
CHECKSUM = _BASE + SEALED.index("checksum")
ENVELOPE = _BASE + SEALED.index("envelope")
STORED_AT = _BASE + SEALED.index("stored_at")
CHAIN_SEQ = _BASE + SEALED.index("chain_seq")
BODY = _BASE + len(SEALED)
SEAL = BODY + 1
ACCESS_COUNT = SEAL + 1
LAST_ACCESS = ACCESS_COUNT + 1

# An UPDATE of every sealed column but the id, and the seal: how a state change rewrites
# a row (the values in SEALED order without knowledge_id, then the seal, then the rowid).
UPDATE_SEALED = (
    "UPDATE records SET "
    + ", ".join(f"{c}=?" for c in SEALED if c != "knowledge_id")
    + ", body=?, seal=? WHERE rowid=?"
)
INSERT_SEALED = (
    "INSERT INTO records(rowid, "
    + ", ".join(SEALED)
    + ", body, seal) VALUES ("
    + ",".join("?" * (len(SEALED) + 3))
    + ")"
)

# Built once: sqlite3 looks statements up by their text, and an f-string per read would
# build and hash this text again every time.
GET_BY_ID = f"SELECT {ROW_COLS} FROM records r WHERE r.knowledge_id=?"


def in_marks(n: int) -> str:
    """The placeholders of an ``IN (...)`` list of ``n`` values."""
    return ",".join("?" * n)
