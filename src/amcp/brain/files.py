"""Writing a set of files into a directory so that a failed run is repaired by the next.

Each run stages every file in ``<dir>/.staging/`` and then moves them into place one by
one (``os.replace`` is atomic per file), deleting files of the set that the new run no
longer produces. A run that dies half-way leaves a mix of old and new files — each of them
whole — and a stale staging directory, which the next run removes before doing all of it
again. The state file is written last, so it names a complete run.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path

STAGING = ".staging"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def publish(
    directory: Path,
    files: Mapping[str, bytes],
    *,
    owned: Callable[[str], bool],
    last: str | None = None,
) -> list[str]:
    """Make ``directory`` hold exactly ``files`` among the names ``owned`` accepts.

    ``last`` (a key of ``files``) is moved into place after every other file. Returns the
    names removed because the new set no longer has them.
    """
    directory.mkdir(parents=True, exist_ok=True)
    staging = directory / STAGING
    if staging.exists():
        shutil.rmtree(staging)  # a failed run's leftovers
    staging.mkdir()
    try:
        for name, data in files.items():
            (staging / name).write_bytes(data)
        for name in sorted(n for n in files if n != last):
            os.replace(staging / name, directory / name)
        removed = sorted(
            p.name for p in directory.iterdir()
            if p.is_file() and owned(p.name) and p.name not in files
        )
        for name in removed:
            (directory / name).unlink()
        if last is not None and last in files:
            os.replace(staging / last, directory / last)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return removed


__all__ = ["STAGING", "publish", "sha256", "write_atomic"]
