"""The SQLite adapter's thresholds, as one value its owner passes in.

Each default is the figure the adapter was measured with (the comments at each use say
why); a deployment or a test that needs another one passes ``SQLiteTuning(...)`` to
``SQLiteStore`` instead of reaching into a module constant.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import NamedTuple


# NamedTuples, not dataclasses: fts_rank is on the hooks' read path, which keeps
# dataclasses (and the inspect/ast it imports) out of its start-up (docs/hooks.md).
class AccessFlush(NamedTuple):
    """When buffered access counts are written (``SQLiteAccess.touch``)."""

    after_s: float = 1.0  # buffered counts reach the file at most this late
    after_n: int = 512  # ... or once this many records have buffered counts
    # With a background flusher a reader writes only if the flusher has fallen this far
    # behind (the buffer is bounded either way).
    inline_n: int = 2048
    clock: Callable[[], float] = time.monotonic  # what "how late" is judged by


class Pruning(NamedTuple):
    """When BM25 top-k pruning and scope-drawn pages are worth their extra statements
    (``fts_rank.ranked``, ``SQLiteLexical``)."""

    # Below this many rows ranking every match costs a few milliseconds (checked first:
    # the term counts cost a doclist walk each).
    min_rows: int = 20_000
    # Nor below this many matches in all (the sum of the terms' document counts).
    min_matches: int = 8_000
    vocab_keep: int = 4096  # term statistics kept between commits


class SQLiteTuning(NamedTuple):
    access: AccessFlush = AccessFlush()
    pruning: Pruning = Pruning()


__all__ = ["AccessFlush", "Pruning", "SQLiteTuning"]
