"""amcp — a memory node for AI agents; the Python reference implementation of AMCP 1.0.

Importing this package is cheap: the facade is loaded on first use, and nothing here reads
the environment or touches the disk.
"""

from __future__ import annotations

__version__ = "0.1.0"

TYPE_CHECKING = False  # not typing's: importing typing costs every hook process ~8 ms
if TYPE_CHECKING:
    from typing import Any

    from amcp.memory import Memory, RecallResult, WriteOutcome

__all__ = ["Memory", "RecallResult", "WriteOutcome", "__version__"]


def __getattr__(name: str) -> Any:
    if name in {"Memory", "RecallResult", "WriteOutcome"}:
        from amcp import memory

        return getattr(memory, name)
    raise AttributeError(name)
