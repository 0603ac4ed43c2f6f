"""Storage port and adapters."""

from amcp.store.base import (
    Change,
    ChangeOp,
    IntegrityReport,
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
    "PutResult",
    "RecordFilter",
    "RecordState",
    "Store",
    "StoreStats",
    "StoredRecord",
]
