"""Who is calling the HTTP API and which project scopes they may read and write.

Bearer tokens are mapped to scopes by the same ``AccessPolicy`` the AMCP node uses (a
``bearer``/``bearer_sha256`` entry per token), so one policy file serves both. ``tokens``
given to ``create_app`` as ``{token: [scope patterns]}`` become such entries.

Without a policy the API is a single-user local service: every caller may do everything.
With one, a request without a token, or with a token no entry names, is 401; a token used
outside its scopes is 403, checked before anything is stored.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from amcp.errors import ForbiddenError, UnauthorizedError
from amcp.session.policy import AccessPolicy, Grant, Mode, Principal


def build_policy(
    policy: AccessPolicy | None, tokens: Mapping[str, Sequence[str]] | None
) -> AccessPolicy | None:
    """Merge ``tokens`` ({token: scope patterns}, read and write) into ``policy``."""
    if not tokens:
        return policy
    grants = tuple(
        Grant(
            name=f"token[{i}]",
            read=tuple(scopes),
            write=tuple(scopes),
            bearer_sha256=hashlib.sha256(token.encode("utf-8")).digest(),
        )
        for i, (token, scopes) in enumerate(tokens.items())
    )
    base = policy or AccessPolicy()
    return AccessPolicy((*base.grants, *grants), base.default)


def bearer_of(header: str | None) -> str | None:
    if not header:
        return None
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        return None
    return value.strip()


def authenticate(policy: AccessPolicy | None, authorization: str | None) -> Caller:
    """The caller of one request, or UnauthorizedError (401) when auth is configured."""
    if policy is None:
        return Caller(None, Principal())
    token = bearer_of(authorization)
    if token is None:
        raise UnauthorizedError("a bearer token is required (Authorization: Bearer <token>)")
    who = Principal(bearer=token)
    if not any(g.applies_to(who) for g in policy.grants):
        raise UnauthorizedError("unknown bearer token")
    return Caller(policy, who)


@dataclass(frozen=True, slots=True)
class Caller:
    policy: AccessPolicy | None
    who: Principal

    def readable(self, scopes: Iterable[str]) -> bool:
        """A record is visible if any of its scopes is readable (as on the node)."""
        return self.policy is None or self.policy.reads_any(self.who, scopes)

    def check_read(self, scopes: Iterable[str]) -> None:
        for scope in scopes:
            if not self.readable([scope]):
                raise ForbiddenError(f"read access to scope {scope!r} is not allowed")

    def check_write(self, scopes: Iterable[str]) -> None:
        """Every scope of a record written must be writable."""
        if self.policy is not None:
            self.policy.check_all(self.who, scopes, Mode.WRITE)

    def check_everything(self, mode: Mode, what: str) -> None:
        """Operations over records that cannot be listed in advance need the '*' scope."""
        if self.policy is not None and not self.policy.allowed(self.who, "*", mode):
            raise ForbiddenError(f"{what} needs {mode} access to every scope ('*')")

    def patterns(self, mode: Mode) -> list[str] | None:
        """Scope patterns for planners; None when the caller may see everything."""
        if self.policy is None:
            return None
        found = list(self.policy.patterns(self.who, mode))
        return None if "*" in found else found

    def exact_read_scopes(self) -> list[str] | None:
        """Read patterns usable as an exact store filter, or None (then results are
        filtered after the search instead)."""
        found = self.patterns(Mode.READ)
        if found is None or any(p.endswith("*") for p in found):
            return None
        return found


__all__ = ["Caller", "authenticate", "bearer_of", "build_policy"]
