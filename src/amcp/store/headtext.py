"""The signed change-log head as stored (``store_meta.chain_head``), and its MAC.

Stdlib only, because the hooks' fast reader checks the head on every prompt: loading the
node's Ed25519 key through ``cryptography`` costs ~95 ms there, more than a hook may spend
in all. So the head carries two authenticators over the same message: the Ed25519
signature (``chain.sign_head``; what ``Memory``, the node and replication check) and an
HMAC-SHA256 under a sub-key of the data key (what the fast reader checks). Both keys sit in
the store's ``keys/`` directory, so to an attacker who holds the store's files and not its
keys, either is as hard to forge as the other.

The text is space-separated: ``seq hash signature rows digest census [mac]``; a head written
before the MAC existed has no seventh field (the fast reader then hands the open to
``Memory``, which checks the signature; the next write adds the MAC).
"""

from __future__ import annotations

import hashlib
import hmac

MAC_PURPOSE = "head-mac"  # subkeys.derive_key label of the MAC key


class HeadText:
    """The fields of a stored head (nothing verified yet). A plain class: a dataclass or
    ``typing.NamedTuple`` would cost the hook process more to import than this module."""

    __slots__ = ("census", "digest", "hash", "mac", "rows", "seq", "signature")

    def __init__(self, seq: int, hash_: str, signature: str, rows: int, digest: int,
                 census: tuple[tuple[str, int], ...], mac: str | None = None) -> None:
        self.seq, self.hash, self.signature = seq, hash_, signature
        self.rows, self.digest, self.census, self.mac = rows, digest, census, mac


def census_text(census: tuple[tuple[str, int], ...]) -> str:
    return ",".join(f"{k}={v}" for k, v in census) or "-"


def message(store_id: str, seq: int, hash_: str, rows: int, digest: int,
            census: tuple[tuple[str, int], ...]) -> bytes:
    """What the signature and the MAC cover."""
    return (
        f"amcp-chain-head/3:{store_id}:{seq}:{hash_}:{rows}:{digest:064x}"
        f":{census_text(census)}"
    ).encode()


def mac_of(key: bytes, text: HeadText, store_id: str) -> str:
    msg = message(store_id, text.seq, text.hash, text.rows, text.digest, text.census)
    return hmac.new(key, msg, hashlib.sha256).hexdigest()


def format_head(text: HeadText) -> str:
    fields = [str(text.seq), text.hash, text.signature, str(text.rows),
              f"{text.digest:064x}", census_text(text.census)]
    if text.mac is not None:
        fields.append(text.mac)
    return " ".join(fields)


def parse_head(stored: str) -> HeadText:
    """The fields of a ``chain_head`` value; ValueError if it is malformed."""
    parts = stored.split()
    if len(parts) not in (6, 7):
        raise ValueError("the signed change-log head is malformed")
    seq, hash_, sig, rows, digest, census = parts[:6]
    try:
        pairs = [] if census == "-" else [p.split("=", 1) for p in census.split(",")]
        counts = tuple((k, int(v)) for k, v in pairs)
        return HeadText(int(seq), hash_, sig, int(rows), int(digest, 16), counts,
                        parts[6] if len(parts) == 7 else None)
    except ValueError as exc:
        raise ValueError("the signed change-log head is malformed") from exc


def mac_verifies(key: bytes, text: HeadText, store_id: str) -> bool:
    """The head carries a MAC and it is right (False for a head written before MACs)."""
    return text.mac is not None and hmac.compare_digest(text.mac, mac_of(key, text, store_id))


__all__ = ["MAC_PURPOSE", "HeadText", "census_text", "format_head", "mac_of", "mac_verifies",
           "message", "parse_head"]
