"""Knowledge ids people can type: a unique prefix stands for the whole id, as in git.

One function, used by every interface that takes an id from a person or an agent (the CLI,
the HTTP API, the MCP tools), so "K-3f2a", "3f2a", "K-3F2A" and a copied "K-3f2a…" all mean
the same record everywhere, and an ambiguous prefix is refused the same way everywhere.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from amcp.errors import AmbiguousIdError, NotFoundError, ValidationError

if TYPE_CHECKING:
    from amcp.store.base import Store

ID_HEX = 64  # "K-" + the SHA-256 of the record's identity (amcp.amf.ids)
MIN_PREFIX = 4  # as git: fewer hex digits name too many records to be a useful reference
SHORT = 12  # what listings print: 48 bits, unique in any store a person reads
_CANDIDATES = 10  # an ambiguous prefix lists at most this many
_SCAN = 200  # ids read for one prefix before the caller's visibility filter
_HEX = re.compile(r"[0-9a-f]+")


def short_id(knowledge_id: str) -> str:
    """The id as listings print it: a prefix ``resolve_ref`` takes back."""
    return knowledge_id[: 2 + SHORT]


def _normalise(ref: str) -> str:
    text = ref.strip().rstrip("…").rstrip(".").strip()
    hexpart = text[2:] if text[:2] in ("K-", "k-") else text
    hexpart = hexpart.lower()
    if not hexpart or not _HEX.fullmatch(hexpart) or len(hexpart) > ID_HEX:
        raise NotFoundError(f"no record {ref!r}: an id is K- and up to 64 hex digits")
    if len(hexpart) < MIN_PREFIX:
        raise ValidationError(
            "id", f"{ref!r} is too short; give at least {MIN_PREFIX} hex digits of the id"
        )
    return "K-" + hexpart


def resolve_ref(
    store: Store, ref: str, *, visible: Callable[[str], bool] | None = None
) -> str:
    """The one knowledge id ``ref`` (a whole id or a unique prefix of one) names.

    ``visible`` (an id -> may-the-caller-see-it test) keeps records the caller may not read
    out of both the match and the candidates an ambiguous prefix lists, so a prefix never
    reveals that a hidden record exists. Raises NotFoundError when nothing matches and
    AmbiguousIdError (with the candidates) when several do.
    """
    if not isinstance(ref, str):
        raise ValidationError("id", "must be text")
    prefix = _normalise(ref)
    found = store.ids_with_prefix(prefix, _SCAN)
    if visible is not None:
        found = [kid for kid in found if visible(kid)]
    if prefix in found or (len(prefix) == 2 + ID_HEX and not found):
        # a whole id: exact (an unknown whole id is the caller's 404 to raise, with context)
        return prefix
    if not found:
        raise NotFoundError(f"no record starts with {prefix}")
    if len(found) == 1:
        return found[0]
    shown = tuple(found[:_CANDIDATES])
    more = f" and {len(found) - len(shown)} more" if len(found) > len(shown) else ""
    raise AmbiguousIdError(
        f"{prefix} is ambiguous: it starts {len(found)} records ({', '.join(map(short_id, shown))}"
        f"{more}); type more of the id",
        shown,
    )


__all__ = ["MIN_PREFIX", "resolve_ref", "short_id"]
