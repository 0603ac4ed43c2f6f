"""Reading other tools' files safely: bounded, streamed, UTF-8 checked, zip bombs refused.

Every error names the file and the line (or byte, or archive member) it is about, and is
raised while the import is still planning, before anything is written.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import sqlite3
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from amcp.errors import ValidationError
from amcp.portability.model import ImportOptions

MAX_LINE = 16 * 1024 * 1024  # one JSONL/CSV line; longer is not a record but a dump
MAX_FILES = 100_000  # files taken from a directory or an archive
SNIFF = 64 * 1024


@dataclass(frozen=True, slots=True)
class SourceFile:
    """One file to import: a path on disk or a member of an archive."""

    name: str  # shown in errors and reports
    size: int
    opener: Callable[[], IO[bytes]]
    path: Path | None = None  # set when the file is on disk (SQLite needs one)

    @property
    def basename(self) -> str:
        """The file's own name (an archive member's, not the archive's)."""
        return Path(self.name.rsplit("!", 1)[-1]).name

    def head(self, n: int = SNIFF) -> bytes:
        with self.opener() as fh:
            return fh.read(n)

    @contextlib.contextmanager
    def local_path(self) -> Iterator[Path]:
        """A path on disk (archive members are copied to a temp file first)."""
        if self.path is not None:
            yield self.path
            return
        with tempfile.TemporaryDirectory(prefix="amcp-import-") as tmp:
            dst = Path(tmp) / Path(self.name).name
            with self.opener() as src, dst.open("wb") as out:
                shutil.copyfileobj(src, out)
            yield dst


def discover(path: Path, options: ImportOptions) -> list[SourceFile]:
    """The files under ``path``: itself, a directory's files, or a zip archive's members."""
    if not path.exists():
        raise ValidationError(str(path), "no such file or directory")
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and not _hidden(p, path))
        if len(files) > MAX_FILES:
            raise ValidationError(str(path), f"more than {MAX_FILES} files")
        return [_disk(p) for p in files]
    if zipfile.is_zipfile(path):
        return _archive(path, options)
    return [_disk(path)]


def _hidden(p: Path, root: Path) -> bool:
    return any(part.startswith(".") for part in p.relative_to(root).parts)


def _disk(p: Path) -> SourceFile:
    return SourceFile(str(p), p.stat().st_size, lambda: p.open("rb"), p)


def _archive(path: Path, options: ImportOptions) -> list[SourceFile]:
    zf = zipfile.ZipFile(path)
    members = [i for i in zf.infolist() if not i.is_dir()]
    if len(members) > MAX_FILES:
        raise ValidationError(str(path), f"archive has more than {MAX_FILES} members")
    total = 0
    out: list[SourceFile] = []
    for info in members:
        where = f"{path}!{info.filename}"
        total += info.file_size
        if total > options.max_archive_bytes:
            raise ValidationError(
                where, f"archive inflates past {options.max_archive_bytes} bytes (zip bomb?)"
            )
        if info.file_size > 1024 * 1024 and info.file_size > options.max_archive_ratio * max(
            info.compress_size, 1
        ):
            raise ValidationError(
                where,
                f"member inflates {info.file_size // max(info.compress_size, 1)}x "
                f"(limit {options.max_archive_ratio}x): refused as a zip bomb",
            )
        if info.filename.startswith("__MACOSX/") or Path(info.filename).name.startswith("."):
            continue
        out.append(SourceFile(where, info.file_size, _member_opener(zf, info)))
    return out


def _member_opener(zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> Callable[[], IO[bytes]]:
    def opener() -> IO[bytes]:
        return io.BufferedReader(_Capped(zf.open(info), info.file_size, info.filename))

    return opener


class _Capped(io.RawIOBase):
    """A member stream that refuses to yield more bytes than its header declared."""

    def __init__(self, inner: IO[bytes], limit: int, name: str) -> None:
        self._inner, self._left, self._name = inner, limit, name

    def readable(self) -> bool:
        return True

    def readinto(self, buf: Any) -> int:
        data = self._inner.read(len(buf))
        self._left -= len(data)
        if self._left < 0:
            raise ValidationError(self._name, "member is larger than its archive header says")
        buf[: len(data)] = data
        return len(data)

    def close(self) -> None:
        self._inner.close()
        super().close()


def iter_lines(src: SourceFile) -> Iterator[tuple[int, str]]:
    """``(line number, text)`` for each non-blank line, streamed; bad UTF-8 names the line."""
    with src.opener() as fh:
        for lineno, line in enumerate(iter(lambda: fh.readline(MAX_LINE + 1), b""), start=1):
            if len(line) > MAX_LINE:
                raise ValidationError(f"{src.name}: line {lineno}", f"longer than {MAX_LINE} bytes")
            text = decode(line, f"{src.name}: line {lineno}")
            if lineno == 1:
                text = text.removeprefix("\ufeff")
            if text.strip():
                yield lineno, text


def decode(data: bytes, where: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValidationError(where, f"invalid UTF-8 at byte {exc.start}") from exc


def json_line(text: str, where: str) -> dict[str, Any]:
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValidationError(where, f"not JSON ({exc.msg}); the line may be cut") from exc
    if not isinstance(obj, dict):
        raise ValidationError(where, "expected a JSON object")
    return obj


def load_json(src: SourceFile, options: ImportOptions) -> Any:
    """A whole JSON document (bounded). A document that is a JSON string holding JSON —
    how some tools double-encode their exports — is decoded once more."""
    if src.size > options.max_json_bytes:
        raise ValidationError(
            src.name,
            f"a {src.size}-byte JSON document is over the {options.max_json_bytes}-byte limit "
            "for whole documents; convert it to JSON Lines (one item per line), which streams",
        )
    with src.opener() as fh:
        data = fh.read(options.max_json_bytes + 1)
    text = decode(data, src.name).removeprefix("\ufeff")
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValidationError(
            f"{src.name}: line {exc.lineno}", f"not JSON ({exc.msg}); the file may be cut"
        ) from exc
    if isinstance(obj, str) and obj.lstrip()[:1] in {"{", "["}:
        with contextlib.suppress(json.JSONDecodeError):
            return json.loads(obj)
    return obj


def is_sqlite(head: bytes) -> bool:
    return head.startswith(b"SQLite format 3\x00")


def sqlite_tables(path: Path) -> dict[str, list[str]]:
    with contextlib.closing(connect_ro(path)) as db:
        db.text_factory = str
        names = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return {n: [c[1] for c in db.execute(f"PRAGMA table_info({quote(n)})")] for n in names}


def connect_ro(path: Path) -> sqlite3.Connection:
    """Read-only: an import never changes the other tool's database."""
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        db.execute("SELECT 1 FROM sqlite_master LIMIT 1")
    except sqlite3.DatabaseError as exc:
        raise ValidationError(str(path), f"not a readable SQLite database: {exc}") from exc
    db.text_factory = bytes  # decoded by the caller, which can name the row on bad UTF-8
    return db


def quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def cell(value: object, where: str) -> object:
    return decode(value, where) if isinstance(value, bytes) else value
