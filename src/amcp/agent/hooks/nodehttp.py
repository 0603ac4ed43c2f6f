"""A hook's stateless channel to a running node: its HTTP API's hook routes.

One short HTTP/1.1 request per call over the stdlib's ``http.client`` (one connection,
closed after the answer): no asyncio, no AMCP session, no cryptography. Every failure —
refused, timed out, a wrong token, a malformed answer — raises ``NodeHttpError`` and the
caller reads the store file instead (``claude_code.with_backend``). The routes it calls
are in ``node_routes``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from amcp.agent.hooks.fastpath import MemoryLine, NewMemory, _norm
from amcp.errors import AmcpError

if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from amcp.agent.hooks.runtime import NodeRuntime

MAX_RESPONSE = 8 * 1024 * 1024
TOKEN_HEADER = "X-AMCP-Hook-Token"  # noqa: S105 - a header name, not a secret
PREFIX = "/v1/hooks/"


class NodeHttpError(AmcpError):
    """The node did not answer a hook request usably (the hook falls back to the file)."""


def request(addr: tuple[str, int], path: str, body: dict[str, Any], token: str, *,
            connect_timeout: float, read_timeout: float) -> Any:
    """POST ``body`` as JSON to ``addr``; the decoded JSON answer of a 200."""
    # Imported here, not at module level: only a hook that found a running node pays for
    # http.client (with its email and ssl imports, ~20-35 ms; docs/hooks.md).
    import http.client

    conn = http.client.HTTPConnection(addr[0], addr[1], timeout=connect_timeout)
    try:
        conn.connect()  # every address the name resolves to, within connect_timeout
        assert conn.sock is not None
        conn.sock.settimeout(read_timeout)
        conn.request("POST", path, body=json.dumps(body).encode("utf-8"),
                     headers={"Content-Type": "application/json", TOKEN_HEADER: token})
        answer = conn.getresponse()
        if answer.status != 200:
            raise NodeHttpError(f"node answered {answer.status}")
        data = answer.read(MAX_RESPONSE + 1)
    except (OSError, http.client.HTTPException) as exc:  # refused, reset, timed out, not HTTP
        raise NodeHttpError(f"node unreachable: {exc!r}") from None
    finally:
        conn.close()
    if len(data) > MAX_RESPONSE:
        raise NodeHttpError("node answer too large")
    try:
        return json.loads(data)
    except (ValueError, RecursionError):
        raise NodeHttpError("node answer is not JSON") from None


def _lines(value: Any) -> list[MemoryLine]:
    if not isinstance(value, list):
        raise NodeHttpError("node answer has no lines")
    out = []
    for row in value:
        # A 7th column, the firewall's label, is sent by nodes that have it.
        if (not isinstance(row, list) or len(row) not in (6, 7) or not isinstance(row[0], str)
                or not isinstance(row[1], str) or not isinstance(row[2], str)
                or not isinstance(row[3], int | float) or not isinstance(row[4], str)
                or not (row[5] is None or isinstance(row[5], str))
                or not isinstance(row[6] if len(row) == 7 else "", str)):
            raise NodeHttpError("malformed memory line in node answer")
        label = row[6] if len(row) == 7 else ""
        out.append(MemoryLine(row[0], row[1], row[2], float(row[3]), row[4], row[5], label))
    return out


class HttpBackend:
    """``Backend`` over the node's hook routes: the node's recall (hybrid, model warm in the
    node), its pointer tier, and writes signed by the node."""

    name = "http"

    def __init__(self, runtime: NodeRuntime, *, connect_timeout: float = 0.05,
                 read_timeout: float = 1.0) -> None:
        self.runtime = runtime
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self._warnings: tuple[str, ...] = ()

    def call(self, op: str, body: dict[str, Any]) -> Any:
        answer = request(self.runtime.http, PREFIX + op, body, self.runtime.token,
                         connect_timeout=self.connect_timeout,
                         read_timeout=self.read_timeout)
        if not isinstance(answer, dict):
            raise NodeHttpError("node answer is not an object")
        said = answer.get("warnings")
        if isinstance(said, list):
            self._warnings = tuple(str(w) for w in said)
        return answer

    def warnings(self) -> tuple[str, ...]:
        """What the node said it left out of its last answers (quarantined records)."""
        return self._warnings

    def pointers(self, scopes: Sequence[str], limit: int,
                 kinds: Sequence[str] | None = None) -> list[MemoryLine]:
        if not scopes:
            return []
        return _lines(self.call("pointers", {"scopes": list(scopes), "limit": limit,
                                             "kinds": list(kinds) if kinds else None})
                      .get("lines"))

    def recall(self, query: str, scopes: Sequence[str], k: int) -> list[MemoryLine]:
        if not query.strip():
            return []
        return _lines(self.call("recall", {"query": query, "scopes": list(scopes), "k": k})
                      .get("lines"))

    def recall_relevant(self, query: str, scopes: Sequence[str], k: int) -> list[MemoryLine]:
        """``recall`` with the prompt hook's relevance test (``claude_code.relevant``) done
        by the node: the hook then need not import the tokenizer (~10 ms a process)."""
        if not query.strip():
            return []
        return _lines(self.call("recall", {"query": query, "scopes": list(scopes), "k": k,
                                           "relevant": True}).get("lines"))

    def session_start(self, scope: str | None, limit: int, kinds: Sequence[str]
                      ) -> tuple[tuple[str, ...], list[MemoryLine], list[MemoryLine]]:
        """What the session-start hook reads — user scopes, the project's pointer tier, the
        preferences in the user scopes — in one request instead of three."""
        answer = self.call("session-start", {"scope": scope, "limit": limit,
                                             "kinds": list(kinds)})
        scopes = answer.get("user_scopes")
        if not isinstance(scopes, list) or not all(isinstance(s, str) for s in scopes):
            raise NodeHttpError("malformed scopes in node answer")
        return tuple(scopes), _lines(answer.get("project")), _lines(answer.get("preferences"))

    def user_scopes(self) -> tuple[str, ...]:
        scopes = self.call("user-scopes", {}).get("scopes")
        if not isinstance(scopes, list) or not all(isinstance(s, str) for s in scopes):
            raise NodeHttpError("malformed scopes in node answer")
        return tuple(scopes)

    def remember(self, item: NewMemory) -> str:
        body = item._asdict()
        body["tags"] = list(item.tags)
        body["extensions"] = dict(item.extensions) if item.extensions else None
        kid = self.call("remember", body).get("knowledge_id")
        if not isinstance(kid, str):
            raise NodeHttpError("node answer has no knowledge_id")
        return kid

    def capture(self, prompt: str, session: str, project_scope: str | None,
                user_scope: str | None) -> list[str]:
        """The prompt's R1 captures, run and stored by the node (its capture rules are
        loaded once there); the notes the inline capture would add."""
        notes = self.call("capture", {"prompt": prompt, "session": session,
                                      "project_scope": project_scope,
                                      "user_scope": user_scope}).get("notes")
        if not isinstance(notes, list) or not all(isinstance(n, str) for n in notes):
            raise NodeHttpError("malformed capture answer")
        return notes

    def has_text(self, text: str, scopes: Sequence[str]) -> bool:
        want = _norm(text)
        return bool(want) and any(_norm(line.text) == want
                                  for line in self.recall(text, scopes, 5))

    def close(self) -> None:
        pass  # stateless: every call was its own connection


__all__ = ["TOKEN_HEADER", "HttpBackend", "NodeHttpError", "request"]
