"""Canonical MessagePack with pre-encoded parts, for the pack digest.

A pack holds dozens of AMF records whose canonical bytes are already cached. MessagePack is
compositional (a map is its header followed by its encoded keys and values), so the pack's
canonical bytes can be assembled from those parts instead of re-normalising every record.
``packb_parts(x)`` equals ``amcp.amf.canonical_packb(x)`` with every ``Raw(b)`` replaced by
the value ``b`` encodes; tests/cse check that equality.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import msgpack

from amcp.amf.canonical import canonical_packb


@dataclass(frozen=True, slots=True)
class Raw:
    data: bytes  # canonical MessagePack of some value


def _enc(value: Any, out: list[bytes], packer: msgpack.Packer) -> None:
    if value is None or isinstance(value, str | int | float | bytes):
        # Scalars: the packer's options are canonical_packb's (shortest ints, float64).
        out.append(packer.pack(value))
    elif isinstance(value, Raw):
        out.append(value.data)
    elif isinstance(value, Mapping):
        items = sorted(
            ((k, v) for k, v in value.items() if v is not None), key=lambda kv: kv[0].encode()
        )
        out.append(packer.pack_map_header(len(items)))
        for key, item in items:
            out.append(packer.pack(key))
            _enc(item, out, packer)
    elif isinstance(value, Sequence) and not isinstance(value, str | bytes):
        out.append(packer.pack_array_header(len(value)))
        for item in value:
            _enc(item, out, packer)
    else:
        out.append(canonical_packb(value))


def packb_parts(value: Any) -> bytes:
    packer = msgpack.Packer(use_bin_type=True, use_single_float=False, autoreset=True)
    out: list[bytes] = []
    _enc(value, out, packer)
    return b"".join(out)


__all__ = ["Raw", "packb_parts"]
