"""Hybrid logical clock (PROFILE §5, upstream L5 causal_clock_spec).

A timestamp is ``(physical_ms, logical, node)``. On the wire it travels packed into a u64 as
``(physical_ms << 16) | logical``; in AMF records it is the string
``YYYY-MM-DDTHH:MM:SS.mmmZ-LLLL-NODE``. Ordering is total: physical, logical, then node.

The clock never goes backwards even when the wall clock does: physical time only advances
through ``max(wall, last)``, and ties within a millisecond bump the logical counter. When the
counter would overflow 16 bits, physical time is advanced by one millisecond instead.
"""

from __future__ import annotations

import hashlib
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from amcp.errors import PreconditionFailed, ValidationError

MAX_PHYSICAL = (1 << 48) - 1
MAX_LOGICAL = 0xFFFF
DEFAULT_MAX_DRIFT_MS = 60_000

_NODE_RE = re.compile(r"[A-Za-z0-9_]{1,64}")
_HLC_RE = re.compile(
    r"(?P<ts>\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3})Z-(?P<logical>[0-9a-f]{4})-(?P<node>[A-Za-z0-9_]{1,64})"
)


def node_tag(node_id: str) -> str:
    """Default NODE segment: ``n`` + 16 hex digits of a hash of the node's identity."""
    return "n" + hashlib.sha256(node_id.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True, slots=True, order=True)
class Timestamp:
    physical_ms: int
    logical: int
    node: str = "n0"

    def __post_init__(self) -> None:
        if not 0 <= self.physical_ms <= MAX_PHYSICAL:
            raise ValidationError("hlc.physical_ms", "out of the 48-bit range")
        if not 0 <= self.logical <= MAX_LOGICAL:
            raise ValidationError("hlc.logical", "out of the 16-bit range")
        if not _NODE_RE.fullmatch(self.node):
            raise ValidationError("hlc.node", "must be 1-64 characters of [A-Za-z0-9_]")

    def pack(self) -> int:
        return (self.physical_ms << 16) | self.logical

    @classmethod
    def unpack(cls, packed: int, node: str = "n0") -> Timestamp:
        if not 0 <= packed < 1 << 64:
            raise ValidationError("hlc", "packed clock must be a u64")
        return cls(packed >> 16, packed & MAX_LOGICAL, node)

    def __str__(self) -> str:
        dt = datetime.fromtimestamp(self.physical_ms / 1000, tz=UTC)
        return (
            f"{dt:%Y-%m-%dT%H:%M:%S}.{self.physical_ms % 1000:03d}Z-{self.logical:04x}-{self.node}"
        )

    @classmethod
    def parse(cls, text: str) -> Timestamp:
        m = _HLC_RE.fullmatch(text)
        if m is None:
            raise ValidationError("causal.hlc", f"not an HLC string: {text[:80]!r}")
        # fromisoformat, not strptime: the regex has fixed the shape already, and strptime
        # costs ~10x more (a sync applies one per received record, PROFILE §5 drift check).
        try:
            dt = datetime.fromisoformat(m["ts"]).replace(tzinfo=UTC)
        except ValueError as exc:  # the right shape, not a date: month 13, February 30
            raise ValidationError("causal.hlc", f"not a date: {text[:80]!r}") from exc
        # Integer arithmetic from the parsed fields: float timestamps lose milliseconds.
        epoch = datetime(1970, 1, 1, tzinfo=UTC)
        delta = dt - epoch
        ms = (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000
        return cls(ms, int(m["logical"], 16), m["node"])


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


class HLC:
    """A thread-safe hybrid logical clock for one node."""

    def __init__(
        self,
        node: str = "n0",
        *,
        wall: Callable[[], int] = wall_ms,
        max_drift_ms: int = DEFAULT_MAX_DRIFT_MS,
        last: int = 0,
    ) -> None:
        if not _NODE_RE.fullmatch(node):
            raise ValidationError("hlc.node", "must be 1-64 characters of [A-Za-z0-9_]")
        self.node = node
        self._wall = wall
        self.max_drift_ms = max_drift_ms
        self._pt = last >> 16
        self._lc = last & MAX_LOGICAL
        self._lock = threading.Lock()

    def _advance(self, pt: int, lc: int) -> int:
        if lc > MAX_LOGICAL:  # PROFILE §5: overflow moves physical time on by 1 ms
            pt, lc = pt + 1, 0
        self._pt, self._lc = pt, lc
        return (pt << 16) | lc

    def send(self) -> int:
        """Tick for a local event or an outgoing message; returns the packed u64."""
        with self._lock:
            wall = self._wall()
            if wall > self._pt:
                return self._advance(wall, 0)
            return self._advance(self._pt, self._lc + 1)

    def receive(self, remote: int) -> int:
        """Merge a received packed clock. Refuses clocks too far in the future (412)."""
        r_pt, r_lc = remote >> 16, remote & MAX_LOGICAL
        with self._lock:
            wall = self._wall()
            if r_pt - wall > self.max_drift_ms:
                raise PreconditionFailed(
                    f"remote clock is {r_pt - wall} ms ahead (max drift {self.max_drift_ms} ms)"
                )
            pt = max(wall, self._pt, r_pt)
            if pt == self._pt == r_pt:
                lc = max(self._lc, r_lc) + 1
            elif pt == self._pt:
                lc = self._lc + 1
            elif pt == r_pt:
                lc = r_lc + 1
            else:
                lc = 0
            return self._advance(pt, lc)

    def now(self) -> Timestamp:
        """A new send-tick as a Timestamp carrying this node's tag."""
        return Timestamp.unpack(self.send(), self.node)

    @property
    def last(self) -> int:
        return (self._pt << 16) | self._lc

    def observe(self, packed: int) -> None:
        """Raise the clock to at least ``packed`` without drift checks (restoring from a store)."""
        with self._lock:
            if packed > self.last:
                self._pt, self._lc = packed >> 16, packed & MAX_LOGICAL
