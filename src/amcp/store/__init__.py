"""Storage port and adapters.

The port's names load on first use (PEP 562): importing ``amcp.store.fastread`` (the hooks'
read-only path) must not load the record classes that ``amcp.store.base`` needs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any

    from amcp.store.base import (
        Change,
        ChangeOp,
        IntegrityReport,
        PutItem,
        PutResult,
        RecordFilter,
        RecordState,
        Store,
        StoredRecord,
        StoreStats,
    )

__all__ = [
    "Change",
    "ChangeOp",
    "IntegrityReport",
    "PutItem",
    "PutResult",
    "RecordFilter",
    "RecordState",
    "Store",
    "StoreStats",
    "StoredRecord",
]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from amcp.store import base

        return getattr(base, name)
    raise AttributeError(f"module 'amcp.store' has no attribute {name!r}")
