"""``amcp brain export``: the store as an OKF v0.1 bundle plus ``rows.ndjson``.

Both are derived, read-only projections (RxAi AMP §14): delete them and export again.
Writing memory into them does nothing — writes go through the store (or the git brain).

Source of the format: Open Knowledge Format v0.1, ``okf/SPEC.md`` in
GoogleCloudPlatform/knowledge-catalog at commit ee67a5c (the spec's v0.1 text; its §9
defines conformance). The spec ships no machine schema, so ``CONCEPT_SCHEMA`` below is the
one we infer from §4.1 (frontmatter keys and their types) — docs/brain.md says so too.

Layout (AMP §14.1, with our regions and places)::

    okf/index.md                       root index; front matter okf_version: "0.1"
    okf/log.md                         this export's entry (## YYYY-MM-DD)
    okf/<region>/index.md              the region's concepts by place
    okf/<region>/<place>/index.md      the place's concepts
    okf/<region>/<place>/<K-id12>.md   one concept per record
    rows.ndjson                        one row per concept (AMP §14.3 columns + ours)

Sensitive records are left out, as every export leaves them out unless asked.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from amcp.brain.entries import Entry, iso_utc, one_line, sort_key
from amcp.brain.errors import FrontMatterError
from amcp.brain.frontmatter import dump, parse, split
from amcp.brain.reading import iter_entries

if TYPE_CHECKING:
    from amcp.memory import Memory

OKF_VERSION = "0.1"
RESERVED = frozenset({"index.md", "log.md"})
SPEC_SOURCE = "GoogleCloudPlatform/knowledge-catalog okf/SPEC.md @ ee67a5c (OKF v0.1)"

# Inferred from OKF v0.1 §4.1: `type` required and non-empty; title / description /
# resource strings; tags a list of strings; timestamp an ISO 8601 date-time; any other key
# allowed (§4.1 "Extensions"). Our amcp_* keys are listed so the export is checked too.
CONCEPT_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$comment": f"inferred from {SPEC_SOURCE}, section 4.1",
    "type": "object",
    "required": ["type"],
    "properties": {
        "type": {"type": "string", "minLength": 1, "pattern": r"\S"},
        "title": {"type": "string"},
        "description": {"type": "string"},
        "resource": {"type": "string", "minLength": 1},
        "tags": {"type": "array", "items": {"type": "string"}},
        "timestamp": {
            "type": "string",
            "pattern": r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$",
        },
        "amcp_id": {"type": "string", "pattern": "^K-[0-9a-f]{64}$"},
        "amcp_weight": {"type": "number", "minimum": 0, "maximum": 1},
        "amcp_outcome_weight": {"type": "number", "minimum": 0, "maximum": 1},
        "amcp_scopes": {"type": "array", "items": {"type": "string"}, "minItems": 1},
    },
    "additionalProperties": True,
}
ROOT_INDEX_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"okf_version": {"type": "string"}},
    "additionalProperties": False,
}
_INDEX_LINE = re.compile(r"^(\s*|#{1,6} \S.*|[*-] \[[^\]]+\]\([^)]+\)( - .*)?)$")
_LOG_DATE = re.compile(r"^## (\d{4}-\d{2}-\d{2})\s*$")


@dataclass(frozen=True, slots=True)
class ExportReport:
    bundle: Path
    rows: Path
    concepts: int
    skipped_sensitive: int
    took_ms: float


@dataclass(frozen=True, slots=True)
class OkfReport:
    ok: bool
    concepts: int
    problems: tuple[str, ...]


def concept_id(e: Entry) -> str:
    return f"{e.region}/{e.place}/{e.short_id}"


def concept_fields(e: Entry) -> dict[str, Any]:
    """OKF front matter of one record (the mapping docs/brain.md tabulates)."""
    return {
        "type": e.kind,
        "title": e.title,
        "description": one_line(e.text, 200),
        "resource": f"urn:amcp:{e.knowledge_id}",
        "tags": [e.region, e.place, *e.tags],
        "timestamp": e.created_at,
        "amcp_id": e.knowledge_id,
        "amcp_type": e.type,
        "amcp_region": e.region,
        "amcp_place": e.place,
        "amcp_scopes": list(e.scopes),
        "amcp_from": e.created_by,
        "amcp_lifecycle": e.lifecycle,
        "amcp_weight": e.weight,
        "amcp_outcome_weight": e.outcome_weight,
        "amcp_archived": e.archived,
        "amcp_supersedes": e.supersedes,
        "amcp_superseded_by": e.superseded_by,
    }


def concept_doc(e: Entry, known: dict[str, str]) -> str:
    links = []
    for label, kid in (("Supersedes", e.supersedes), ("Superseded by", e.superseded_by)):
        if kid and kid in known:
            links.append(f"* {label}: [{kid[:14]}](/{known[kid]}.md)")
    body = e.text.rstrip() + "\n"
    if links:
        body += "\n# Links\n\n" + "\n".join(links) + "\n"
    return dump(concept_fields(e), body)


def row(e: Entry) -> dict[str, Any]:
    return {
        "concept_id": concept_id(e),
        "type": e.kind,
        "title": e.title,
        "description": one_line(e.text, 200),
        "tags": [e.region, e.place, *e.tags],
        "region": e.region,
        "place": e.place,
        "from_agent": e.created_by,
        "timestamp": e.created_at,
        "weight": e.weight,
        "outcome_weight": e.outcome_weight,
        "lifecycle": e.lifecycle,
        "archived": e.archived,
        "knowledge_id": e.knowledge_id,
        "amf_type": e.type,
        "scopes": list(e.scopes),
        "supersedes": e.supersedes,
        "superseded_by": e.superseded_by,
        "resource": f"urn:amcp:{e.knowledge_id}",
        "body": e.text,
    }


def _listing(title: str, items: Sequence[tuple[str, str, str]]) -> str:
    lines = [f"# {title}", ""]
    lines += [f"* [{cell}]({url}) - {desc}" for cell, url, desc in items]
    return "\n".join(lines) + "\n"


def _safe_label(text: str) -> str:
    return one_line(text, 80).replace("[", "(").replace("]", ")") or "-"


def render_bundle(entries: Sequence[Entry], now: float) -> dict[str, str]:
    """Every file of the bundle, by path relative to the bundle root."""
    known = {e.knowledge_id: concept_id(e) for e in entries}
    files: dict[str, str] = {}
    regions: dict[str, dict[str, list[Entry]]] = defaultdict(lambda: defaultdict(list))
    for e in entries:
        regions[e.region][e.place].append(e)
        files[concept_id(e) + ".md"] = concept_doc(e, known)
    root_items = []
    for region in sorted(regions):
        places = regions[region]
        count = sum(len(v) for v in places.values())
        root_items.append((region, f"{region}/", f"{count} memories"))
        region_items = [(p, f"{p}/", f"{len(places[p])} memories") for p in sorted(places)]
        files[f"{region}/index.md"] = _listing(f"Region: {region}", region_items)
        for place, items in places.items():
            ordered = sorted(items, key=sort_key)
            files[f"{region}/{place}/index.md"] = _listing(
                f"Place: {place}",
                [(_safe_label(e.title), f"{e.short_id}.md", _safe_label(e.text))
                 for e in ordered],
            )
    root = dump({"okf_version": OKF_VERSION}, _listing("amcp memory", root_items))
    files["index.md"] = root
    day = iso_utc(now)[:10]
    files["log.md"] = (
        "# Directory Update Log\n\n"
        f"## {day}\n"
        f"* **Update**: Exported {len(entries)} memories from the amcp store "
        f"({iso_utc(now)}).\n"
    )
    return files


def export_okf(mem: Memory, out: Path, *, now: float | None = None) -> ExportReport:
    """Write ``out/okf/`` and ``out/rows.ndjson`` (each replaced whole, never half)."""
    started = time.perf_counter()
    when = time.time() if now is None else now
    every = sorted(iter_entries(mem, when), key=lambda e: e.knowledge_id)
    entries = [e for e in every if not e.sensitive]
    files = render_bundle(entries, when)
    out.mkdir(parents=True, exist_ok=True)
    staging = out / ".okf-staging"
    if staging.exists():
        shutil.rmtree(staging)
    for rel, text in files.items():
        path = staging / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    bundle = out / "okf"
    old = out / ".okf-old"
    if old.exists():
        shutil.rmtree(old)
    if bundle.exists():
        bundle.rename(old)
    staging.rename(bundle)
    shutil.rmtree(old, ignore_errors=True)
    rows = out / "rows.ndjson"
    tmp = out / ".rows.ndjson.tmp"
    with tmp.open("w", encoding="utf-8") as fh:
        for e in sorted(entries, key=concept_id):
            fh.write(json.dumps(row(e), ensure_ascii=False, sort_keys=True) + "\n")
    tmp.replace(rows)
    return ExportReport(bundle, rows, len(entries), len(every) - len(entries),
                        (time.perf_counter() - started) * 1000)


# ---------------------------------------------------------------------------- validation


def validate_bundle(bundle: Path) -> OkfReport:
    """OKF v0.1 §9 conformance, plus the inferred front matter schema's types."""
    problems: list[str] = []
    concepts = 0
    for path in sorted(bundle.rglob("*.md")):
        rel = path.relative_to(bundle).as_posix()
        text = path.read_text(encoding="utf-8")
        if path.name == "index.md":
            problems += _check_index(rel, text, root=rel == "index.md")
        elif path.name == "log.md":
            problems += _check_log(rel, text)
        else:
            concepts += 1
            problems += _check_concept(rel, text)
    return OkfReport(not problems, concepts, tuple(problems))


def _check_concept(rel: str, text: str) -> list[str]:
    try:
        fields, _ = parse(text, rel)
    except FrontMatterError as exc:
        return [str(exc)]
    problems = []
    kind = fields.get("type")
    if not isinstance(kind, str) or not kind.strip():
        problems.append(f"{rel}: front matter has no non-empty 'type' (OKF §9.2)")
    for key in ("title", "description", "resource"):
        if key in fields and not isinstance(fields[key], str):
            problems.append(f"{rel}: '{key}' must be a string")
    tags = fields.get("tags")
    if tags is not None and not (isinstance(tags, list) and all(isinstance(t, str)
                                                                for t in tags)):
        problems.append(f"{rel}: 'tags' must be a list of strings")
    stamp = fields.get("timestamp")
    if stamp is not None and not (
        isinstance(stamp, str) and re.fullmatch(CONCEPT_SCHEMA["properties"]["timestamp"]
                                                ["pattern"], stamp)
    ):
        problems.append(f"{rel}: 'timestamp' must be an ISO 8601 date-time")
    return problems


def _check_index(rel: str, text: str, *, root: bool) -> list[str]:
    body = text
    if text.startswith("---"):
        if not root:
            return [f"{rel}: only the bundle-root index.md may carry front matter (OKF §11)"]
        try:
            fields, body = parse(text, rel)
        except FrontMatterError as exc:
            return [str(exc)]
        if set(fields) - {"okf_version"}:
            return [f"{rel}: root index front matter may hold only okf_version"]
    bad = [n for n, line in enumerate(body.splitlines(), 1) if not _INDEX_LINE.match(line)]
    return [f"{rel}: line {n} is not a heading or a '* [title](url) - description' entry"
            for n in bad[:5]]


def _check_log(rel: str, text: str) -> list[str]:
    if text.startswith("---"):
        try:
            split(text, rel)
        except FrontMatterError as exc:
            return [str(exc)]
        return [f"{rel}: log.md carries no front matter (OKF §7)"]
    dates = [m.group(1) for line in text.splitlines() if (m := _LOG_DATE.match(line))]
    problems = []
    if any(line.startswith("## ") and not _LOG_DATE.match(line) for line in text.splitlines()):
        problems.append(f"{rel}: a date heading is not ## YYYY-MM-DD (OKF §7)")
    if dates != sorted(dates, reverse=True):
        problems.append(f"{rel}: entries are not newest first (OKF §7)")
    return problems


__all__ = [
    "CONCEPT_SCHEMA",
    "OKF_VERSION",
    "ROOT_INDEX_SCHEMA",
    "SPEC_SOURCE",
    "ExportReport",
    "OkfReport",
    "concept_fields",
    "export_okf",
    "render_bundle",
    "row",
    "validate_bundle",
]
