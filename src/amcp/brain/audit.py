"""``amcp brain audit``: the daily librarian pass (RxAi AMP §15.6, on our own evidence).

A memory is **recalled** when a session was shown it (the hooks' session ledgers,
``<home>/ledger/*.json``, ``shown``) or a read counted it (the store's access count). It is
**credited** when an outcome was recorded for it: by a session's Recall manifest (ledger
``credited``) or by any other outcome round (its learned weight left the neutral 0.5). The
audit lists active memories recalled but never credited — the ones whose usefulness nobody
has reported, which is what AMP's ``missing_outcomes`` finding asks about — most recalled
first, and the sessions that were shown memories and ended without crediting any.

It reads only: it never writes the store, the ledgers or the brain.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from amcp.brain.entries import one_line
from amcp.evolution.decay import NEUTRAL_WEIGHT
from amcp.store.base import RecordFilter

if TYPE_CHECKING:
    from amcp.memory import Memory

DAY = 86_400.0


@dataclass(frozen=True, slots=True)
class Uncredited:
    knowledge_id: str
    title: str
    sessions: int  # sessions shown it in the window
    reads: int  # the store's access count
    weight: float


@dataclass(frozen=True, slots=True)
class AuditReport:
    uncredited: tuple[Uncredited, ...]
    sessions: int  # session ledgers in the window
    sessions_without_outcomes: tuple[str, ...]  # shown memories, ended, credited none
    since: float


def _ledgers(home: Path, since: float) -> list[dict[str, object]]:
    out = []
    for path in sorted((home / "ledger").glob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # a torn or foreign file: not evidence
        if isinstance(data, dict) and float(data.get("updated_at") or 0) >= since:
            out.append(data)
    return out


def _strs(value: object) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def audit(mem: Memory, home: Path, *, days: float = 1.0, now: float | None = None,
          limit: int = 100) -> AuditReport:
    when = time.time() if now is None else now
    since = when - days * DAY
    ledgers = _ledgers(home, since)
    shown: Counter[str] = Counter()
    credited: set[str] = set()
    quiet: list[str] = []
    for data in ledgers:
        ids = set(_strs(data.get("shown")))
        shown.update(ids)
        got = set(_strs(data.get("credited")))
        credited |= got
        stop = data.get("stop")
        ended = isinstance(stop, dict) and stop.get("outcome") is not None
        if ids and ended and not got:
            quiet.append(str(data.get("session_id")))
    rows = mem.store.states(RecordFilter(), limit=-1)  # active records, no bodies
    found = [
        r for r in rows
        if (shown[r.knowledge_id] or r.state.access_count)
        and r.knowledge_id not in credited and r.state.weight == NEUTRAL_WEIGHT
    ]
    found.sort(key=lambda r: (-shown[r.knowledge_id], -r.state.access_count, r.knowledge_id))
    found = found[:limit]
    flt = RecordFilter(ids=tuple(r.knowledge_id for r in found), lifecycles=None)
    titles = {i.knowledge_id: i.record.text for i in mem.list_records(flt, limit=len(found) or 1)
              if i.record is not None} if found else {}
    return AuditReport(
        tuple(Uncredited(r.knowledge_id, one_line(titles.get(r.knowledge_id, ""), 72),
                         shown[r.knowledge_id], r.state.access_count, r.state.weight)
              for r in found),
        len(ledgers), tuple(sorted(quiet)), since,
    )


def render(rep: AuditReport) -> str:
    lines = [
        "# Librarian audit: recalled but never credited",
        "",
        f"**Sessions in window:** {rep.sessions}",
        f"**Uncredited memories:** {len(rep.uncredited)}",
        f"**Sessions shown memories that credited none:** "
        f"{len(rep.sessions_without_outcomes)}",
        "",
        "| Memory | Summary | Sessions | Reads | Weight |",
        "|---|---|---|---|---|",
    ]
    lines += [f"| {u.knowledge_id[:14]} | {u.title.replace('|', '/')} | {u.sessions} | "
              f"{u.reads} | {u.weight:.2f} |" for u in rep.uncredited]
    return "\n".join(lines) + "\n"


__all__ = ["AuditReport", "Uncredited", "audit", "render"]
