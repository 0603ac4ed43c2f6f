"""The exchanges that hold a session in a state until they are answered: the cold boot
(COLD_BOOTING) and the one sync stream (SYNCING, PROFILE §8).

Both directions ask this module the same question about a frame — which input of the
transition tables is it? — so the rules "an ERROR answering the awaited request ends its
exchange" and "one sync stream at a time" are written once, here, and the tables
(``amcp.session.state``) say what follows from them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from amcp.session.state import SYNC_OPENERS, Cue, Input
from amcp.session.support import payload_int
from amcp.wire.constants import MsgType


@dataclass(slots=True)
class SyncStream:
    """The one open sync stream (mutable: its batch timer moves with each batch).

    Only its owner sends SYNC_PUSH / SYNC_PULL_REQUEST in it (the other side's opener is a
    ``Cue.RIVAL_OPENER``), so one seq names the batch an ERROR can fail.
    """

    by_peer: bool
    batch_started: float
    opener_seq: int  # the owner's latest opener: an ERROR answering it ends the stream


@dataclass(slots=True)
class Exchange:
    """The open cold boot and sync stream of one session, and the rule that classifies a
    frame against them."""

    cold_boot_seq: int | None = None  # the COLD_BOOT_REQUEST awaiting its response
    cold_boot_by_peer: bool = False  # True on the node: the request is the peer's
    sync: SyncStream | None = None

    def input_for(self, mt: MsgType, payload: Mapping[str, Any], *, sending: bool) -> Input:
        """The table input for a frame of type ``mt`` that we send (``sending``) or receive."""
        if self.cold_boot_seq is None and self.sync is None:
            return mt  # nothing open (most frames): every message means one thing
        if mt is MsgType.ERROR:
            # An ERROR answers a request that travelled the other way: one we send answers
            # the peer's, one we receive answers ours.
            awaited = self._awaited(by_peer=sending)
            if awaited is not None and payload_int(payload, "ref_seq") == awaited:
                return Cue.EXCHANGE_ERROR
        elif mt in SYNC_OPENERS and self.sync is not None and self.sync.by_peer is sending:
            return Cue.RIVAL_OPENER  # the stream's owner is the other side of this frame
        return mt

    def _awaited(self, *, by_peer: bool) -> int | None:
        """The seq of the open request sent by the peer (``by_peer``) or by us."""
        if self.cold_boot_seq is not None and self.cold_boot_by_peer is by_peer:
            return self.cold_boot_seq
        if self.sync is not None and self.sync.by_peer is by_peer:
            return self.sync.opener_seq
        return None

    def open_cold_boot(self, seq: int, *, by_peer: bool) -> None:
        self.cold_boot_seq, self.cold_boot_by_peer = seq, by_peer

    def close_cold_boot(self) -> None:
        self.cold_boot_seq = None

    def open_sync(self, seq: int, now: float, *, by_peer: bool) -> None:
        self.sync = SyncStream(by_peer=by_peer, batch_started=now, opener_seq=seq)

    def sync_batch(self, mt: MsgType, seq: int, now: float) -> None:
        """Another frame of the open stream: its timer restarts; an opener is now awaited."""
        sync = self.sync
        assert sync is not None  # SYNCING is only entered with a stream
        sync.batch_started = now
        if mt in SYNC_OPENERS:
            sync.opener_seq = seq

    def close_sync(self) -> None:
        self.sync = None

    @property
    def sync_started(self) -> float | None:
        """When the open stream's current batch started (its timer), or None."""
        return None if self.sync is None else self.sync.batch_started
