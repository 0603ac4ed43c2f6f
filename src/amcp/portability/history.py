"""The import log: every import's migration report, kept in the store it wrote to.

``import_path`` (the CLI's ``amcp import`` and the HTTP import) records one ``ImportLog``
when it finishes — or when it stops on a bad item, with the error — so the web inspector
(``/ui/imports``) and anyone holding the store can see later what came in from where, what
was skipped and why. Dry runs write nothing and are not recorded.

Kept in the store's meta table through the ``Store`` port (``get_meta``/``set_meta``, which
every backend has): ``import_report:<id>`` holds one report as JSON, ``import_reports`` the
ids, oldest first. Bounded: the newest ``MAX_KEPT`` reports, each with at most
``MAX_ITEMS`` items that were not imported (their text redacted of credentials and
shortened, as the health report's samples are). A report is what the importer said, not a
signed change: the records it wrote are the signed, verified part (docs/portability.md).
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

from amcp.agent.capture.credentials import redact
from amcp.errors import NotFoundError, ValidationError
from amcp.portability.model import Decision, Planned

if TYPE_CHECKING:
    from amcp.ndjson import ImportReport as NdjsonReport
    from amcp.portability.report import HealthReport
    from amcp.portability.verify import Verification
    from amcp.store.base import Store

INDEX = "import_reports"
PREFIX = "import_report:"
MAX_KEPT = 200  # reports kept; older ones are dropped as new ones come
MAX_ITEMS = 200  # items not imported kept per report (the counts cover all of them)
TEXT_CHARS = 160
ID_CHARS = 18  # "I-" + 16 hex


@dataclass(frozen=True, slots=True)
class NotImported:
    """One source item that did not become a record: ``outcome`` is ``skipped`` (a rule
    dropped it: empty, a system prompt, a log under --drop-logs) or ``failed`` (the item
    that stopped the import)."""

    where: str
    outcome: str
    reasons: tuple[str, ...]
    text: str = ""


@dataclass(frozen=True, slots=True)
class ImportLog:
    id: str
    started: str  # ISO 8601, UTC
    finished: str
    source_kind: str  # the importer(s) that read it ("mem0", "mcp-memory, letta")
    file: str  # what was imported (a path, a redacted DSN, "upload")
    status: str  # ok | unverified (a verification check failed) | failed (stopped)
    items: int = 0  # source items read
    imported: int = 0  # records created
    duplicates: int = 0  # items merged into another + records the store already held
    skipped: int = 0  # items dropped by a rule, and files not read
    failed: int = 0  # items that stopped the import
    held: int = 0  # records the firewall stored as drafts (docs/firewall.md)
    superseded: int = 0
    scopes: tuple[str, ...] = ()
    error: str | None = None
    checks: tuple[tuple[str, bool, str], ...] = ()  # verification: (name, ok, detail)
    not_imported: tuple[NotImported, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> ImportLog:
        items = tuple(NotImported(str(i["where"]), str(i["outcome"]), tuple(i["reasons"]),
                                  str(i.get("text", ""))) for i in raw.get("not_imported", ()))
        checks = tuple((str(n), bool(ok), str(d)) for n, ok, d in raw.get("checks", ()))
        known = {k: raw[k] for k in cls.__dataclass_fields__ if k in raw}
        return cls(**{**known, "scopes": tuple(raw.get("scopes", ())), "checks": checks,
                      "not_imported": items})


@dataclass(slots=True)
class Recorder:
    """Collects what one import run did, while it runs; ``finish``/``fail`` store it."""

    file: str
    started: float = field(default_factory=time.time)
    sources: list[str] = field(default_factory=list)
    files_skipped: int = 0
    items: int = 0
    created: int = 0  # records written so far (what a stopped import leaves)
    merged: int = 0
    dropped: int = 0
    not_imported: list[NotImported] = field(default_factory=list)

    def planned(self, p: Planned) -> None:
        self.items += 1
        if p.decision is Decision.MERGE:
            self.merged += 1
        elif p.decision is Decision.DROP:
            self.dropped += 1
            self._keep(NotImported(p.item.where, "skipped", p.reasons, _short(p.item.text)))

    def _keep(self, item: NotImported) -> None:
        if len(self.not_imported) < MAX_ITEMS:
            self.not_imported.append(item)

    def _log(self, status: str, **counts: Any) -> ImportLog:
        return ImportLog(
            id="I-" + secrets.token_hex((ID_CHARS - 2) // 2), started=_iso(self.started),
            finished=_iso(time.time()), source_kind=", ".join(dict.fromkeys(self.sources))
            or "-", file=self.file, status=status, items=self.items,
            skipped=self.dropped + self.files_skipped, not_imported=tuple(self.not_imported),
            **counts,
        )

    def finish(self, store: Store, health: HealthReport, v: Verification, *, already: int,
               superseded: int, held: int) -> ImportLog:
        """The import ran to its end: ``already`` records the store held, ``held`` drafts."""
        checks = tuple((c.name, c.ok, c.detail) for c in v.checks)
        log = self._log(
            "ok" if v.ok else "unverified", imported=self.created,
            duplicates=self.merged + already, held=held, superseded=superseded,
            scopes=tuple(s for s, _n in health.scopes), checks=checks,
        )
        save(store, log)
        return log

    def amcp(self, store: Store, rep: NdjsonReport) -> ImportLog:
        """An amcp NDJSON bundle (``run_amcp_import``): its records are restored whole, so
        the report is its counts and the lines it refused."""
        self.sources.append("amcp")
        for err in rep.errors:
            self._keep(NotImported(_where_of(err), "failed", (err,)))
        ok = rep.complete and not rep.errors
        log = self._log("ok" if ok else "unverified", imported=rep.created,
                        duplicates=rep.already, failed=len(rep.errors),
                        checks=(("bundle end marker and digest", rep.complete,
                                 "present and matching" if rep.complete else "missing"),))
        log = replace(log, items=rep.processed + len(rep.errors), skipped=rep.refused_purged)
        save(store, log)
        return log

    def fail(self, store: Store, error: Exception, imported: int) -> ImportLog:
        """The import stopped (a bad item names its file and line): what it had written
        stays (whole batches), and the report says where it stopped."""
        message = str(error)
        self._keep(NotImported(_where_of(message), "failed", (message,)))
        log = self._log("failed", imported=imported, duplicates=self.merged, failed=1,
                        error=message)
        save(store, log)
        return log


def save(store: Store, log: ImportLog) -> None:
    with store.atomic():
        ids = [i for i in _index(store) if i != log.id]
        ids.append(log.id)
        for gone in ids[:-MAX_KEPT]:
            store.set_meta(PREFIX + gone, "")  # the meta table has no delete: emptied
        store.set_meta(PREFIX + log.id, json.dumps(log.to_dict(), ensure_ascii=False))
        store.set_meta(INDEX, json.dumps(ids[-MAX_KEPT:]))


def reports(store: Store) -> list[ImportLog]:
    """Every kept report, newest first (unreadable entries are left out)."""
    out = []
    for rid in reversed(_index(store)):
        found = _read(store, rid)
        if found is not None:
            out.append(found)
    return out


def report(store: Store, report_id: str) -> ImportLog:
    """One report, or a 404 (an id that is not one is a 400)."""
    if not (report_id.startswith("I-") and len(report_id) == ID_CHARS
            and all(c in "0123456789abcdef" for c in report_id[2:])):
        raise ValidationError("report", f"{report_id[:40]!r} is not an import report id")
    found = _read(store, report_id)
    if found is None:
        raise NotFoundError(f"no import report {report_id}")
    return found


def _index(store: Store) -> list[str]:
    try:
        ids = json.loads(store.get_meta(INDEX) or "[]")
    except ValueError:
        return []
    return [i for i in ids if isinstance(i, str)] if isinstance(ids, list) else []


def _read(store: Store, rid: str) -> ImportLog | None:
    raw = store.get_meta(PREFIX + rid)
    if not raw:
        return None
    try:
        return ImportLog.from_dict(json.loads(raw))
    except (ValueError, TypeError, KeyError):
        return None


def _iso(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


def _short(text: str) -> str:
    flat = " ".join(redact(text).split())
    return flat if len(flat) <= TEXT_CHARS else flat[: TEXT_CHARS - 1] + "…"


def _where_of(message: str) -> str:
    """The file and line a bad-item error names (``file.json: line 3: …``), else ``-``."""
    head = message.split(": ", 2)
    return ": ".join(head[:2]) if len(head) > 2 else "-"


def visible(logs: Sequence[ImportLog], readable: Callable[[list[str]], bool], *,
            everything: bool) -> list[ImportLog]:
    """The reports a caller may see: those whose every scope it may read (``readable``);
    one that wrote nowhere only to a caller who may read everything."""
    return [g for g in logs
            if (all(readable([s]) for s in g.scopes) if g.scopes else everything)]


__all__ = ["ImportLog", "NotImported", "Recorder", "report", "reports", "save", "visible"]
