"""Has any connection committed to a WAL-mode SQLite database since we last looked?

``PRAGMA data_version`` answers that, but only inside a read transaction of its own: a
shared lock and unlock on ``<db>-shm`` (two ``fcntl`` calls) and the pager's snapshot
setup. In the node's MEMORY_READ-by-id loop that was ~30 µs of ~190 µs of server CPU per
round trip on this VM, more than the row lookup it was there to skip.

The same answer is in the file: the *wal-index header* at the start of ``<db>-shm``
(https://sqlite.org/walformat.html, "The WAL-Index Header"). Every commit writes it
(``mxFrame`` grows, ``iChange`` and the header checksum move; a WAL restart changes the
salts), and a reader's snapshot is defined by it, so an unchanged header means no commit
any reader could see. Its layout is fixed: processes linked against different SQLite
versions share it, which is why it cannot change. SQLite writes the second copy, then the
first; reading the first mid-update gives bytes that differ from the remembered ones, or
the old header (a read ordered before that commit) — never a false "unchanged".

``os.pread`` instead of ``mmap``: a mapping of a file another process truncates raises
SIGBUS on access, a short read merely looks like a change. Anything unexpected (no
``-shm`` file, a header that is not initialised, a version we do not know) means "do not
use the watcher": the caller falls back to ``PRAGMA data_version``.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

# WalIndexHdr: iVersion u32, unused u32, iChange u32, isInit u8, bigEndCksum u8,
# szPage u16, mxFrame u32, nPage u32, aFrameCksum[2] u32, aSalt[2] u32, aCksum[2] u32.
HEADER_SIZE = 48
WALINDEX_VERSION = 3007000  # WALINDEX_MAX_VERSION in wal.c since 3.7.0
_VERSION_AND_INIT = struct.Struct("=I4xIB")


class WalWatch:
    """Reads the wal-index header of one database: ``stamp()`` changes whenever a commit
    becomes visible to readers (and sometimes when none did: a stamp is a cache key, not
    a counter)."""

    __slots__ = ("_fd",)

    def __init__(self, fd: int) -> None:
        self._fd = fd

    @classmethod
    def open(cls, db_path: Path) -> WalWatch | None:
        """A watcher for ``db_path`` (in WAL mode, opened by a connection of this process
        that stays open), or None when its ``-shm`` file does not look as expected (or
        the platform has no ``os.pread``: Windows)."""
        if not hasattr(os, "pread"):
            return None
        try:
            fd = os.open(f"{db_path}-shm", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return None
        watch = cls(fd)
        head = watch.stamp()
        if len(head) == HEADER_SIZE and os.pread(fd, HEADER_SIZE, HEADER_SIZE) == head:
            version, _change, init = _VERSION_AND_INIT.unpack_from(head)
            if version == WALINDEX_VERSION and init == 1:
                return watch
        watch.close()
        return None

    def stamp(self) -> bytes:
        return os.pread(self._fd, HEADER_SIZE, 0)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


__all__ = ["HEADER_SIZE", "WALINDEX_VERSION", "WalWatch"]
