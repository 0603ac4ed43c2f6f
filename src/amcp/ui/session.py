"""Who is looking at the inspector: browser sessions, their bearer token and CSRF token.

A browser cannot attach ``Authorization: Bearer`` to a link or a form, so a person signs in
once with the token they would give the API; the session keeps it server-side (the cookie
holds only a random session id) and every request re-authenticates it through the API's
own ``authenticate``: the same token sees exactly the same scopes in the UI as in the API.
Without a policy the node is local-only and open, as the API is, and no sign-in is asked.

Every session, signed in or not, carries a CSRF token that each form repeats in a hidden
field; a POST whose field does not match its session's token is refused (403). The cookie
is ``HttpOnly; SameSite=Strict``, so another site can neither read it nor send it along.
"""

from __future__ import annotations

import hmac
import secrets
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

from amcp.errors import ForbiddenError, UnauthorizedError
from amcp.session.policy import AccessPolicy, Principal
from amcp.web.access import Caller, authenticate

COOKIE = "amcp_ui"
MAX_SESSIONS = 1024  # one person opens a few; the oldest go first past this
TTL_S = 12 * 3600.0


@dataclass(frozen=True, slots=True)
class UiSession:
    sid: str
    csrf: str
    token: str | None  # the bearer token signed in with; None without a policy
    created: float


@dataclass(frozen=True, slots=True)
class Viewer:
    """The caller of one UI request: API scopes, plus the session that carries its CSRF."""

    caller: Caller
    session: UiSession
    fresh: bool  # the session was made by this request: the response sets the cookie

    @property
    def csrf(self) -> str:
        return self.session.csrf


class SessionStore:
    """Sessions in memory: a node restart signs everyone out, which is the safe direction."""

    def __init__(self, policy: AccessPolicy | None) -> None:
        self.policy = policy
        self._lock = threading.Lock()
        self._items: OrderedDict[str, UiSession] = OrderedDict()

    @property
    def needs_login(self) -> bool:
        return self.policy is not None

    def create(self, token: str | None) -> UiSession:
        made = UiSession(secrets.token_urlsafe(24), secrets.token_urlsafe(24), token, time.time())
        with self._lock:
            self._items[made.sid] = made
            while len(self._items) > MAX_SESSIONS:
                self._items.popitem(last=False)
        return made

    def get(self, sid: str | None) -> UiSession | None:
        if not sid:
            return None
        with self._lock:
            found = self._items.get(sid)
            if found is not None and time.time() - found.created > TTL_S:
                del self._items[sid]
                return None
        return found

    def drop(self, sid: str | None) -> None:
        with self._lock:
            self._items.pop(sid or "", None)

    def sign_in(self, token: str) -> UiSession:
        """A new session for ``token``, or UnauthorizedError if the policy does not know it."""
        authenticate(self.policy, f"Bearer {token.strip()}")
        return self.create(token.strip())

    def guest(self, sid: str | None) -> Viewer:
        """The viewer of the sign-in form: no scopes, but a session whose CSRF token the
        form carries (made now when the browser has none)."""
        found = self.get(sid)
        session = found or self.create(None)
        return Viewer(Caller(self.policy, Principal()), session, found is None)

    def viewer(self, sid: str | None) -> Viewer:
        """The viewer of a request with session cookie ``sid``. Without a policy a missing
        session is made on the spot; with one, a missing, expired or no-longer-valid session
        is UnauthorizedError (the pages then answer with the sign-in form)."""
        found = self.get(sid)
        if self.policy is None:
            if found is None:
                return Viewer(authenticate(None, None), self.create(None), True)
            return Viewer(authenticate(None, None), found, False)
        if found is None or found.token is None:
            raise UnauthorizedError("sign in with a bearer token")
        try:
            who = authenticate(self.policy, f"Bearer {found.token}")
        except UnauthorizedError:
            self.drop(found.sid)  # revoked since it signed in
            raise
        return Viewer(who, found, False)


def check_csrf(viewer: Viewer, sent: str | None) -> None:
    if not sent or not hmac.compare_digest(sent.encode(), viewer.csrf.encode()):
        raise ForbiddenError("the form's CSRF token is missing or stale; reload the page")


__all__ = ["COOKIE", "SessionStore", "UiSession", "Viewer", "check_csrf"]
