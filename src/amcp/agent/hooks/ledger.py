"""The session ledger: what a coding-agent session has already been shown and decided.

One small JSON file per session under the store directory (``<home>/ledger/<id>.json``).
Hooks are separate processes, so whatever must survive from one hook call to the next
(records already expanded, whether Stop has asked for a learning, the commits seen) lives
here. Writes are atomic (temp file + rename) so a killed hook never leaves half a file;
an unreadable file is treated as an empty ledger rather than breaking the agent.
"""

from __future__ import annotations

import json
import os
import re
import time
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:  # pathlib only for annotations: the hook path uses os.path strings
    from pathlib import Path
    from typing import Any, Literal

    StopOutcome = Literal["learned", "declined"]

MAX_SHOWN = 5000  # ids remembered per session; older ones may be shown again (bounded file)
MAX_COMMITS = 500
_SAFE_ID = re.compile(r"[A-Za-z0-9_.-]{1,128}")


def ledger_name(session_id: str) -> str:
    """A file name for ``session_id``: as-is when it is safe, else a hash (no path tricks)."""
    if _SAFE_ID.fullmatch(session_id) and session_id not in {".", ".."}:
        return session_id
    import hashlib  # only for unusual ids: most hooks never load it

    return "h-" + hashlib.sha256(session_id.encode("utf-8", "replace")).hexdigest()[:32]


class SessionLedger(NamedTuple):
    """Immutable; ``_replace`` makes the next version. A NamedTuple rather than a frozen
    dataclass: ``import dataclasses`` (it loads ``inspect``) costs a hook process ~10-20 ms,
    paid on every prompt."""

    session_id: str
    project_scope: str | None = None
    user_scopes: tuple[str, ...] = ()
    shown: tuple[str, ...] = ()  # knowledge ids already injected (pointer or summary)
    commits: tuple[str, ...] = ()  # commit hashes recorded as work boundaries
    stop_asked: bool = False
    stop_outcome: StopOutcome | None = None
    stop_detail: str | None = None  # the decline reason or the learning's knowledge id
    updated_at: float = 0.0
    credited: tuple[str, ...] = ()  # ids given an outcome from the agent's Recall manifest

    def with_shown(self, ids: list[str]) -> SessionLedger:
        fresh = [i for i in ids if i not in self.shown]
        return self._replace(shown=(*self.shown, *fresh)[-MAX_SHOWN:]) if fresh else self

    def with_commit(self, sha: str) -> SessionLedger:
        return self._replace(commits=(*self.commits, sha)[-MAX_COMMITS:])

    def to_dict(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "project_scope": self.project_scope,
            "user_scopes": list(self.user_scopes),
            "shown": list(self.shown),
            "commits": list(self.commits),
            "stop": {
                "asked": self.stop_asked,
                "outcome": self.stop_outcome,
                "detail": self.stop_detail,
            },
            "updated_at": self.updated_at,
            "credited": list(self.credited),
        }

    @classmethod
    def from_dict(cls, session_id: str, d: Any) -> SessionLedger:
        if not isinstance(d, dict):
            return cls(session_id)
        raw_stop = d.get("stop")
        stop: dict[str, Any] = raw_stop if isinstance(raw_stop, dict) else {}
        outcome = stop.get("outcome")
        return cls(
            session_id=session_id,
            project_scope=_str_or_none(d.get("project_scope")),
            user_scopes=_strs(d.get("user_scopes")),
            shown=_strs(d.get("shown"))[-MAX_SHOWN:],
            commits=_strs(d.get("commits"))[-MAX_COMMITS:],
            stop_asked=bool(stop.get("asked")),
            stop_outcome=outcome if outcome in ("learned", "declined") else None,
            stop_detail=_str_or_none(stop.get("detail")),
            updated_at=float(d.get("updated_at") or 0.0),
            credited=_strs(d.get("credited")),
        )


class LedgerStore:
    """Loads and saves ledgers under ``directory`` (created on first save, not before)."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = os.fspath(directory)

    def path_for(self, session_id: str) -> Path:
        from pathlib import Path

        return Path(self.file_for(session_id))

    def file_for(self, session_id: str) -> str:
        """``path_for`` as a string, without ``pathlib`` (the hook path)."""
        return os.path.join(self.directory, f"{ledger_name(session_id)}.json")

    def load(self, session_id: str) -> SessionLedger:
        try:
            with open(self.file_for(session_id), encoding="utf-8") as fh:
                raw = fh.read()
            return SessionLedger.from_dict(session_id, json.loads(raw))
        except (OSError, ValueError):
            return SessionLedger(session_id)

    def save(self, ledger: SessionLedger) -> None:
        os.makedirs(self.directory, exist_ok=True)
        target = self.file_for(ledger.session_id)
        data = json.dumps(ledger._replace(updated_at=time.time()).to_dict(), ensure_ascii=False)
        # A temp name unique to this process and moment, created exclusively (what
        # tempfile.mkstemp does, without importing tempfile: ~10 ms a hook process).
        tmp = os.path.join(self.directory, f".ledger-{os.getpid()}-{time.monotonic_ns()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(data)
            os.replace(tmp, target)
        except BaseException:
            try:  # noqa: SIM105 - contextlib would be one more import on the hook path
                os.unlink(tmp)
            except FileNotFoundError:
                pass
            raise


def _strs(value: Any) -> tuple[str, ...]:
    return tuple(v for v in value if isinstance(v, str)) if isinstance(value, list) else ()


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


__all__ = ["LedgerStore", "SessionLedger", "ledger_name"]
