"""Translating WHERE conjuncts into the store's own filter language, ``RecordFilter``.

Each top-level conjunct lands in one of three bins:

- **exact**: the filter expresses it completely; the store's answer is trusted.
- **prefilter**: the filter narrows to a superset (``project = 'A'`` also lets global
  ``'*'`` records through; date bounds get a one-second margin because stored timestamps
  compare as strings); the conjunct is evaluated again in memory.
- **residual**: evaluated in memory only (functions, OR mixing fields, computed fields,
  ``confidence`` which lives in the record body, not a column, and is read capped by
  verified provenance; a ``trust:`` tag, which only the firewall answers).

Values only ever travel as filter fields, which the adapter turns into placeholders, so a
quote or ``; DROP TABLE`` in a literal is data end to end.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from amcp.amf.timefmt import format_ts
from amcp.amf.types import KnowledgeType, Lifecycle
from amcp.amql.ast import And, Compare, CompareOp, Contains, Expr, FuncCall, In, Not, Or
from amcp.amql.nodeview import ALL_LIFECYCLES
from amcp.amql.plan import conjoin
from amcp.firewall.serve import TRUST_TAG
from amcp.store.base import RecordFilter

ALL_TYPES: tuple[KnowledgeType, ...] = tuple(KnowledgeType)
_ENUM_FIELDS = {"type", "lifecycle"}
_SET_FIELDS = {"type", "lifecycle", "knowledge_id", "subject"}
_SCOPE_FIELDS = {"project", "project_scope"}
_SECOND = timedelta(seconds=1)


@dataclass(frozen=True, slots=True)
class Pushdown:
    flt: RecordFilter
    exact: tuple[Expr, ...] = ()
    prefilter: tuple[Expr, ...] = ()
    residual: tuple[Expr, ...] = ()
    empty: bool = False  # the pushed conjuncts contradict each other: nothing can match

    @property
    def recheck(self) -> Expr | None:
        """What the evaluator must still decide for each candidate."""
        return conjoin((*self.prefilter, *self.residual))


def mentions(expr: Expr | None, name: str) -> bool:
    """Whether ``expr`` names field ``name`` anywhere (ignoring subqueries' own fields)."""
    if expr is None or isinstance(expr, FuncCall):
        return False
    if isinstance(expr, And | Or):
        return any(mentions(e, name) for e in expr.items)
    if isinstance(expr, Not):
        return mentions(expr.item, name)
    return expr.field == name


def strings(value: object) -> tuple[str, ...] | None:
    """The literal string(s) of a comparison (or a value function's result), or None when
    it is not only strings."""
    if isinstance(value, str):
        return (value,)
    if isinstance(value, tuple | list) and all(isinstance(v, str) for v in value):
        return tuple(str(v) for v in value)
    return None


@dataclass(slots=True)
class _Acc:
    """The filter being built; ``None`` means "not restricted"."""

    sets: dict[str, set[str] | None] = field(default_factory=dict)
    scopes: set[str] | None = None
    tags: list[str] = field(default_factory=list)
    after: str | None = None
    before: str | None = None
    causes: set[str] | None = None  # caused_by holds any of these (one conjunct's worth)

    def cause(self, values: tuple[str, ...]) -> str:
        """Push one ``caused_by`` conjunct ("holds any of"); a second stays residual: two
        any-of sets ANDed are not one any-of set."""
        if self.causes is not None:
            return "residual"
        self.causes = set(values)
        return "exact"

    def narrow(self, name: str, values: set[str]) -> None:
        current = self.sets.get(name)
        self.sets[name] = values if current is None else current & values


def _universe(name: str) -> set[str]:
    if name == "type":
        return {t.value for t in ALL_TYPES}
    return {lc.value for lc in ALL_LIFECYCLES}


def _classify(item: Expr, acc: _Acc) -> str:
    """Fold ``item`` into ``acc``; return 'exact', 'prefilter' or 'residual'."""
    if isinstance(item, Compare) and isinstance(item.value, datetime):
        return _dates(item, acc)
    if (isinstance(item, Compare) and item.op is CompareOp.EQ) or isinstance(item, In):
        name = item.field
        values = strings(item.value if isinstance(item, Compare) else item.values)
        if values is None:
            return "residual"
        if name in _SET_FIELDS:
            acc.narrow(name, set(values))
            return "exact"
        if name in _SCOPE_FIELDS:
            acc.scopes = set(values) if acc.scopes is None else acc.scopes & set(values)
            return "prefilter"
        if name == "tags" and isinstance(item, Compare) and len(values) == 1 and not (
            values[0].startswith(TRUST_TAG)):
            acc.tags.append(values[0])
            return "exact"
        if name == "caused_by":  # a list field: "=" and IN mean "shares an element"
            return acc.cause(values)
        return "residual"
    negated = (
        item.item if isinstance(item, Not) and isinstance(item.item, Compare | In)
        else item if isinstance(item, Compare) and item.op is CompareOp.NE else None
    )
    if negated is not None:
        if isinstance(negated, Compare) and negated.op not in (CompareOp.EQ, CompareOp.NE):
            return "residual"
        if isinstance(negated, Compare) and negated.op is CompareOp.NE and item is not negated:
            return "residual"  # NOT (f != v): rare; leave it to the evaluator
        values = strings(negated.value if isinstance(negated, Compare) else negated.values)
        if negated.field in _ENUM_FIELDS and values is not None:
            acc.narrow(negated.field, _universe(negated.field) - set(values))
            return "exact"
        return "residual"
    if isinstance(item, Contains):
        value = strings(item.value)
        if value is None:
            return "residual"
        if item.field == "tags" and not value[0].startswith(TRUST_TAG):
            acc.tags.append(value[0])
            return "exact"
        if item.field in _SCOPE_FIELDS:
            acc.scopes = set(value) if acc.scopes is None else acc.scopes & set(value)
            return "prefilter"
        if item.field == "caused_by":
            return acc.cause(value)
        return "residual"
    if isinstance(item, Compare):
        return _dates(item, acc)
    return "residual"


def _dates(item: Compare, acc: _Acc) -> str:
    value = item.value
    if not isinstance(value, datetime):
        return "residual"
    # Stored created_at strings compare lexicographically; '…00Z' sorts after '…00.5Z'.
    # A whole-second bound one second wider on each side is a safe superset.
    low = format_ts(value.replace(microsecond=0) - _SECOND)
    high = format_ts(value.replace(microsecond=0) + _SECOND)
    op, name = item.op, item.field
    lower = (name == "created_after" and op is CompareOp.EQ) or (
        name == "created_at" and op in (CompareOp.GT, CompareOp.GE, CompareOp.EQ))
    upper = (name == "created_before" and op is CompareOp.EQ) or (
        name == "created_at" and op in (CompareOp.LT, CompareOp.LE, CompareOp.EQ))
    if not (lower or upper):
        return "residual"
    if lower:
        acc.after = low if acc.after is None else max(acc.after, low)
    if upper:
        acc.before = high if acc.before is None else min(acc.before, high)
    return "prefilter"


def push(conjuncts: tuple[Expr, ...], base: RecordFilter) -> Pushdown:
    """Fold ``conjuncts`` into ``base`` (the caller's visibility and default lifecycles)."""
    acc = _Acc()
    bins: dict[str, list[Expr]] = {"exact": [], "prefilter": [], "residual": []}
    for item in conjuncts:
        bins[_classify(item, acc)].append(item)
    flt = base
    empty = False
    types = acc.sets.get("type")
    if types is not None:
        flt = replace(flt, types=tuple(t for t in ALL_TYPES if t.value in types))
        empty |= not types
    lifecycles = acc.sets.get("lifecycle")
    if lifecycles is not None:
        allowed = flt.lifecycles if flt.lifecycles is not None else ALL_LIFECYCLES
        kept = tuple(lc for lc in allowed if lc.value in lifecycles)
        flt = replace(flt, lifecycles=kept)
        empty |= not kept
    ids = acc.sets.get("knowledge_id")
    if ids is not None:
        flt = replace(flt, ids=tuple(sorted(ids)))
        empty |= not ids
    subjects = acc.sets.get("subject")
    if subjects is not None:
        flt = replace(flt, subjects=tuple(sorted(subjects)))
        empty |= not subjects
    if acc.scopes is not None and (base.scopes is None or acc.scopes <= set(base.scopes)):
        # The project's scopes narrow the store's answer only when the caller may see all of
        # them: a record visible through scope p that also carries project q matches
        # `project = q`, and one any-of scope list cannot say "p, and q" — the caller's
        # scopes then stay the filter, and the conjunct is rechecked ('prefilter') either
        # way. '*' stays visible.
        flt = replace(flt, scopes=tuple(sorted(acc.scopes)))
    if acc.tags:
        flt = replace(flt, tags=tuple(dict.fromkeys((*(flt.tags or ()), *acc.tags))))
    if acc.causes is not None:
        flt = replace(flt, caused_by=tuple(sorted(acc.causes)))
        empty |= not acc.causes
    if acc.after is not None:
        flt = replace(flt, created_after=acc.after)
    if acc.before is not None:
        flt = replace(flt, created_before=acc.before)
    if acc.after is not None and acc.before is not None and acc.after >= acc.before:
        empty = True
    return Pushdown(flt, tuple(bins["exact"]), tuple(bins["prefilter"]),
                    tuple(bins["residual"]), empty)


def describe(flt: RecordFilter) -> str:
    """A RecordFilter as one line, only the fields that restrict."""
    parts: list[str] = []
    for name in ("scopes", "types", "kinds", "tags", "lifecycles", "created_after",
                 "created_before", "subject_prefix", "ids", "subjects", "events", "caused_by",
                 "sessions"):
        value = getattr(flt, name)
        if value is None:
            continue
        if isinstance(value, tuple):
            shown = [v.value if isinstance(v, Lifecycle | KnowledgeType) else v for v in value]
            if name in ("ids", "caused_by") and len(shown) > 4:
                parts.append(f"{name}=<{len(shown)} ids>")
                continue
            parts.append(f"{name}={shown!r}")
        else:
            parts.append(f"{name}={value!r}")
    return ", ".join(parts) or "(no restriction)"
