"""Streaming NDJSON export and import: move a whole memory without loss.

File layout, one JSON object per line:

1. ``{"amcp_export": 1, "store_id", "node", "exported_at", "embedding_model"}``
2. one line per record: ``{"amf": {...}, "state": {lifecycle, reason, superseded_by,
   expires_at, sensitive}}`` or, for a purged record, ``{"tombstone": {knowledge_id, reason}}``
3. ``{"amcp_export_end": {"records": N, "tombstones": M, "sha256": "..."}}`` — a digest over
   every line before it, so a truncated or edited file is noticed on import.

Import is idempotent (a record already stored is counted, not duplicated), commits in
batches so a killed import keeps every batch it acknowledged, and never resurrects a purged
record: a tombstone in the file purges the local copy, a local tombstone refuses the record.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TextIO

from amcp.amf.ids import parse_record
from amcp.amf.record import AMFRecord
from amcp.amf.timefmt import utc_now
from amcp.amf.types import Lifecycle
from amcp.errors import AmcpError, ValidationError
from amcp.store.base import ChangeOp, RecordFilter

if TYPE_CHECKING:
    from amcp.ports import MemoryWriter

FORMAT_VERSION = 1
KNOWLEDGE_ID = re.compile(r"K-[0-9a-f]{64}")
_ALL = RecordFilter(lifecycles=None, include_expired=True)


@dataclass(frozen=True, slots=True)
class ExportReport:
    records: int
    tombstones: int
    skipped_sensitive: int
    sha256: str


@dataclass(slots=True)
class ImportReport:
    created: int = 0
    already: int = 0
    tombstones: int = 0
    refused_purged: int = 0
    state_changes: int = 0
    errors: list[str] = field(default_factory=list)
    complete: bool = False  # the end marker was present and its digest matched

    @property
    def processed(self) -> int:
        return self.created + self.already + self.tombstones + self.refused_purged


def _line(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, sort_keys=True, separators=(",", ":")) + "\n"


def export_ndjson(
    memory: MemoryWriter, out: TextIO, *, include_sensitive: bool = False
) -> ExportReport:
    digest = hashlib.sha256()
    records = tombstones = skipped = 0

    def emit(obj: Any) -> None:
        text = _line(obj)
        digest.update(text.encode("utf-8"))
        out.write(text)

    emit(
        {
            "amcp_export": FORMAT_VERSION,
            "store_id": memory.store.get_meta("store_id"),
            "node": memory.node_uri,
            "exported_at": utc_now(),
            "embedding_model": memory.store.get_meta("embedding_model"),
        }
    )
    after: str | None = None
    while page := memory.store.query(_ALL, limit=500, after=after):
        for item in page:
            after = item.knowledge_id
            if item.record is None:
                emit(
                    {"tombstone": {"knowledge_id": item.knowledge_id, "reason": item.state.reason}}
                )
                tombstones += 1
                continue
            if item.state.sensitive and not include_sensitive:
                skipped += 1
                continue
            state = item.state
            emit(
                {
                    "amf": item.record.to_dict(),
                    "state": {
                        "lifecycle": state.lifecycle.value,
                        "reason": state.reason,
                        "superseded_by": state.superseded_by,
                        "expires_at": state.expires_at,
                        "sensitive": state.sensitive,
                    },
                }
            )
            records += 1
    sha = digest.hexdigest()
    end = {"records": records, "tombstones": tombstones, "sha256": sha}
    out.write(_line({"amcp_export_end": end}))
    return ExportReport(records, tombstones, skipped, sha)


def import_ndjson(
    memory: MemoryWriter,
    source: Iterable[str | bytes],
    *,
    batch: int = 256,
    progress: Callable[[ImportReport], None] | None = None,
) -> ImportReport:
    report = ImportReport()
    digest = hashlib.sha256()
    pending: list[tuple[AMFRecord, dict[str, Any]]] = []

    def flush() -> None:
        if not pending:
            return
        _apply_batch(memory, pending, report)
        pending.clear()
        if progress is not None:
            progress(report)

    for lineno, raw in enumerate(source, start=1):
        text = _text(raw, lineno)
        if not text.strip():
            continue
        obj = _object(text, lineno)
        if "amcp_export_end" in obj:
            flush()
            end = obj["amcp_export_end"]
            report.complete = isinstance(end, dict) and end.get("sha256") == digest.hexdigest()
            if not report.complete:
                report.errors.append("the end marker's digest does not match the file")
            continue
        digest.update(text.rstrip("\n").encode("utf-8") + b"\n")
        if "amcp_export" in obj:
            if obj["amcp_export"] != FORMAT_VERSION:
                raise ValidationError(
                    f"line {lineno}", f"export format {obj['amcp_export']!r} is not supported"
                )
            continue
        if "tombstone" in obj:
            flush()  # in file order: the records before it are stored first
            _put_tombstone(memory, obj["tombstone"], lineno)
            report.tombstones += 1
            continue
        amf = obj.get("amf", obj)  # a bare AMF record per line is accepted too
        try:
            record = parse_record(amf)
        except AmcpError as exc:
            raise ValidationError(f"line {lineno}", str(exc)) from exc
        state = obj.get("state")
        pending.append((record, state if isinstance(state, dict) else {}))
        if len(pending) >= batch:
            flush()
    flush()
    return report


def _put_tombstone(memory: MemoryWriter, tomb: Any, lineno: int) -> None:
    kid = tomb.get("knowledge_id") if isinstance(tomb, dict) else None
    if not isinstance(kid, str) or not KNOWLEDGE_ID.fullmatch(kid):
        raise ValidationError(
            f"line {lineno}", f"tombstone knowledge_id {kid!r} is not a knowledge id"
        )
    if memory.store.put_tombstone(kid, hlc=memory.clock.send(), reason=tomb.get("reason")):
        memory.searcher.reset()


def validate_ndjson(source: Iterable[str | bytes]) -> int:
    """Read a whole export without writing: every line parses, every record validates,
    and the end marker is present with a matching digest. Returns the record count.

    ``amcp import`` runs this first so that a cut or edited file is refused before
    anything is stored, instead of committing the batches before the damage."""
    digest = hashlib.sha256()
    count = 0
    ended = False
    for lineno, raw in enumerate(source, start=1):
        text = _text(raw, lineno)
        if not text.strip():
            continue
        if ended:
            raise ValidationError(f"line {lineno}", "data after the end marker")
        obj = _object(text, lineno)
        if "amcp_export_end" in obj:
            end = obj["amcp_export_end"]
            if not isinstance(end, dict) or end.get("sha256") != digest.hexdigest():
                raise ValidationError(f"line {lineno}", "end marker digest does not match")
            ended = True
            continue
        digest.update(text.rstrip("\n").encode("utf-8") + b"\n")
        if "amcp_export" in obj or "tombstone" in obj:
            tomb = obj.get("tombstone")
            kid = tomb.get("knowledge_id") if isinstance(tomb, dict) else None
            if "tombstone" in obj and not (isinstance(kid, str) and KNOWLEDGE_ID.fullmatch(kid)):
                raise ValidationError(
                    f"line {lineno}", f"tombstone knowledge_id {kid!r} is not a knowledge id"
                )
            continue
        try:
            parse_record(obj.get("amf", obj))
        except AmcpError as exc:
            raise ValidationError(f"line {lineno}", str(exc)) from exc
        count += 1
    if not ended:
        raise ValidationError(
            "end", "no end marker: the file is truncated or not a complete amcp export; "
            "nothing was imported"
        )
    return count


def _text(raw: str | bytes, lineno: int) -> str:
    try:
        return raw.decode("utf-8") if isinstance(raw, bytes) else raw
    except UnicodeDecodeError as exc:
        raise ValidationError(f"line {lineno}", f"invalid UTF-8 at byte {exc.start}") from None


def _object(text: str, lineno: int) -> dict[str, Any]:
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValidationError(f"line {lineno}", f"not JSON: {exc.msg}") from None
    except RecursionError:
        raise ValidationError(f"line {lineno}", "nested too deeply") from None
    if not isinstance(obj, dict):
        raise ValidationError(f"line {lineno}", "each line must be a JSON object")
    return obj


def parse_line(raw: str | bytes, lineno: int) -> dict[str, Any] | None:
    """One line of an NDJSON export as its object; None for a blank line; ValidationError
    naming the line for bad UTF-8, bad JSON, too deep a nesting or a non-object. Every
    reader of the format (import, the HTTP API's pre-check) parses lines with this."""
    text = _text(raw, lineno)
    return _object(text, lineno) if text.strip() else None


def _apply_batch(
    memory: MemoryWriter, items: list[tuple[AMFRecord, dict[str, Any]]], report: ImportReport
) -> None:
    fresh: list[tuple[AMFRecord, bool]] = []
    states: list[tuple[str, dict[str, Any]]] = []
    seen: set[str] = set()
    for record, state in items:
        existing = memory.store.get(record.knowledge_id)
        if existing is not None and existing.record is None:
            report.refused_purged += 1
            continue
        if existing is not None or record.knowledge_id in seen:
            report.already += 1
        else:
            fresh.append((record, bool(state.get("sensitive"))))
            seen.add(record.knowledge_id)
        states.append((record.knowledge_id, state))
    with memory.atomic():
        if fresh:
            # dedup=False: an import restores ids exactly, even of records that say the same
            # thing as a local one (they were distinct records where they came from).
            outcomes = memory.put_many(fresh, dedup=False)
            report.created += sum(1 for o in outcomes if o.created)
            report.already += sum(1 for o in outcomes if not o.created)
        for kid, state in states:
            report.state_changes += _apply_state(memory, kid, state)


_OPS = {
    Lifecycle.INVALIDATED: ChangeOp.INVALIDATE,
    Lifecycle.SUPERSEDED: ChangeOp.SUPERSEDE,
    Lifecycle.ARCHIVED: ChangeOp.ARCHIVE,
}


def _apply_state(memory: MemoryWriter, kid: str, state: dict[str, Any]) -> int:
    try:
        lifecycle = Lifecycle(state.get("lifecycle", "active"))
    except ValueError:
        return 0
    op = _OPS.get(lifecycle)
    current = memory.store.get(kid)
    if op is None or current is None or current.state.lifecycle is lifecycle:
        return 0
    if current.state.lifecycle is not Lifecycle.ACTIVE:
        return 0  # never move a record backwards (e.g. invalidated → superseded)
    memory.store.set_state(
        kid,
        op,
        hlc=memory.clock.send(),
        lifecycle=lifecycle,
        reason=state.get("reason"),
        superseded_by=state.get("superseded_by"),
    )
    return 1
