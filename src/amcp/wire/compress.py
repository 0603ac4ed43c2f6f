"""LZ4 frame-format compression with a bounded inflate (PROFILE §1).

The bound is the whole point: a few hundred KiB of LZ4 can claim gigabytes, so the receiver
never asks for more than ``limit + 1`` output bytes and treats reaching it as a violation.
"""

from __future__ import annotations

import lz4.frame

from amcp.wire.constants import COMPRESS_THRESHOLD
from amcp.wire.errors import FrameViolationError


def maybe_compress(data: bytes) -> bytes | None:
    """LZ4 frame of ``data`` if it is over the threshold and actually shrinks, else ``None``.

    Sending an incompressible payload compressed only costs the receiver work, so the
    sender keeps the original whenever LZ4 does not win.
    """
    if len(data) <= COMPRESS_THRESHOLD:
        return None
    packed: bytes = lz4.frame.compress(data)
    return packed if len(packed) < len(data) else None


def decompress_bounded(data: bytes, limit: int, ref_seq: int) -> bytes:
    """Inflate one complete LZ4 frame whose output must not exceed ``limit`` bytes."""
    inflater = lz4.frame.LZ4FrameDecompressor()
    try:
        # max_length caps the output buffer lz4 allocates, whatever content size the LZ4
        # frame header claims.
        out: bytes = inflater.decompress(data, max_length=limit + 1)
    except (RuntimeError, ValueError, MemoryError, OverflowError) as exc:
        raise FrameViolationError(
            f"payload is not a valid LZ4 frame: {exc}", ref_seq=ref_seq
        ) from None
    if len(out) > limit:
        raise FrameViolationError(
            f"compressed payload inflates past {limit} bytes", ref_seq=ref_seq
        )
    if not inflater.eof:
        raise FrameViolationError("compressed payload is a truncated LZ4 frame", ref_seq=ref_seq)
    if inflater.unused_data:
        raise FrameViolationError("bytes after the LZ4 frame in the payload", ref_seq=ref_seq)
    return out
