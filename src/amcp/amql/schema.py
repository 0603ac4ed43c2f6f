"""What AMQL may name: fields, functions, enum values and limits.

One table each, so the parser, the evaluator, the planner and docs/amql.md agree. Adding a
field means adding one row here (and a column or a view value wherever it is evaluated).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Kind(Enum):
    """How a field's values compare."""

    NUMBER = "number"  # float; all six comparison operators
    STRING = "string"  # str; =, !=, IN, CONTAINS (substring)
    ENUM = "enum"  # str from a closed set; =, !=, IN; literals checked at parse time
    LIST = "list"  # list[str]; = / != / IN mean "shares an element", CONTAINS means member
    DATETIME = "datetime"  # created_at; all six operators against an ISO-8601 date literal
    BOUND = "bound"  # created_after / created_before: "= date", a bound on created_at


KNOWLEDGE_TYPES: frozenset[str] = frozenset(
    {"KT-FACT", "KT-PATTERN", "KT-CONTEXT", "KT-DECISION", "KT-PITFALL", "KT-PRINCIPLE",
     "KT-SIGNAL"}
)
LIFECYCLES: frozenset[str] = frozenset(
    {"draft", "active", "superseded", "invalidated", "archived"}
)
# The firewall's vocabulary (amcp.firewall.provenance.Origin, trust.Verification), spelled
# out so the parser needs no firewall import.
ORIGINS: frozenset[str] = frozenset({"user", "agent", "tool", "external", "import", "peer"})
VERIFICATIONS: frozenset[str] = frozenset({"verified", "local", "unverified"})
PREDICATES: frozenset[str] = frozenset(
    {"REQUIRES", "CAUSES", "EQUALS", "IMPLIES", "CONFLICTS_WITH", "SUPERSEDES",
     "CORRELATES_WITH", "OPTIMIZED_BY", "VERIFIED_BY", "INVALIDATED_BY"}
)


@dataclass(frozen=True, slots=True)
class FieldSpec:
    name: str
    kind: Kind
    # Closed value set for ENUM fields (checked at parse time so a typo is a 400, not an
    # empty result).
    values: frozenset[str] = frozenset()
    doc: str = ""


_FIELD_ROWS = (
    FieldSpec("type", Kind.ENUM, KNOWLEDGE_TYPES, "AMF knowledge type"),
    FieldSpec("confidence", Kind.NUMBER,
              doc="trusted confidence: core.confidence capped by verified provenance"),
    FieldSpec("stated_confidence", Kind.NUMBER, doc="core.confidence as the writer stated it"),
    FieldSpec("origin", Kind.ENUM, ORIGINS, doc="provenance origin, as the firewall verified it"),
    FieldSpec("verification", Kind.ENUM, VERIFICATIONS,
              doc="verified | local | unverified (the writer's signature checked)"),
    FieldSpec("trust_tier", Kind.NUMBER, doc="1 (unverified web page) .. 4 (verified user)"),
    FieldSpec("project", Kind.STRING, doc="the record's project (a project_scope entry)"),
    FieldSpec("project_scope", Kind.LIST, doc="meta.project_scope; '*' is global"),
    FieldSpec("tags", Kind.LIST, doc="tags; trust:* answered from verified provenance"),
    FieldSpec("subject", Kind.STRING, doc="core.subject"),
    FieldSpec("predicate", Kind.ENUM, PREDICATES, doc="core.predicate"),
    FieldSpec("object", Kind.STRING, doc="core.object"),
    FieldSpec("created_at", Kind.DATETIME, doc="meta.created_at"),
    FieldSpec("created_after", Kind.BOUND, doc="created_at > date"),
    FieldSpec("created_before", Kind.BOUND, doc="created_at < date"),
    FieldSpec("decay_status", Kind.STRING, doc="node view: decay status, e.g. 'expired'"),
    FieldSpec("lifecycle", Kind.ENUM, LIFECYCLES, doc="node view: lifecycle state"),
    FieldSpec("caused_by", Kind.LIST, doc="causal.caused_by (knowledge ids)"),
    FieldSpec("referenced_by", Kind.LIST, doc="ids of records whose caused_by names this one"),
    FieldSpec("cluster_id", Kind.STRING, doc="the record's knowledge cluster"),
    FieldSpec("knowledge_id", Kind.STRING, doc="K-<64 hex>"),
    FieldSpec("access_recency", Kind.NUMBER, doc="node view: recency score, higher is newer"),
    FieldSpec("weight", Kind.NUMBER, doc="node view: outcome-learned weight"),
)
FIELDS: dict[str, FieldSpec] = {f.name: f for f in _FIELD_ROWS}

# Fields of the `clusters` source in the cluster subquery (upstream example cluster_load).
CLUSTER_FIELDS: dict[str, FieldSpec] = {
    f.name: f
    for f in (
        FieldSpec("cluster_id", Kind.STRING, doc="cluster id"),
        FieldSpec("project", Kind.STRING, doc="project the cluster belongs to"),
    )
}
SUBQUERY_SOURCE = "clusters"
SUBQUERY_COLUMN = "cluster_id"

# Fields ORDER BY accepts: every scalar one (a list or a bound has no single order).
ORDERABLE: frozenset[str] = frozenset(
    name for name, f in FIELDS.items() if f.kind not in (Kind.LIST, Kind.BOUND)
)

# RECALL's projection may name query fields or AMF top-level sections.
PROJECTABLE: frozenset[str] = frozenset(FIELDS) | frozenset(
    {"amf_version", "core", "meta", "distribution", "causal", "annotation", "integrity",
     "vendor_extensions"}
)


class FuncRole(Enum):
    PREDICATE = "predicate"  # stands alone as a condition; the caller returns bool or a score
    VALUE = "value"  # stands on the right of an operator; the caller returns a value


@dataclass(frozen=True, slots=True)
class FuncSpec:
    name: str
    role: FuncRole
    min_args: int
    max_args: int
    doc: str = ""


_FUNC_ROWS = (
    FuncSpec("semantic_match", FuncRole.PREDICATE, 1, 2,
             "semantic_match(text[, threshold]): the record is about text"),
    FuncSpec("centroid_match", FuncRole.PREDICATE, 1, 2,
             "centroid_match(text[, threshold]): the cluster centroid is about text"),
    FuncSpec("session_id", FuncRole.VALUE, 1, 1, "session_id('S-...'): a work session"),
    FuncSpec("qef_signal_id", FuncRole.VALUE, 1, 1, "qef_signal_id('QEF-...'): a QEF signal"),
    FuncSpec("current_project", FuncRole.VALUE, 0, 0, "current_project(): the session's project"),
)
FUNCTIONS: dict[str, FuncSpec] = {f.name: f for f in _FUNC_ROWS}

# A predicate function whose callback returns a score (not a bool) and was given no
# threshold (semantic_match, centroid_match) passes when score >= this. Calibrated on the
# packaged MiniLM (bench/calibrate_thresholds.py): questions answered by a fact scored cosine
# 0.45-0.84 against it, unanswerable ones <= 0.26 but for one outlier; the old 0.5 lost a
# quarter of the answered ones. Callers that want their own policy return a bool instead.
DEFAULT_MATCH_THRESHOLD = 0.35

# Limits. Each keeps one query from asking a node for unbounded work.
MAX_ROWS = 10_000  # a page larger than this is an export, not a recall
MAX_TOKENS = 10_000_000  # ~40 MB of AMF at 4 bytes/token, far beyond any context window
MAX_QUERY_CHARS = 262_144  # 256 Ki chars: room for a REMEMBER with a long annotation
MAX_DEPTH = 48  # expression / JSON nesting; keeps every recursive walk far from the stack limit
MAX_LIST_ITEMS = 1_000  # IN [...] lists; longer ones belong in a join, not a literal
MAX_ORDER_ITEMS = 8
