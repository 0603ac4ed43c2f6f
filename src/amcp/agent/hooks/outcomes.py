"""Outcomes without a human: the agent's ``## Recall`` manifest and ``Outcome:`` markers.

RxAi AMP §15.2 asks the agent to end a session with a manifest of what it was shown and
what it relied on::

    ## Recall
    - **Surfaced:** K-1a2b3c4d5e6f (used → success), K-2b3c4d5e6f7a (unused),
      K-3c4d5e6f7a8b (used → failure)
    - **Capture:** stored K-… | declined — "dependency bump only"

and §7 an ``Outcome: success|failure|neutral`` marker. The stop hook reads both from the
agent's last message and records one outcome round per result for the memories actually
used (``Memory.outcome``: +0.30 / −0.20); an ``(unused)`` memory gets nothing (AMP §15.1:
silence means "not exercised"). A marker with ids on its line (``Outcome: success
K-1a2b…``) applies to those; a bare marker applies to the manifest's ``(used)`` entries that
carry no result of their own. Refs are matched against the ids this session was shown (the
ledger), so an agent cannot credit a memory it never saw; an unknown result word is
reported and nothing is recorded for it.

Lean like the rest of the hook path: only ``re`` at import.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from amcp.agent.hooks.hookio import HookConfig
    from amcp.agent.hooks.ledger import SessionLedger

RESULTS = ("success", "failure", "neutral")
_SECTION = r"(?im)^#{2,3}\s*recall\s*$"
_HEADING = r"(?m)^#{1,6}\s"
_REF = r"K-[0-9a-f]{6,64}"
# "K-… (used → success)", "K-… (used -> failure)", "K-… (used)", "K-… (unused)"
_ENTRY = r"(K-[0-9a-f]{6,64})\s*\(\s*(unused|used)\s*(?:(?:→|->|=>|:)\s*([A-Za-z]+))?\s*\)"
_MARKER = r"(?im)^[\s>*-]*(?:\*\*)?outcome(?:\*\*)?\s*:\s*(?:\*\*)?\s*([A-Za-z]+)\b(.*)$"


class OutcomePlan(NamedTuple):
    """What the message asks to record: result → refs (as written), and what was refused."""

    rounds: dict[str, list[str]]
    unused: list[str]
    problems: list[str]

    @property
    def empty(self) -> bool:
        return not any(self.rounds.values())


def manifest_of(text: str) -> str:
    """The ``## Recall`` section's text ('' when there is none)."""
    m = re.search(_SECTION, text)
    if m is None:
        return ""
    rest = text[m.end():]
    nxt = re.search(_HEADING, rest)
    return rest[: nxt.start()] if nxt else rest


def plan(text: str) -> OutcomePlan:
    """Parse a message's manifest and markers (module docstring)."""
    rounds: dict[str, list[str]] = {r: [] for r in RESULTS}
    problems: list[str] = []
    unused: list[str] = []
    pending: list[str] = []  # (used) without a result: a bare marker decides
    for ref, use, result in re.findall(_ENTRY, manifest_of(text)):
        if use == "unused":
            unused.append(ref)
        elif not result:
            pending.append(ref)
        elif result.lower() in RESULTS:
            rounds[result.lower()].append(ref)
        else:
            problems.append(f"{ref}: unknown outcome {result!r} (use success, failure or "
                            "neutral); nothing recorded for it")
    for result, tail in re.findall(_MARKER, text):
        word = result.lower()
        if word not in RESULTS:
            problems.append(f"unknown marker 'Outcome: {result}' (use success, failure or "
                            "neutral); nothing recorded for it")
            continue
        refs = re.findall(_REF, tail)
        rounds[word].extend(refs or pending)
        if not refs:
            pending = []
    return OutcomePlan({k: _unique(v) for k, v in rounds.items()}, _unique(unused), problems)


def resolve(refs: Iterable[str], shown: Sequence[str]) -> tuple[list[str], list[str]]:
    """(full ids, problems): each ref must be a prefix of exactly one id shown this session."""
    found: list[str] = []
    problems: list[str] = []
    for ref in refs:
        hits = [kid for kid in shown if kid.startswith(ref)]
        if len(hits) == 1:
            found.append(hits[0])
        elif hits:
            problems.append(f"{ref} names several memories; give more of the id")
        else:
            problems.append(f"{ref} was not shown in this session; no outcome recorded")
    return _unique(found), problems


def credit(cfg: HookConfig, ledger: SessionLedger, text: str
           ) -> tuple[SessionLedger, list[str]]:
    """Record the outcome rounds ``text`` asks for; (the updated ledger, notes for the user).

    Written to the store file (``Memory.outcome``), node or no node: weights are node-local
    learned state outside the change log, and a node sees them at its next read. Each id is
    credited at most once per session (``ledger.credited``), so a repeated Stop with the
    same manifest does not count twice.
    """
    if not text:
        return ledger, []
    wanted = plan(text)
    notes = list(wanted.problems)
    if wanted.empty:
        return ledger, notes
    todo: dict[str, list[str]] = {}
    for result, refs in wanted.rounds.items():
        ids, problems = resolve(refs, ledger.shown)
        notes += problems
        fresh = [kid for kid in ids if kid not in ledger.credited]
        if fresh:
            todo[result] = fresh
    if not todo:
        return ledger, notes
    from amcp.agent.hooks.fastpath import LocalBackend
    from amcp.errors import AmcpError

    backend = LocalBackend.open(cfg.store, lock_timeout=cfg.lock_timeout, verify=False)
    done: list[str] = []
    try:
        for result, ids in todo.items():
            for kid in ids:
                try:
                    backend.memory.outcome([kid], result)
                except AmcpError as exc:  # invalidated or purged since: say so, go on
                    notes.append(f"{kid[:14]}: {exc}")
                    continue
                done.append(kid)
                notes.append(f"outcome {result} recorded for {kid[:14]}")
    finally:
        backend.close()
    return ledger._replace(credited=(*ledger.credited, *done)[-MAX_CREDITED:]), notes


MAX_CREDITED = 1000


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


__all__ = ["RESULTS", "OutcomePlan", "credit", "manifest_of", "plan", "resolve"]
