"""Canonical MessagePack (PROFILE §6).

Maps sorted by the UTF-8 bytes of their keys, null-valued keys omitted, integers in their
shortest form (msgpack does that already), every float as float64, strings as str, arrays in
order. Two nodes that agree on a value therefore agree on its bytes, which is what makes
knowledge ids and checksums portable.

Two encoders give those bytes. A value made only of the plain built-in types (dict with str
keys and no null value, list, tuple, str, int, float, bool, bytes) — every record section,
change detail and hash input the node builds — is packed by ormsgpack, which sorts map keys
in C (``_plain`` checks the shape without copying anything). Anything else — null map values
to drop, other mappings and sequences to convert, a type canonical encoding refuses — takes
the walk (``normalised``) and msgpack. ``tests/amf/test_canonical_fast.py`` checks the two
agree byte for byte on generated values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import msgpack
import ormsgpack

from amcp.errors import ValidationError

if TYPE_CHECKING:
    from typing import Any


def _normalise(value: Any, path: str) -> Any:
    if value is None or isinstance(value, (bool, int, str, bytes)):
        return value
    if isinstance(value, float):
        return value
    if isinstance(value, Mapping):
        items: list[tuple[str, Any]] = []
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValidationError(path or "<root>", f"map key {key!r} is not a string")
            if item is None:
                continue
            items.append((key, _normalise(item, f"{path}.{key}" if path else key)))
        items.sort(key=lambda kv: kv[0].encode("utf-8"))
        return dict(items)
    if isinstance(value, Sequence):
        return [_normalise(v, f"{path}[{i}]") for i, v in enumerate(value)]
    raise ValidationError(path or "<root>", f"{type(value).__name__} cannot be encoded canonically")


class _Refused(Exception):
    """Raised by ``_fast`` where ``_normalise`` raises; ``_normalise`` then names the path."""


_SCALARS = (bool, int, str, bytes, float)


def _key(kv: tuple[str, Any]) -> str:
    return kv[0]


def _fast(value: Any) -> Any:
    """``_normalise`` without building a path string per item (the write path's hot spot:
    several packs per stored record). Sorting by ``str`` is sorting by UTF-8 bytes: both
    order by code point (an unencodable key fails in msgpack just as in ``.encode``)."""
    if value is None or isinstance(value, _SCALARS):
        return value
    if isinstance(value, Mapping):
        items: list[tuple[str, Any]] = []
        for key, item in value.items():
            if not isinstance(key, str):
                raise _Refused
            if item is None:
                continue
            items.append((key, item if type(item) is str else _fast(item)))
        items.sort(key=_key)
        return dict(items)
    if isinstance(value, Sequence):
        return [_fast(v) for v in value]
    raise _Refused


def normalised(value: Any) -> Any:
    """``value`` in canonical form: maps key-sorted without null values, sequences as lists.
    Every part of a normalised value is normalised, so parts of it can be packed again
    (``pack_normalised``) without another walk: what verifying a record's id, checksum and
    envelope from one walk of it relies on."""
    try:
        return _fast(value)
    except _Refused:
        return _normalise(value, "")  # raises the ValidationError naming the field


def pack_normalised(normal: Any) -> bytes:
    """The canonical bytes of a value ``normalised`` returned (or a map of such parts whose
    keys the caller gives in sorted order)."""
    # use_single_float=False keeps every float as float64; dicts keep insertion order, which
    # the normalisation made the sorted order.
    packed: bytes = msgpack.packb(
        normal, use_bin_type=True, use_single_float=False, strict_types=False
    )
    return packed


# Sorted keys; every type ormsgpack would encode its own way (datetimes, enums, dataclasses,
# UUIDs, subclasses of the built-ins, ints past 64 bits) refused, so the walk decides.
_SORTED = (
    ormsgpack.OPT_SORT_KEYS | ormsgpack.OPT_PASSTHROUGH_BIG_INT
    | ormsgpack.OPT_PASSTHROUGH_DATACLASS | ormsgpack.OPT_PASSTHROUGH_DATETIME
    | ormsgpack.OPT_PASSTHROUGH_ENUM | ormsgpack.OPT_PASSTHROUGH_SUBCLASS
    | ormsgpack.OPT_PASSTHROUGH_UUID
)
_ATOMS = frozenset({str, int, float, bool, bytes})


def _plain(value: Any) -> bool:
    """Whether ``value`` is already canonical but for the order of its map keys: built of
    exactly the plain types, str keys, no null map value. Reads, never copies."""
    kind = type(value)
    if kind in _ATOMS:
        return True
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str or item is None:
                return False
            if type(item) not in _ATOMS and not _plain(item):
                return False
        return True
    if kind is list or kind is tuple:
        return all(
            item is None or type(item) in _ATOMS or _plain(item) for item in value
        )
    return value is None


def plain(value: Any) -> Any:
    """``value`` in a form ``pack_plain`` encodes canonically: itself when it is plain
    (``_plain``: one read-only walk), else ``normalised(value)``. Every part of the result
    is in that form too, so parts of it can be packed without another walk."""
    return value if _plain(value) else normalised(value)


def pack_plain(value: Any) -> bytes:
    """The canonical bytes of a value ``plain`` returned (or a dict of such parts)."""
    try:
        packed: bytes = ormsgpack.packb(value, option=_SORTED)
        return packed
    except TypeError:
        # A str subclass kept by the walk, a lone surrogate, nesting past ormsgpack's
        # limit: msgpack encodes it (or raises the error it always raised).
        return pack_normalised(normalised(value))


def canonical_packb(value: Any) -> bytes:
    """Encode ``value`` as canonical MessagePack bytes."""
    return pack_plain(plain(value))
