"""Template filters. Each returns plain text, which Jinja then escapes: none returns markup."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from amcp.clock import Timestamp


def hlc_time(packed: int) -> str:
    """A packed HLC as the UTC wall time it carries."""
    ms = Timestamp.unpack(packed).physical_ms
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def unix_time(ts: float | None) -> str:
    if ts is None:
        return "—"
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str)


def signed(value: float) -> str:
    return f"{value:+.4f}"


def short(knowledge_id: str) -> str:
    return knowledge_id[:14] + "…" if len(knowledge_id) > 15 else knowledge_id


def size(n: int | None) -> str:
    if n is None:
        return "—"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"


def duration(seconds: float | None) -> str:
    """``0.4 s``, ``42 s``, ``7 min``, ``3.5 h``, ``2.0 d``; ``—`` for None."""
    if seconds is None:
        return "—"
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h" if seconds < 172800 else f"{seconds / 86400:.1f} d"


def ago(ts: float | None, now: float) -> str:
    """How long before ``now`` the wall-clock time ``ts`` was (``—``: never)."""
    return "—" if ts is None else f"{duration(max(0.0, now - ts))} ago"


FILTERS: dict[str, Callable[..., str]] = {
    "hlc_time": hlc_time, "unix_time": unix_time, "pretty_json": pretty_json,
    "signed": signed, "short": short, "size": size, "duration": duration, "ago": ago,
}

__all__ = ["FILTERS"]
