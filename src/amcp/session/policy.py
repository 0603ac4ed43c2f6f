"""Access policy: which project scopes a peer may read and write (PROFILE §4).

File format (TOML, or the same structure as JSON)::

    [default]                  # optional; applies to every peer, default: nothing
    read = []
    write = []

    [[peer]]
    name = "laptop"            # free text, for logs
    public_key = "base64url Ed25519 key, as in the peer's hello"
    read = ["*"]
    write = ["team:*", "amcp"]

    [[peer]]
    name = "ci"
    bearer_sha256 = "hex sha256 of the token"   # or: bearer = "the token itself"
    read = ["team:backend"]

A peer matches an entry by public key or by bearer token; the scopes of every matching
entry (and of ``[default]``) are added up. Patterns: ``*`` is every scope, ``prefix*`` every
scope starting with ``prefix`` (``team:*``), anything else an exact scope name. Nothing
matches: ForbiddenError (403).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from amcp.errors import ConfigError, ForbiddenError
from amcp.session.identity import b64url_decode


class Mode(StrEnum):
    READ = "read"
    WRITE = "write"


@dataclass(frozen=True, slots=True)
class Principal:
    """Who the peer is, as far as policy is concerned (from its hello)."""

    public_key: bytes | None = None
    bearer: str | None = None


def scope_matches(pattern: str, scope: str) -> bool:
    if pattern == "*":
        return True
    if pattern.endswith("*"):
        return scope.startswith(pattern[:-1])
    return pattern == scope


@dataclass(frozen=True, slots=True)
class Grant:
    name: str
    read: tuple[str, ...] = ()
    write: tuple[str, ...] = ()
    public_key: bytes | None = None
    bearer_sha256: bytes | None = None

    def applies_to(self, who: Principal) -> bool:
        # Public keys are not secret, but compare_digest costs nothing here.
        if (
            self.public_key is not None
            and who.public_key is not None
            and hmac.compare_digest(self.public_key, who.public_key)
        ):
            return True
        if self.bearer_sha256 is not None and who.bearer is not None:
            digest = hashlib.sha256(who.bearer.encode("utf-8")).digest()
            if hmac.compare_digest(self.bearer_sha256, digest):
                return True
        return False

    def patterns(self, mode: Mode) -> tuple[str, ...]:
        return self.read if mode is Mode.READ else self.write


@dataclass(frozen=True, slots=True)
class AccessPolicy:
    grants: tuple[Grant, ...] = ()
    default: Grant = Grant("default")

    def patterns(self, who: Principal, mode: Mode) -> tuple[str, ...]:
        out = list(self.default.patterns(mode))
        for grant in self.grants:
            if grant.applies_to(who):
                out.extend(grant.patterns(mode))
        return tuple(out)

    def allowed(self, who: Principal, scope: str, mode: Mode) -> bool:
        return any(scope_matches(p, scope) for p in self.patterns(who, mode))

    def reads_any(self, who: Principal, scopes: Iterable[str]) -> bool:
        """A record is visible to ``who`` if any one of its scopes is readable: the rule the
        node, the HTTP API and the inspector all apply."""
        return any(self.allowed(who, s, Mode.READ) for s in scopes)

    def check(self, who: Principal, scope: str, mode: Mode) -> None:
        """Raise ForbiddenError (403) unless ``who`` may ``mode`` the project ``scope``."""
        if not self.allowed(who, scope, mode):
            raise ForbiddenError(f"{mode} access to scope {scope!r} is not allowed")

    def check_all(self, who: Principal, scopes: Iterable[str], mode: Mode) -> None:
        for scope in scopes:
            self.check(who, scope, mode)

    # ------------------------------------------------------------------------ loading

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> AccessPolicy:
        unknown = set(data) - {"default", "peer"}
        if unknown:
            raise ConfigError(f"access policy: unknown keys {sorted(unknown)}")
        default = _grant(data.get("default") or {}, "default", need_identity=False)
        peers = data.get("peer") or []
        if not isinstance(peers, list):
            raise ConfigError("access policy: 'peer' must be a list of tables")
        grants = tuple(_grant(p, f"peer[{i}]", need_identity=True) for i, p in enumerate(peers))
        return cls(grants, default)

    @classmethod
    def load(cls, path: Path) -> AccessPolicy:
        """Read a ``.toml`` or ``.json`` policy file."""
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot read access policy {path}: {exc.strerror}") from exc
        try:
            data = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
        except (json.JSONDecodeError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"access policy {path}: {exc}") from exc
        if not isinstance(data, dict):
            raise ConfigError(f"access policy {path}: top level must be a table")
        return cls.from_mapping(data)


def _scopes(entry: Mapping[str, Any], key: str, where: str) -> tuple[str, ...]:
    value = entry.get(key, [])
    if not isinstance(value, Sequence) or isinstance(value, str):
        raise ConfigError(f"access policy {where}.{key}: must be a list of scope patterns")
    if not all(isinstance(v, str) and v for v in value):
        raise ConfigError(f"access policy {where}.{key}: patterns must be non-empty strings")
    return tuple(value)


def _grant(entry: Any, where: str, *, need_identity: bool) -> Grant:
    if not isinstance(entry, Mapping):
        raise ConfigError(f"access policy {where}: must be a table")
    allowed = {"name", "read", "write", "public_key", "bearer", "bearer_sha256"}
    unknown = set(entry) - allowed
    if unknown:
        raise ConfigError(f"access policy {where}: unknown keys {sorted(unknown)}")
    public_key = None
    if "public_key" in entry:
        try:
            public_key = b64url_decode(entry["public_key"])
        except ValueError:
            raise ConfigError(f"access policy {where}.public_key: not base64url") from None
        if len(public_key) != 32:
            raise ConfigError(f"access policy {where}.public_key: not an Ed25519 key")
    bearer_sha256 = _bearer_digest(entry, where)
    if need_identity and public_key is None and bearer_sha256 is None:
        raise ConfigError(f"access policy {where}: needs public_key, bearer or bearer_sha256")
    name = entry.get("name", where)
    if not isinstance(name, str):
        raise ConfigError(f"access policy {where}.name: must be a string")
    return Grant(
        name=name,
        read=_scopes(entry, "read", where),
        write=_scopes(entry, "write", where),
        public_key=public_key,
        bearer_sha256=bearer_sha256,
    )


def _bearer_digest(entry: Mapping[str, Any], where: str) -> bytes | None:
    """Tokens are kept only as SHA-256 digests, whichever way the file gives them."""
    if "bearer" in entry and "bearer_sha256" in entry:
        raise ConfigError(f"access policy {where}: give bearer or bearer_sha256, not both")
    if "bearer" in entry:
        if not isinstance(entry["bearer"], str) or not entry["bearer"]:
            raise ConfigError(f"access policy {where}.bearer: must be a non-empty string")
        return hashlib.sha256(entry["bearer"].encode("utf-8")).digest()
    if "bearer_sha256" not in entry:
        return None
    try:
        digest = bytes.fromhex(entry["bearer_sha256"])
    except (TypeError, ValueError):
        raise ConfigError(f"access policy {where}.bearer_sha256: not hex") from None
    if len(digest) != 32:
        raise ConfigError(f"access policy {where}.bearer_sha256: not a SHA-256 digest")
    return digest
