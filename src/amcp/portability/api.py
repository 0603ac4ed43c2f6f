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

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from amcp.errors import ValidationError
from amcp.memory import Memory
from amcp.portability.model import Decision, ImportOptions, Planned, RecordSpec
from amcp.portability.plan import Known, Planner
from amcp.portability.reader import SourceFile, discover
from amcp.portability.report import HealthBuilder, HealthReport
from amcp.portability.sources import ReadContext, Source, registry
from amcp.portability.verify import Verification, Verifier
from amcp.portability.write import Progress, Written, known_imports, write_batches

ProgressFn = Callable[[Progress], None]


@dataclass(frozen=True, slots=True)
class ImportResult:
    health: HealthReport
    verification: Verification | None  # None on a dry run
    created: int = 0
    already: int = 0  # the store held the same content (put_many dedup)
    superseded: int = 0

    @property
    def ok(self) -> bool:
        return self.verification is None or self.verification.ok

    def to_dict(self) -> dict[str, object]:
        return {
            "ok": self.ok, "created": self.created, "already": self.already,
            "superseded": self.superseded, "health": self.health.to_dict(),
            "verification": self.verification.to_dict() if self.verification else None,
        }


def kinds() -> list[str]:
    return [*registry(), "amcp"]


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


def plan_import(memory: Memory, path: Path, options: ImportOptions) -> HealthReport:
    """Pass one alone: the health report (``--dry-run``). Writes nothing."""
    files = resolve(path, options)
    return _health(files, options, known_imports(memory))


def _health(
    files: list[tuple[SourceFile, Source | None, str]], options: ImportOptions, known: Known
) -> HealthReport:
    builder = HealthBuilder(samples_per_decision=options.samples)
    builder.files = [(f.name, why) for f, _s, why in files]
    for planned in _planned(files, options, known):
        builder.add(planned)
    return builder.build()


def import_path(
    memory: Memory,
    path: Path,
    options: ImportOptions | None = None,
    *,
    dry_run: bool = False,
    progress: ProgressFn | None = None,
) -> ImportResult:
    options = options or ImportOptions()
    files = resolve(path, options)
    known = known_imports(memory)
    health = _health(files, options, known)
    if dry_run:
        return ImportResult(health, None)
    counted = {"items": 0}
    verifier = Verifier(memory)

    def specs() -> Iterator[RecordSpec]:
        for planned in _planned(files, options, known):
            counted["items"] += 1
            if planned.decision in {Decision.KEEP, Decision.TRANSFORM}:
                yield from planned.records

    created = already = superseded = 0
    for w in write_batches(memory, specs(), batch=options.batch, total=health.records,
                           progress=progress):
        verifier.observe(w)
        created += w.created
        already += not w.created
        superseded += bool(w.spec.supersedes and w.created)
    verification = verifier.finish(health.items, counted["items"], health.records)
    return ImportResult(health, verification, created, already, superseded)


__all__ = ["ImportResult", "Written", "import_path", "kinds", "plan_import", "resolve"]
