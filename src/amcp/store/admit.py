"""Does a verified row (and body) pass a ``RecordFilter``? The re-check after the index.

Index tables (scopes, tags, events, links, the lexical and vector indexes) only *narrow*
a query: they are derived rows that nothing signs, so one inserted ``record_scopes`` row
would otherwise put bob's record into alice's recall. Every adapter answers a filter with
its indexes and then asks ``admits`` of each row it is about to serve, with the row's sealed
columns (``rowseal.SEALED``) and, for the conditions only a body can answer, its verified
record. Same semantics as the SQL of ``sqlfilter.where_clause``.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING

from amcp.errors import ValidationError
from amcp.store.links import session_of
from amcp.store.rowseal import SEALED

if TYPE_CHECKING:  # the hooks' fast reader imports this module: no dataclasses at run time
    from collections.abc import Sequence
    from typing import Any

    from amcp.amf.record import AMFRecord
    from amcp.store.base import RecordFilter

_KID, _TYPE, _KIND, _SUBJECT, _CREATED = (SEALED.index(c) for c in (
    "knowledge_id", "type", "kind", "subject", "created_at"))
_SCOPES, _LIFECYCLE, _EXPIRES = (SEALED.index(c) for c in ("scopes", "lifecycle", "expires_at"))
GLOBAL = "*"  # global knowledge: visible in every scope (upstream meta.project_scope)


def needs_body(flt: RecordFilter) -> bool:
    """Whether ``flt`` has conditions only the record body can answer."""
    return any(x is not None for x in (flt.tags, flt.events, flt.caused_by, flt.sessions))


def summary_filter(flt: RecordFilter) -> None:
    """Refuse, for ``Store.summaries``, a filter with conditions only a body answers: a
    summary read checks row conditions only (and a sensitive row has no summary to ask)."""
    if needs_body(flt):
        raise ValidationError(
            "filter", "summaries filter by row conditions only (not tags, events, causes or "
            "sessions): read those records with query"
        )


def scopes_text(scopes: Sequence[str]) -> str:
    """The sealed ``scopes`` column: the record's ``meta.project_scope`` as JSON."""
    return json.dumps(list(scopes), ensure_ascii=False, separators=(",", ":"))


def row_scopes(values: Sequence[Any]) -> list[str]:
    text = values[_SCOPES]
    if not text:
        return []
    scopes = json.loads(text)
    return [s for s in scopes if isinstance(s, str)] if isinstance(scopes, list) else []


def admits(
    flt: RecordFilter, values: Sequence[Any], record: AMFRecord | None = None
) -> bool:
    """Whether the row whose sealed columns are ``values`` passes ``flt``. Conditions that
    need the body (``needs_body``) fail without ``record``."""
    return _row_passes(flt, values) and (not needs_body(flt) or _body_passes(flt, record))


def _row_passes(flt: RecordFilter, v: Sequence[Any]) -> bool:
    if flt.lifecycles is not None and v[_LIFECYCLE] not in {lc.value for lc in flt.lifecycles}:
        return False
    if flt.types is not None and v[_TYPE] not in {t.value for t in flt.types}:
        return False
    if flt.kinds is not None and v[_KIND] not in flt.kinds:
        return False
    if flt.ids is not None and v[_KID] not in flt.ids:
        return False
    if flt.id_from is not None and v[_KID] < flt.id_from:
        return False
    if flt.id_before is not None and v[_KID] >= flt.id_before:
        return False
    if flt.scopes is not None:
        wanted = {*flt.scopes, GLOBAL}
        if not any(s in wanted for s in row_scopes(v)):
            return False
    created, subject = v[_CREATED], v[_SUBJECT]
    if flt.created_after is not None and (created is None or created < flt.created_after):
        return False
    if flt.created_before is not None and (created is None or created >= flt.created_before):
        return False
    if flt.subject_prefix is not None and (
        subject is None or not subject.startswith(flt.subject_prefix)
    ):
        return False
    if flt.subjects is not None and subject not in flt.subjects:
        return False
    if not flt.include_expired and v[_EXPIRES] is not None:
        now = flt.now if flt.now is not None else time.time()
        if v[_EXPIRES] <= now:
            return False
    return True


def _body_passes(flt: RecordFilter, record: AMFRecord | None) -> bool:
    if record is None:
        return False
    if flt.tags is not None and not set(flt.tags) <= set(record.tags):
        return False
    if flt.events is not None:
        decay = record.meta.decay_model
        events = set((decay.invalidation_events or ()) if decay is not None else ())
        if not events & set(flt.events):
            return False
    if flt.caused_by is not None:
        causes = set((record.causal.caused_by or ()) if record.causal is not None else ())
        if not causes & set(flt.caused_by):
            return False
    if flt.sessions is not None:
        marks = {session_of(e) for e in record.core.evidence or ()}
        if not marks & set(flt.sessions):
            return False
    return True


__all__ = ["GLOBAL", "admits", "needs_body", "row_scopes", "scopes_text", "summary_filter"]
