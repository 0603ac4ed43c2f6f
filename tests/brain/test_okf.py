from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from tests.brain.conftest import NOW

from amcp.brain.frontmatter import dump, parse
from amcp.brain.okf import (
    CONCEPT_SCHEMA,
    OKF_VERSION,
    ROOT_INDEX_SCHEMA,
    export_okf,
    validate_bundle,
)
from amcp.errors import ValidationError
from amcp.memory import Memory


def test_export_is_conformant_and_schema_valid(brain_mem: Memory, tmp_path: Path) -> None:
    rep = export_okf(brain_mem, tmp_path / "out", now=NOW)
    assert rep.concepts == 6 and rep.skipped_sensitive == 1
    check = validate_bundle(rep.bundle)
    assert check.ok, check.problems
    assert check.concepts == 6
    validator = jsonschema.Draft202012Validator(CONCEPT_SCHEMA)
    concepts = [p for p in rep.bundle.rglob("*.md") if p.name not in ("index.md", "log.md")]
    assert len(concepts) == 6
    for path in concepts:
        fields, body = parse(path.read_text(), str(path))
        validator.validate(fields)
        assert body.strip()
        assert path.stem == fields["amcp_id"][:14]
    root, _ = parse((rep.bundle / "index.md").read_text())
    jsonschema.validate(root, ROOT_INDEX_SCHEMA)
    assert root == {"okf_version": OKF_VERSION}
    assert "hunter2" not in "".join(p.read_text() for p in rep.bundle.rglob("*.md"))


def test_rows_match_concepts(brain_mem: Memory, tmp_path: Path) -> None:
    rep = export_okf(brain_mem, tmp_path / "out", now=NOW)
    rows = [json.loads(line) for line in rep.rows.read_text().splitlines()]
    assert len(rows) == 6
    assert [r["concept_id"] for r in rows] == sorted(r["concept_id"] for r in rows)
    for r in rows:
        fields, body = parse((rep.bundle / f"{r['concept_id']}.md").read_text())
        assert r["knowledge_id"] == fields["amcp_id"]
        assert r["type"] == fields["type"] and r["weight"] == fields["amcp_weight"]
        assert r["body"] in body
    superseded = next(r for r in rows if r["lifecycle"] == "superseded")
    doc = (rep.bundle / f"{superseded['concept_id']}.md").read_text()
    assert "# Links" in doc and "Superseded by" in doc


def test_export_is_deterministic_and_replaces_whole(brain_mem: Memory, tmp_path: Path) -> None:
    a = export_okf(brain_mem, tmp_path / "a", now=NOW)
    b = export_okf(brain_mem, tmp_path / "b", now=NOW)
    read = lambda root: {p.relative_to(root).as_posix(): p.read_bytes()  # noqa: E731
                         for p in sorted(root.rglob("*")) if p.is_file()}
    assert read(a.bundle) == read(b.bundle)
    assert a.rows.read_bytes() == b.rows.read_bytes()
    (a.bundle / "project-amcp" / "stray.md").write_text("not ours")
    export_okf(brain_mem, tmp_path / "a", now=NOW)
    assert not (a.bundle / "project-amcp" / "stray.md").exists()  # derived: rebuilt whole


@pytest.mark.parametrize(("name", "text", "problem"), [
    ("c.md", "no front matter\n", "does not start"),
    ("c.md", "---\ntitle: x\n---\nbody\n", "no non-empty 'type'"),
    ("c.md", "---\ntype: ''\n---\n", "no non-empty 'type'"),
    ("c.md", "---\ntype: [unclosed\n---\n", "not valid YAML"),
    ("c.md", "---\ntype: x\ntags: 3\n---\n", "'tags' must be a list"),
    ("sub/index.md", "---\nokf_version: '0.1'\n---\n# x\n", "only the bundle-root"),
    ("index.md", "# x\n\nfree prose here\n", "is not a heading"),
    ("log.md", "# Log\n\n## 2026-01-01\n* a\n\n## 2026-02-01\n* b\n", "newest first"),
    ("log.md", "# Log\n\n## January\n* a\n", "YYYY-MM-DD"),
])
def test_validator_finds_each_violation(tmp_path: Path, name: str, text: str,
                                        problem: str) -> None:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    rep = validate_bundle(tmp_path)
    assert not rep.ok
    assert any(problem in p for p in rep.problems), rep.problems


def test_frontmatter_round_trip_and_plain_yaml() -> None:
    fields = {"type": "facts", "title": 'a "quoted" [x]: y', "tags": ["a", "b"],
              "weird": "line\u2028sep \x85 nel", "n": 0.5}
    text = dump(fields, "body")
    back, body = parse(text)
    assert back == fields and body == "body\n"
    human, _ = parse("---\ntype: facts\ntags: [a, b]\ncreated_at: 2026-11-01T00:00:00Z\n---\n")
    assert human == {"type": "facts", "tags": ["a", "b"], "created_at": "2026-11-01T00:00:00Z"}
    with pytest.raises(ValidationError, match="not closed"):
        parse("---\ntype: x\n")
