"""``amcp verify``: the whole audit of a store, and the ways out of a damaged one.

It opens the store without the check on open (which refuses a store whose log is damaged)
and runs the full check: the whole chain, the signed head with its row count and digest,
every witness, every row against its seal and the log, every body against its id, checksum,
envelope and signature. Any finding is a non-zero exit, with each bad record named.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from amcp.cli.common import emit_json, err, friendly, out, require_store, store_location
from amcp.cli.options import StoreOpt

if TYPE_CHECKING:
    from amcp.store.base import IntegrityReport

_MISSING = "the witness of this store is missing"


@friendly
def verify(
    store: StoreOpt = None,
    json_: Annotated[bool, typer.Option("--json", help="Machine-readable report.")] = False,
    rewitness: Annotated[bool, typer.Option(
        "--rewitness",
        help="After a deliberate move of the store: if the only finding is a missing "
        "witness, witness the current head here.",
    )] = False,
    salvage: Annotated[Path | None, typer.Option(
        "--salvage", help="Write every record that still verifies to this NDJSON file.",
    )] = None,
    include_sensitive: Annotated[bool, typer.Option(
        "--include-sensitive", help="With --salvage: also sensitive records, decrypted.",
    )] = False,
) -> None:
    """The full audit: exit 1 and name each problem and bad record if anything is wrong."""
    from amcp.memory import Memory

    path = store_location(store)
    require_store(path)
    with Memory(path, embedder=None, check_embedder=False, verify_on_open=False) as mem:
        report = mem.store.verify(full=True)
        warnings = mem.store.integrity_warnings()
        if rewitness:
            report = _rewitness(mem, report)
        if salvage is not None:
            with salvage.open("w", encoding="utf-8") as fh:
                exported = mem.export(fh, include_sensitive=include_sensitive)
            err.print(f"salvaged {_count(exported)} verified record(s) into {salvage}")
    data = {**_as_json(report), "warnings": list(warnings)}
    data["ok"] = data["ok"] and not warnings
    if json_:
        emit_json(data)
    else:
        _print(report)
        for warning in warnings:
            out.print(f"[red]index[/red] {warning}")
    if not data["ok"]:
        raise typer.Exit(1)


def _rewitness(mem: Any, report: IntegrityReport) -> IntegrityReport:
    others = [p for p in report.problems if not p.startswith(_MISSING)]
    if others or not report.problems:
        if others:
            err.print("not re-witnessed: the store has other problems than a missing witness")
        return report
    mem.store.rewitness()
    err.print("witnessed the current head; the store opens again")
    return mem.store.verify(full=True)  # type: ignore[no-any-return]


def _count(exported: Any) -> int:
    return int(exported.records)


def _as_json(report: IntegrityReport) -> dict[str, Any]:
    return {
        "ok": report.ok and not report.damaged,
        "check": report.mode,
        "changes": report.checked_changes,
        "log_problems": list(report.problems),
        "quarantined": [{"knowledge_id": k, "problem": why} for k, why in report.damaged],
    }


def _print(report: IntegrityReport) -> None:
    if report.ok and not report.damaged:
        out.print(f"ok: {report.checked_changes} changes, every record verified ({report.mode})")
        return
    for problem in report.problems:
        out.print(f"[red]log[/red]  {problem}")
    for kid, why in report.damaged:
        out.print(f"[red]record[/red] {kid}: {why}")
    if report.problems:
        out.print("the change log is damaged: the store will not open. Recover the records "
                  "that still verify with `amcp verify --salvage FILE` and import them into a "
                  "new store.")
    if report.damaged:
        out.print(f"{len(report.damaged)} record(s) quarantined: left out of every answer; "
                  "the rest of the store is served. To be rid of them, salvage what verifies "
                  "(`amcp verify --salvage FILE`) and import it, with good copies of the "
                  "damaged records from an export or a peer, into a new store.")


__all__ = ["verify"]
