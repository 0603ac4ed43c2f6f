"""A record's causal links and work-session marks, kept in ``record_links`` (migration 8).

AMQL asks for records by what caused them (``caused_by = K-…``) and by the work session
that wrote them (``session_id('S-…')``). Both live inside the record body
(``causal.caused_by``, ``core.evidence``), so without an index each such query decoded
every visible record: ~450 ms at 10k records. Rows are written in the record's own
transaction and dropped by purge; they name ids only, never content, so a sensitive
record's links are indexed like any other.

Session marks: ``session:<id>`` evidence (what the node writes for SESSION_BEGIN work
sessions) is indexed as ``<id>``, and bare evidence in the node's own session-id shape
(``S-YYYYMMDD-HHMMSS-xxxxxx``) as itself. ``session_id(X)`` matches evidence ``X`` or
``session:X``, so the index answers it exactly when ``X`` has that shape
(:func:`indexes_session`); for any other ``X`` the caller scans as before.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from amcp.amf.record import AMFRecord

CAUSE = "cause"
SESSION = "session"
_MARK = "session:"
# The node's work-session ids: what amcp.node.views.new_work_session_id draws, and the only
# form the node accepts from a client (SESSION_BEGIN).
_WORK_SESSION_ID = re.compile(r"S-\d{8}-\d{6}-[0-9a-f]{6}")


def is_work_session_id(text: str) -> bool:
    """``S-YYYYMMDD-HHMMSS-6hex``."""
    return _WORK_SESSION_ID.fullmatch(text) is not None


def session_of(evidence: object) -> str | None:
    """The work session an evidence entry names, if it names one."""
    if not isinstance(evidence, str):
        return None
    if evidence.startswith(_MARK):
        return evidence[len(_MARK):] or None
    return evidence if is_work_session_id(evidence) else None


def indexes_session(session: str) -> bool:
    """Whether every evidence form ``session_id(session)`` matches is in the index."""
    return is_work_session_id(session)


def links_of(record: AMFRecord) -> list[tuple[str, str]]:
    """``(kind, ref)`` rows for ``record``: its causes, then its sessions, no repeats."""
    causes = (record.causal.caused_by or ()) if record.causal is not None else ()
    sessions = (session_of(e) for e in record.core.evidence or ())
    rows = [(CAUSE, c) for c in causes] + [(SESSION, s) for s in sessions if s]
    return list(dict.fromkeys(rows))


__all__ = [
    "CAUSE", "SESSION", "indexes_session", "is_work_session_id", "links_of", "session_of",
]
