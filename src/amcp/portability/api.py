"""``import_path``: the typed Python API behind ``amcp import`` and the HTTP import.

    from amcp.portability import ImportOptions, import_path
    result = import_path(memory, Path("mem0_export.json"), ImportOptions(kind="auto"))
    print(result.health.to_markdown(), result.verification.to_markdown())

Pass one reads every file and decides every item (the health report); a bad item stops
the import there, naming file and line, before anything is written. ``dry_run`` stops
after pass one. Pass two reads the files again and writes in atomic batches, checking each
record as it goes; the verification report closes it.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, TYPE_CHECKING

from amcp.errors import AmcpError, ValidationError
from amcp.portability.history import Recorder
from amcp.portability.model import Decision, ImportOptions, Planned, RecordSpec
from amcp.portability.pgsource import is_dsn, redacted, snapshot_langgraph
from amcp.portability.plan import Known, Planner
from amcp.portability.reader import SourceFile, discover
from amcp.portability.report import HealthBuilder, HealthReport
from amcp.portability.sources import ReadContext, Source, registry
from amcp.portability.verify import Verification, Verifier
from amcp.portability.write import Progress, Written, known_imports, write_batches

if TYPE_CHECKING:  # Memory calls into this package: no import cycle at run time
    from amcp.memory import Memory

ProgressFn = Callable[[Progress], None]


@dataclass(frozen=True, slots=True)
class ImportResult:
    health: HealthReport
    verification: Verification | None  # None on a dry run
    created: int = 0
    already: int = 0  # the store held the same content (put_many dedup)
    superseded: int = 0
    report: str | None = None  # the import log's id (portability.history; None: dry run)

    @property
    def ok(self) -> bool:
        return self.verification is None or self.verification.ok

    def to_dict(self) -> dict[str, object]:
        return {
            "ok": self.ok, "created": self.created, "already": self.already,
            "superseded": self.superseded, "report": self.report,
            "health": self.health.to_dict(),
            "verification": self.verification.to_dict() if self.verification else None,
        }


def kinds() -> list[str]:
    return [*registry(), "amcp"]


@contextlib.contextmanager
def _located(where: Path | str) -> Iterator[tuple[Path, str | None]]:
    """A path to read, and the name to show for it when it is not a file: a PostgreSQL DSN
    (LangGraph's PostgresStore) is snapshotted into a temporary SQLite file first
    (``pgsource``), shown with its password redacted."""
    text = str(where)
    if not isinstance(where, str) or not is_dsn(text):
        yield Path(where), None
        return
    with tempfile.TemporaryDirectory(prefix="amcp-pg-") as tmp:
        local = Path(tmp) / "store.sqlite"
        snapshot_langgraph(text, local)
        yield local, redacted(text)


def resolve(path: Path, options: ImportOptions) -> list[tuple[SourceFile, Source | None, str]]:
    """Each file with the source that reads it (None: skipped, and why)."""
    sources = registry()
    if options.kind not in {"auto", *sources}:
        raise ValidationError("--from", f"unknown source {options.kind!r}; one of: auto, "
                              + ", ".join(kinds()))
    files = discover(path, options)
    if path.is_dir() and (path / "history.db").is_file():
        files = [f for f in files if f.path == path / "history.db"]  # a mem0 directory
    out: list[tuple[SourceFile, Source | None, str]] = []
    for src in files:
        head = src.head()
        if options.kind != "auto":
            chosen = sources[options.kind]
            if len(files) > 1 and not chosen.sniff(src, head):
                out.append((src, None, f"skipped: not {options.kind}"))
            else:
                out.append((src, chosen, f"read as {options.kind}"))
            continue
        found = next((s for s in sources.values() if s.sniff(src, head)), None)
        if found is None and options.mapping:
            found = sources["table"]  # a column mapping says what the table holds
        out.append((src, found, f"read as {found.name}" if found else "skipped: unknown format"))
    if not any(s for _f, s, _w in out):
        names = ", ".join(kinds())
        raise ValidationError(
            str(path), f"unknown format: no importer recognises it; pass --from ({names})"
        )
    return out


def _planned(
    files: list[tuple[SourceFile, Source | None, str]], options: ImportOptions, known: Known
) -> Iterator[Planned]:
    planner = Planner(options, known)
    for src, source, _why in files:
        if source is None:
            continue
        ctx = ReadContext.for_file(src, options)
        yield from planner.plan(source.read(src, ctx))


def plan_import(memory: Memory, path: Path | str, options: ImportOptions) -> HealthReport:
    """Pass one alone: the health report (``--dry-run``). Writes nothing."""
    options = _for(path, options)
    with _located(path) as (local, shown):
        files = _named(resolve(local, options), shown)
        return _health(files, options, known_imports(memory))[0]


def _for(where: Path | str, options: ImportOptions) -> ImportOptions:
    """A DSN holds LangGraph's store table; any other ``--from`` is a mistake (said before
    connecting)."""
    if not isinstance(where, str) or not is_dsn(where):
        return options
    if options.kind not in ("auto", "langgraph"):
        raise ValidationError("--from", f"{redacted(where)} is a PostgreSQL database: only "
                                        "--from langgraph (its PostgresStore) is read from one")
    return replace(options, kind="langgraph")


def _named(files: list[tuple[SourceFile, Source | None, str]], shown: str | None
           ) -> list[tuple[SourceFile, Source | None, str]]:
    if shown is None:
        return files
    return [(replace(f, name=shown), s, why) for f, s, why in files]


def _health(
    files: list[tuple[SourceFile, Source | None, str]], options: ImportOptions, known: Known,
    *, keep: int = 0,
) -> tuple[HealthReport, list[Planned] | None]:
    """The health report, and pass one's decisions when there were at most ``keep``."""
    builder = HealthBuilder(samples_per_decision=options.samples)
    builder.files = [(f.name, why) for f, _s, why in files]
    kept: list[Planned] | None = [] if keep > 0 else None
    for planned in _planned(files, options, known):
        builder.add(planned)
        if kept is not None:
            kept.append(planned)
            if len(kept) > keep:
                kept = None
    return builder.build(), kept


def import_path(
    memory: Memory,
    path: Path | str,
    options: ImportOptions | None = None,
    *,
    dry_run: bool = False,
    progress: ProgressFn | None = None,
    label: str | None = None,
) -> ImportResult:
    """Import a file, a directory, a .zip export, or (a ``str``) a PostgreSQL DSN holding
    LangGraph's ``PostgresStore``. Every import that writes (not a dry run) is recorded in
    the store's import log (``portability.history``), also when it stops on a bad item;
    ``label`` names the source there (default: the path, a DSN with its password
    redacted)."""
    options = _for(path, options or ImportOptions())
    shown_as = label or (redacted(path) if isinstance(path, str) and is_dsn(path) else str(path))
    recorder = None if dry_run else Recorder(shown_as)
    try:
        with _located(path) as (local, shown):
            return _import_files(memory, _named(resolve(local, options), shown), options,
                                 dry_run=dry_run, progress=progress, recorder=recorder)
    except AmcpError as exc:
        if recorder is not None:
            recorder.fail(memory.store, exc, recorder.created)
        raise


def _import_files(
    memory: Memory,
    files: list[tuple[SourceFile, Source | None, str]],
    options: ImportOptions,
    *,
    dry_run: bool,
    progress: ProgressFn | None,
    recorder: Recorder | None = None,
) -> ImportResult:
    rec = recorder or Recorder("-")
    rec.sources = [s.name for _f, s, _w in files if s is not None]
    rec.files_skipped = sum(s is None for _f, s, _w in files)
    known = known_imports(memory)
    health, kept = _health(files, options, known, keep=0 if dry_run else options.keep_planned)
    if dry_run:
        return ImportResult(health, None)
    counted = {"items": 0}
    verifier = Verifier(memory)

    def specs() -> Iterator[RecordSpec]:
        for planned in kept if kept is not None else _planned(files, options, known):
            counted["items"] += 1
            rec.planned(planned)
            if planned.decision in {Decision.KEEP, Decision.TRANSFORM}:
                yield from planned.records

    already = superseded = held = 0
    for w in write_batches(memory, specs(), batch=options.batch, total=health.records,
                           progress=progress, prefetch=options.prefetch):
        verifier.observe(w)
        for one in w:
            rec.created += one.created
            already += not one.created
            superseded += bool(one.spec.supersedes and one.created)
            held += one.held
    verification = verifier.finish(health.items, counted["items"], health.records)
    result = ImportResult(health, verification, rec.created, already, superseded)
    log = rec.finish(memory.store, health, verification, already=already,
                     superseded=superseded, held=held)
    return replace(result, report=log.id)




_SUFFIX = {"mem0": ".json", "mcp-memory": ".jsonl", "letta": ".af", "chatgpt": ".json",
           "claude": ".json", "basic-memory": ".md", "portable": ".jsonl"}


def import_upload(
    memory: Memory,
    body: IO[bytes],
    options: ImportOptions,
    *,
    check_scopes: Callable[[list[str]], None],
    dry_run: bool = False,
) -> ImportResult:
    """An upload (the HTTP import with ``from``): written to a temp file, planned, the
    caller's write access checked on every scope the plan maps to, then imported. A zip
    upload is read as an archive whatever ``from`` says about its members."""
    head = body.read(4)
    body.seek(0)
    suffix = ".zip" if head.startswith(b"PK\x03\x04") else _SUFFIX.get(options.kind, ".dat")
    with tempfile.TemporaryDirectory(prefix="amcp-upload-") as tmp:
        path = Path(tmp) / f"upload{suffix}"
        with path.open("wb") as out:
            shutil.copyfileobj(body, out)
        health = plan_import(memory, path, options)
        check_scopes([scope for scope, _n in health.scopes])
        if dry_run:
            return ImportResult(health, None)
        return import_path(memory, path, options, label=f"upload ({options.kind})")


__all__ = ["ImportResult", "Written", "import_path", "import_upload", "kinds", "plan_import",
           "resolve"]
