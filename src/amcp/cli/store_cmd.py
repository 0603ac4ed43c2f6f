"""``amcp store copy SRC DST``: move a store between backends (docs/postgres.md)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated

import typer

from amcp.cli.common import emit_json, err, friendly, out, require_store, store_location
from amcp.cli.options import JsonOpt, group

if TYPE_CHECKING:
    from amcp.store.base import Store
    from amcp.store.copy import CopyReport
    from amcp.store.url import StoreLocation

store_app = group("Whole stores: copy one into another (SQLite ⇄ PostgreSQL).")

_FORMS = "A store file, sqlite:PATH or postgresql://USER:PASS@HOST/DB."
Source = Annotated[str, typer.Argument(metavar="SOURCE", help=_FORMS)]
Destination = Annotated[str, typer.Argument(metavar="DESTINATION", help=_FORMS)]


@contextmanager
def _opened(location: StoreLocation) -> Iterator[Store]:
    """The store's own adapter with its node's keys (``StoreLocation.anchor``)."""
    from amcp.keyring import Keyring
    from amcp.store.url import open_store

    location.anchor.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    store = open_store(location, Keyring(location.anchor.parent / "keys"))
    try:
        yield store
    finally:
        store.close()


@store_app.command("copy")
@friendly
def copy_cmd(
    source: Source,
    destination: Destination,
    into_nonempty: Annotated[bool, typer.Option(
        "--into-nonempty", help="Add to a destination that already holds records (those it "
        "holds are kept as they are).")] = False,
    json_: JsonOpt = False,
) -> None:
    """Copy every record, tombstone, log entry and weight of SOURCE into DESTINATION, then
    verify the copy; the destination's node signs its own chain and records the source
    head it was made from. Exit 1 when a check fails."""
    from amcp.errors import ConfigError
    from amcp.store.copy import copy_store

    src, dst = store_location(source), store_location(destination)
    require_store(src)
    if src.anchor == dst.anchor:
        raise ConfigError(f"{src} is both the source and the destination")
    with _opened(src) as a, _opened(dst) as b:
        report = copy_store(a, b, source=str(src), destination=str(dst),
                            allow_nonempty=into_nonempty, progress=_progress(json_))
    if json_:
        emit_json(report.to_dict())
    else:
        _print(report)
    if not report.ok:
        raise typer.Exit(1)


def _progress(quiet: bool) -> Callable[[int, int], None] | None:
    if quiet or not err.is_terminal:
        return None

    def tick(done: int, total: int) -> None:
        err.print(f"\rcopied {done}/{total} log entries", end="")

    return tick


def _print(rep: CopyReport) -> None:
    out.print(f"copied {rep.source} → {rep.destination} in {rep.seconds:.1f} s", markup=False)
    out.print(f"  records {rep.records}, tombstones {rep.tombstones}, weights {rep.weights}, "
              f"vectors {rep.vectors}")
    out.print(f"  log entries read {rep.changes_read}, written {rep.changes_written}"
              f" ({rep.folded} of purged records carried by their tombstones)")
    out.print(f"  source head {rep.source_head[0]} {rep.source_head[1][:16]}…, destination "
              f"head {rep.destination_head[0]} {rep.destination_head[1][:16]}…")
    for check in rep.checks:
        mark = "ok  " if check.ok else "FAIL"
        out.print(f"  {mark} {check.name}: {check.detail}", markup=False)


__all__ = ["copy_cmd", "store_app"]
