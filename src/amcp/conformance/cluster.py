"""Several nodes under test at once (Level 3): per-node targets and convergence polling.

The first address given is the run's target; the others are ``Target.peers``. Every node
gets its own :class:`Target` sharing the run's identity and scope, and its own list of
records to clean up (``Target.extra_written``), so cleanup invalidates each record on the
node that acknowledged it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from amcp.conformance.client import NodeFaultError, Peer
from amcp.conformance.steps import Target, read_by_id


def nodes(target: Target) -> list[Target]:
    """The run's target followed by one Target per peer."""
    out = [target]
    for host, port in target.peers:
        written = target.extra_written.setdefault(f"{host}:{port}", [])
        out.append(Target(host, port, target.config, target.me, written))
    return out


def need(target: Target, count: int) -> str | None:
    """Why a procedure cannot run with this many nodes, or None."""
    have = 1 + len(target.peers)
    if have >= count:
        return None
    return (f"needs {count} node addresses, got {have} "
            "(amcp conformance --level 3 HOST:PORT HOST:PORT …)")


@dataclass
class Poller:
    """One open session per node, reused while polling (a session per read would measure
    handshakes, not replication)."""

    targets: list[Target]
    peers: list[Peer | None]

    @classmethod
    def open(cls, targets: Sequence[Target]) -> Poller:
        return cls(list(targets), [None] * len(targets))

    def peer(self, i: int) -> Peer:
        current = self.peers[i]
        if current is None or current.conn.eof:
            current = self.peers[i] = self.targets[i].active()
        return current

    def read(self, i: int, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        try:
            return read_by_id(self.peer(i), ids)
        except NodeFaultError:
            old = self.peers[i]
            if old is not None:
                old.conn.close()
            self.peers[i] = None  # reconnect on the next poll
            return {}

    def close(self) -> None:
        for p in self.peers:
            if p is not None:
                p.conn.close()

    def __enter__(self) -> Poller:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def wait_present(poller: Poller, wanted: dict[int, set[str]], *, within: float,
                 interval: float, fraction: float = 1.0) -> tuple[float | None, float]:
    """Poll until ``fraction`` of the (node, id) pairs in ``wanted`` read back.

    Returns (seconds until that happened or None, the fraction reached at the end)."""
    total = sum(len(ids) for ids in wanted.values()) or 1
    start = time.monotonic()
    have = {i: set[str]() for i in wanted}
    while True:
        for i, ids in wanted.items():
            missing = ids - have[i]
            if missing:
                have[i] |= set(poller.read(i, sorted(missing)))
        reached = sum(len(h) for h in have.values()) / total
        elapsed = time.monotonic() - start
        if reached >= fraction:
            return elapsed, reached
        if elapsed >= within:
            return None, reached
        time.sleep(interval)
