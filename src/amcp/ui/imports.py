"""The import reports pages (``/ui/imports``): the store's import log
(``amcp.portability.history``), as the caller's token may see it.

A report is shown to a caller who may read every scope the import wrote to (one that
wrote nowhere, or an amcp bundle whose scopes the log does not list, only to a caller who
may read everything), so a report never tells a restricted token about another scope.
"""

from __future__ import annotations

from amcp.errors import NotFoundError
from amcp.memory import Memory
from amcp.portability import history
from amcp.portability.history import ImportLog
from amcp.session.policy import Mode
from amcp.ui.data import Locked
from amcp.web.access import Caller


def _visible(logs: list[ImportLog], who: Caller) -> list[ImportLog]:
    return history.visible(logs, who.readable, everything=who.patterns(Mode.READ) is None)


def imports_page(memory: Memory, locked: Locked, who: Caller) -> list[ImportLog]:
    """Every import report the caller may see, newest first."""
    logs: list[ImportLog] = locked(history.reports, memory.store)
    return _visible(logs, who)


def import_page(memory: Memory, locked: Locked, who: Caller, report_id: str) -> ImportLog:
    """One report; 404 for an unknown one and for one the caller may not see (alike)."""
    log: ImportLog = locked(history.report, memory.store, report_id)
    if not _visible([log], who):
        raise NotFoundError(f"no import report {report_id}")
    return log


__all__ = ["import_page", "imports_page"]
