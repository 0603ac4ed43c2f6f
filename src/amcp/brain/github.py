"""The GitHub-issues backend: each memory one issue in RxAi AMP's format (PROTOCOL §6–7).

* ``push`` — every active, non-sensitive memory not yet on GitHub becomes an issue: the
  template title (validated before sending), an AMP body whose Metadata carries
  ``AMCP-ID`` (and ``Supersedes: #N`` when the memory replaces one already there), labels
  ``from:<agent>``, ``type:<kind>``, ``unindexed`` (created on first use). Before every
  write the live issue list is refreshed (``since`` the last look) and a memory whose
  ``AMCP-ID`` — or whose exact title and message — is already there is mapped, not posted
  again (dedup against the live state, AMP Rule 13).
* ``pull`` — issues written by other agents become memories (scope from ``AMCP-Scope``,
  else ``amp:<region>``; kind the AMP kind); ``Supersedes: #N`` supersedes the memory of
  #N (AMP Rule 8: its weight floors to 0); every ``Outcome: success|failure`` comment not
  applied before is applied once (``Memory.outcome``: +0.30 / −0.20). A malformed title or
  an unknown marker is reported and skipped; nothing on GitHub is changed by a pull.
* ``outcome`` — post an Outcome comment for a memory (and apply it locally).

What maps to what (issue number ↔ knowledge id, the comments already applied) is kept in
the store's metadata under ``brain.github:<owner>/<repo>``, saved after every write, so a
run that fails half-way resumes where it stopped.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from amcp.brain import amp
from amcp.brain.entries import entry_of
from amcp.brain.errors import RemoteError
from amcp.errors import AmcpError
from amcp.store.base import RecordFilter

if TYPE_CHECKING:
    from amcp.brain.ghrest import GitHub
    from amcp.memory import Memory

LABEL_COLORS = {"from:": "1d76db", "type:": "5319e7", "unindexed": "fbca04"}


@dataclass(slots=True)
class Mirror:
    """The backend's memory of one repository (store metadata, JSON)."""

    issues: dict[str, str] = field(default_factory=dict)  # "number" → knowledge id
    comments: list[int] = field(default_factory=list)  # comment ids already applied
    seen_at: str | None = None  # updated_at of the newest issue looked at

    @classmethod
    def load(cls, mem: Memory, repo: str) -> Mirror:
        raw = mem.store.get_meta(f"brain.github:{repo}")
        try:
            data = json.loads(raw) if raw else {}
            return cls(dict(data.get("issues", {})), list(data.get("comments", [])),
                       data.get("seen_at"))
        except (ValueError, AttributeError, TypeError):
            return cls()

    def save(self, mem: Memory, repo: str) -> None:
        mem.store.set_meta(f"brain.github:{repo}", json.dumps(
            {"issues": self.issues, "comments": sorted(set(self.comments)),
             "seen_at": self.seen_at}, sort_keys=True))

    def number_of(self, kid: str) -> int | None:
        for number, known in self.issues.items():
            if known == kid:
                return int(number)
        return None


@dataclass(slots=True)
class GitHubReport:
    created: list[int] = field(default_factory=list)
    deduplicated: list[int] = field(default_factory=list)  # already there: mapped, not sent
    remembered: list[str] = field(default_factory=list)
    superseded: list[tuple[str, str]] = field(default_factory=list)
    outcomes: list[tuple[str, str]] = field(default_factory=list)  # (knowledge id, result)
    problems: list[str] = field(default_factory=list)
    retries: int = 0


class Live:
    """The repository's issues as last listed, refreshed incrementally before each write."""

    def __init__(self, gh: GitHub) -> None:
        self.gh = gh
        self.by_number: dict[int, dict[str, Any]] = {}
        self.refresh()

    def refresh(self) -> None:
        since = max((i["updated_at"] for i in self.by_number.values()), default=None)
        for issue in self.gh.issues(since=since):
            self.by_number[int(issue["number"])] = issue

    def find(self, kid: str, title: str, text: str) -> int | None:
        for number, issue in sorted(self.by_number.items()):
            body = issue.get("body") or ""
            if amp.metadata(body).get("AMCP-ID") == kid:
                return number
            if issue.get("title") == title and amp.message(body) == text.strip():
                return number
        return None


def _ensure_labels(gh: GitHub, wanted: set[str], have: set[str]) -> None:
    for name in sorted(wanted - have):
        color = next((c for p, c in LABEL_COLORS.items() if name.startswith(p)), "ededed")
        gh.create_label(name, color, "amcp brain (RxAi AMP label)")
        have.add(name)


def _post(gh: GitHub, live: Live, mirror: Mirror, item_kid: str, agent: str,
          mem: Memory, labels: set[str], rep: GitHubReport) -> None:
    item = mem.get(item_kid)
    entry = entry_of(item, 0.0)
    assert entry is not None  # mem.get refused a tombstone
    title = amp.title_for(agent, entry.region, entry.place, entry.kind, entry.text)
    live.refresh()  # the live state, right before the write
    found = live.find(item_kid, title, entry.text)
    if found is not None:
        mirror.issues[str(found)] = item_kid
        rep.deduplicated.append(found)
        return
    old = mirror.number_of(entry.supersedes) if entry.supersedes else None
    body = amp.body_for({
        "Thread-ID": f"{entry.day}-{item_kid[2:10]}", "From": agent, "To": "all",
        "Region": entry.region, "Place": entry.place, "Type": entry.kind,
        "Posted": entry.created_at, "Supersedes": f"#{old}" if old else None,
        "AMCP-ID": item_kid, "AMCP-Scope": entry.scopes[0],
    }, entry.text)
    wanted = [f"from:{agent}", f"type:{entry.kind}", "unindexed"]
    _ensure_labels(gh, set(wanted), labels)
    issue = gh.create_issue(title, body, wanted)
    live.by_number[int(issue["number"])] = issue
    mirror.issues[str(issue["number"])] = item_kid
    rep.created.append(int(issue["number"]))


def push(mem: Memory, gh: GitHub, *, agent: str = "amcp", scope: str | None = None,
         limit: int | None = None) -> GitHubReport:
    """Post the memories GitHub does not have yet (module docstring)."""
    amp.parse_title(amp.Title(agent, "all", "r", "p", "facts", "x").render())  # agent name ok?
    rep = GitHubReport()
    mirror = Mirror.load(mem, gh.repo)
    live = Live(gh)
    labels = set(gh.labels())
    mapped = set(mirror.issues.values())
    flt = RecordFilter(scopes=(scope,) if scope else None)
    todo = [i.knowledge_id for i in _all(mem, flt) if i.knowledge_id not in mapped
            and not i.state.sensitive]
    try:
        for kid in todo[:limit]:
            _post(gh, live, mirror, kid, agent, mem, labels, rep)
            mirror.save(mem, gh.repo)  # after every write: a failure later loses nothing
    finally:
        mirror.save(mem, gh.repo)
        rep.retries = gh.retried
    return rep


def _all(mem: Memory, flt: RecordFilter) -> list[Any]:
    out: list[Any] = []
    after: str | None = None
    while page := mem.list_records(flt, limit=1000, after=after):
        out += page
        after = page[-1].knowledge_id
    return out


def pull(mem: Memory, gh: GitHub) -> GitHubReport:
    """Bring other agents' issues, supersessions and Outcome comments into the store."""
    rep = GitHubReport()
    mirror = Mirror.load(mem, gh.repo)
    try:
        issues = sorted(gh.issues(), key=lambda i: int(i["number"]))
        for issue in issues:
            _pull_issue(mem, mirror, issue, rep)
        for issue in issues:
            kid = mirror.issues.get(str(issue["number"]))
            if kid and int(issue.get("comments") or 0) > 0:
                _pull_comments(mem, gh, mirror, int(issue["number"]), kid, rep)
        if issues:
            mirror.seen_at = max(str(i["updated_at"]) for i in issues)
    finally:
        mirror.save(mem, gh.repo)
        rep.retries = gh.retried
    return rep


def _pull_issue(mem: Memory, mirror: Mirror, issue: dict[str, Any], rep: GitHubReport
                ) -> None:
    number = int(issue["number"])
    body = issue.get("body") or ""
    meta = amp.metadata(body)
    if str(number) in mirror.issues:
        return
    try:
        title = amp.parse_title(str(issue.get("title") or ""))
    except AmcpError as exc:
        rep.problems.append(f"#{number}: {exc}; skipped (the issue is left as it is)")
        return
    own = meta.get("AMCP-ID")
    if own and mem.store.get(own) is not None:
        mirror.issues[str(number)] = own  # one of ours (pushed from another clone)
        return
    text = amp.message(body)
    fields: dict[str, Any] = {"scope": meta.get("AMCP-Scope") or f"amp:{title.region}",
              "kind": title.kind,
              "tags": ["github", f"from-{title.sender}"],
              "extensions": {"x-github-issue": number, "x-amp-place": title.place}}
    old = next((mirror.issues.get(str(n)) for n in amp.supersedes(meta)
                if str(n) in mirror.issues), None)
    try:
        if old is not None and mem.get(old).state.lifecycle.value == "active":
            new = mem.supersede(old, text, **fields)
            rep.superseded.append((old, new.knowledge_id))
        else:
            new = mem.remember(text, **fields)
            rep.remembered.append(new.knowledge_id)
    except AmcpError as exc:
        rep.problems.append(f"#{number}: not stored: {exc}")
        return
    mirror.issues[str(number)] = new.knowledge_id


def _pull_comments(mem: Memory, gh: GitHub, mirror: Mirror, number: int, kid: str,
                   rep: GitHubReport) -> None:
    applied = set(mirror.comments)
    for comment in gh.comments(number):
        cid = int(comment["id"])
        if cid in applied:
            continue
        result, problem = amp.outcome_of(comment.get("body") or "")
        if problem:
            rep.problems.append(f"#{number} comment {cid}: {problem}")
        elif result in ("success", "failure"):
            try:
                mem.outcome([kid], result)
                rep.outcomes.append((kid, result))
            except AmcpError as exc:  # invalidated meanwhile: nothing to weigh
                rep.problems.append(f"#{number} comment {cid}: {exc}")
        mirror.comments.append(cid)
        mirror.save(mem, gh.repo)


def post_outcome(mem: Memory, gh: GitHub, kid: str, result: str, text: str, *,
                 agent: str = "amcp") -> int:
    """Comment an Outcome on the memory's issue and apply it locally; the comment id."""
    mirror = Mirror.load(mem, gh.repo)
    number = mirror.number_of(kid)
    if number is None:
        raise RemoteError(f"{kid[:14]} has no issue yet; run `amcp brain github push` first")
    from amcp.amf.timefmt import utc_now

    comment = gh.create_comment(number, amp.comment_for(agent, utc_now(), result, text))
    mem.outcome([kid], result)
    mirror.comments.append(int(comment["id"]))  # already applied: a pull must not redo it
    mirror.save(mem, gh.repo)
    return int(comment["id"])


__all__ = ["GitHubReport", "Mirror", "post_outcome", "pull", "push"]
