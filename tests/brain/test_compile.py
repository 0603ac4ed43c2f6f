from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.brain.conftest import NOW

from amcp.brain import compile as brain_compile
from amcp.brain.compile import INDEX_LIMIT, compile_brain, read_state, track
from amcp.brain.entries import parse_now
from amcp.brain.files import publish
from amcp.memory import Memory
from amcp.store.base import RecordFilter


def files_of(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()}


def test_compile_writes_every_file(brain_mem: Memory, tmp_path: Path) -> None:
    rep = compile_brain(brain_mem, tmp_path / "b", now=NOW)
    names = set(files_of(tmp_path / "b"))
    assert names == {"INDEX.md", "REGIONS.md", "weights.json", "not_indexed.md", ".brain.json",
                     ".brain-cache.msgpack", "REGION-project-amcp.md", "REGION-user-alice.md"}
    assert rep.records == 7  # the sensitive one included (redacted), tombstones none
    index = (tmp_path / "b" / "INDEX.md").read_text()
    assert "**Last Compiled:** 2026-12-01T00:00:00Z" in index
    assert "## Region: project-amcp" in index and "See REGION-project-amcp.md." in index
    assert "hunter2" not in index and "hunter2" not in (tmp_path / "b" /
                                                         "REGION-user-alice.md").read_text()


def test_weights_rules(brain_mem: Memory, tmp_path: Path) -> None:
    compile_brain(brain_mem, tmp_path / "b", now=NOW)
    weights = json.loads((tmp_path / "b" / "weights.json").read_text())["weights"]
    by_text = {}
    for item in brain_mem.list_records(RecordFilter(lifecycles=None), limit=100, reveal=True):
        assert item.record is not None
        by_text[item.record.text] = weights[item.knowledge_id]
    life = by_text["Alice's birthday is 1 May"]
    assert life["weight"] == 1.0 and not life["archived"]  # pinned, even after a failure
    old = by_text["Deploys happen on Thursday"]
    assert old["weight"] == 0.0 and old["archived"] and old["lifecycle"] == "superseded"
    gone = by_text["The CI cache key includes the lock file"]
    assert gone["weight"] == 0.0 and gone["archived"]
    pattern = by_text["Use rebase, not merge, on feature branches"]
    assert pattern["outcome_weight"] == pytest.approx(0.5 * 0.98 + 0.30)
    assert 0.1 < pattern["weight"] <= 1.0 and not pattern["archived"]


def test_region_tables_follow_amp_order(brain_mem: Memory, tmp_path: Path) -> None:
    compile_brain(brain_mem, tmp_path / "b", now=NOW)
    region = (tmp_path / "b" / "REGION-project-amcp.md").read_text()
    assert region.index("## Place: learning") < region.index("## Place: pattern")
    assert "### Type: pattern" in region and "### Type: facts" in region
    archived = region[region.index("## Archived"):]
    assert "Deploys happen on Thursday" in archived and "superseded" in archived
    assert "invalidated" in archived
    alice = (tmp_path / "b" / "REGION-user-alice.md").read_text()
    assert "Alice prefers tabs \\| not spaces" in alice  # a pipe cannot break the table


def test_byte_identical_and_idempotent(brain_mem: Memory, tmp_path: Path) -> None:
    compile_brain(brain_mem, tmp_path / "a", now=NOW)
    compile_brain(brain_mem, tmp_path / "b", now=NOW)
    first = files_of(tmp_path / "a")
    assert first == files_of(tmp_path / "b")
    compile_brain(brain_mem, tmp_path / "a", now=NOW)  # again into the same directory
    assert files_of(tmp_path / "a") == first
    compile_brain(brain_mem, tmp_path / "c", now=NOW + 86400)
    assert files_of(tmp_path / "c")["INDEX.md"] != first["INDEX.md"]  # the clock is input


def test_same_now_any_timezone(brain_mem: Memory, tmp_path: Path,
                               monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    compile_brain(brain_mem, tmp_path / "a", now=parse_now("2026-12-01T00:00:00Z"))
    monkeypatch.setenv("TZ", "Asia/Kolkata")
    time.tzset()
    try:
        compile_brain(brain_mem, tmp_path / "b", now=parse_now("2026-12-01T05:30:00+05:30"))
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()
    assert files_of(tmp_path / "a") == files_of(tmp_path / "b")


def test_index_is_bounded_however_many_regions(tmp_path: Path) -> None:
    with Memory(tmp_path / "s" / "memory.db", embedder="hashing") as mem:
        mem.remember_many([{"text": f"memory {i} about region {i % 300} " + "x" * 60,
                            "scope": f"project:region-{i % 300:03d}-with-a-long-name"}
                           for i in range(1200)])
        rep = compile_brain(mem, tmp_path / "b", now=NOW)
    index = (tmp_path / "b" / "INDEX.md").read_bytes()
    assert rep.regions == 300
    assert len(index) <= INDEX_LIMIT
    assert b"more regions" in index and b"see REGIONS.md" in index
    regions = (tmp_path / "b" / "REGIONS.md").read_text()
    assert regions.count("| project-region-") == 300


def test_failed_run_is_repaired(brain_mem: Memory, tmp_path: Path,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    compile_brain(brain_mem, tmp_path / "good", now=NOW)
    target = tmp_path / "b"
    compile_brain(brain_mem, target, now=NOW - 86400)  # an older, complete compile
    brain_mem.remember("arrived later", scope="project:new-region")
    compile_brain(brain_mem, tmp_path / "good", now=NOW)
    calls = {"n": 0}
    real = brain_compile.publish

    def dying(directory: Path, files: dict[str, bytes], **kw: object) -> list[str]:
        # Move half the files, then die: what a killed process leaves behind.
        calls["n"] += 1
        half = dict(list(files.items())[: len(files) // 2])
        publish(directory, half, owned=lambda n: False)
        (directory / ".staging").mkdir(exist_ok=True)
        raise OSError("disk went away")

    monkeypatch.setattr(brain_compile, "publish", dying)
    with pytest.raises(OSError):
        compile_brain(brain_mem, target, now=NOW)
    monkeypatch.setattr(brain_compile, "publish", real)
    compile_brain(brain_mem, target, now=NOW)
    assert calls["n"] == 1
    assert files_of(target) == files_of(tmp_path / "good")
    assert not (target / ".staging").exists()


def test_stale_region_file_removed_foreign_kept(tmp_path: Path) -> None:
    with Memory(tmp_path / "s" / "memory.db", embedder="hashing") as mem:
        kid = mem.remember("only memory", scope="project:gone").knowledge_id
        compile_brain(mem, tmp_path / "b", now=NOW)
        (tmp_path / "b" / "NOTES.md").write_text("mine")
        mem.purge(kid)
        rep = compile_brain(mem, tmp_path / "b", now=NOW)
    assert rep.removed == ("REGION-project-gone.md",)
    assert (tmp_path / "b" / "NOTES.md").read_text() == "mine"


def test_track_lists_what_arrived_since_compile(brain_mem: Memory, tmp_path: Path) -> None:
    compile_brain(brain_mem, tmp_path / "b", now=NOW)
    assert "**Unindexed Memory Count:** 0" in (tmp_path / "b" / "not_indexed.md").read_text()
    kid = brain_mem.remember("new since the compile", scope="project:amcp").knowledge_id
    rep = track(brain_mem, tmp_path / "b", now=NOW + 60)
    text = (tmp_path / "b" / "not_indexed.md").read_text()
    assert rep.unindexed == 1 and kid[:14] in text
    assert "**Since Last Index Compile:** 2026-12-01T00:00:00Z" in text
    state = read_state(tmp_path / "b")
    assert state is not None and state["records"] == 7
    compile_brain(brain_mem, tmp_path / "b", now=NOW + 120)
    assert track(brain_mem, tmp_path / "b", now=NOW + 180).unindexed == 0


def test_now_must_name_a_zone() -> None:
    from amcp.errors import ValidationError

    with pytest.raises(ValidationError, match="naive"):
        parse_now("2026-12-01T00:00:00")
    assert parse_now("1796083200") == NOW


def test_cli_compile(brain_mem: Memory, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from amcp.cli.app import app

    path = str(brain_mem.path)
    brain_mem.close()
    res = CliRunner().invoke(app, ["brain", "compile", str(tmp_path / "b"), "--store", path,
                                   "--now", "2026-12-01T00:00:00Z", "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["records"] == 7 and data["compiled_at"] == "2026-12-01T00:00:00Z"


def test_cache_changes_nothing_and_forgets_purged(brain_mem: Memory, tmp_path: Path) -> None:
    compile_brain(brain_mem, tmp_path / "warm", now=NOW)
    kid = brain_mem.remember("purge me: my phone is 555-0100", scope="user:alice").knowledge_id
    compile_brain(brain_mem, tmp_path / "warm", now=NOW)  # cached, plus one body read
    compile_brain(brain_mem, tmp_path / "cold", now=NOW)
    assert files_of(tmp_path / "warm") == files_of(tmp_path / "cold")
    assert b"555-0100" in (tmp_path / "warm" / ".brain-cache.msgpack").read_bytes()
    brain_mem.purge(kid)
    compile_brain(brain_mem, tmp_path / "warm", now=NOW)
    for data in files_of(tmp_path / "warm").values():
        assert b"555-0100" not in data
    (tmp_path / "warm" / ".brain-cache.msgpack").write_bytes(b"\xc1 not msgpack")
    compile_brain(brain_mem, tmp_path / "warm", now=NOW)  # a broken cache is re-read
    compile_brain(brain_mem, tmp_path / "cold2", now=NOW)
    assert files_of(tmp_path / "warm") == files_of(tmp_path / "cold2")


def test_weights_equal_the_decay_views(brain_mem: Memory, tmp_path: Path) -> None:
    """weights.json holds decay.view's effective confidence for every live record."""
    from amcp.evolution.decay import view

    compile_brain(brain_mem, tmp_path / "b", now=NOW + 40 * 86400)
    weights = json.loads((tmp_path / "b" / "weights.json").read_text())["weights"]
    checked = 0
    for item in brain_mem.list_records(RecordFilter(), limit=100):
        assert item.record is not None
        if item.record.kind == "lifefact":
            continue
        want = round(view(item.record, item.state, NOW + 40 * 86400).effective_confidence, 6)
        assert weights[item.knowledge_id]["weight"] == want
        checked += 1
    assert checked >= 3


def test_summaries_give_the_entries_whole_records_give(brain_mem: Memory,
                                                       tmp_path: Path) -> None:
    """The cold compile reads verified summaries (``Store.summaries``); each entry must be
    the one the full verified read (``Memory.list_records``, redacted) gives, and the
    sensitive record comes redacted through that read."""
    from amcp.brain.entries import entry_of
    from amcp.brain.reading import iter_entries

    brain_mem.remember("a signal-free pitfall", scope="project:amcp", type="KT-PITFALL",
                       created_at="2026-11-05T00:00:00Z")
    every = RecordFilter(lifecycles=None, include_expired=True)
    want = {item.knowledge_id: entry_of(item, NOW) for item in
            brain_mem.list_records(every, limit=100)}
    got = {e.knowledge_id: e for e in iter_entries(brain_mem, NOW)}
    assert got == {k: e for k, e in want.items() if e is not None}
    assert len(got) == 8
    secret = [e for e in got.values() if e.sensitive]
    assert len(secret) == 1 and "hunter2" not in secret[0].text + secret[0].title
    compile_brain(brain_mem, tmp_path / "cold", now=NOW)
    compile_brain(brain_mem, tmp_path / "cold", now=NOW)  # warm: from the cache
    compile_brain(brain_mem, tmp_path / "again", now=NOW)
    assert files_of(tmp_path / "cold") == files_of(tmp_path / "again")


def test_a_cache_of_another_layout_is_ignored(tmp_path: Path) -> None:
    import msgpack

    from amcp.brain.compile import CACHE_FILE, load_cache

    (tmp_path / CACHE_FILE).write_bytes(msgpack.packb([("K-1", "region", "place")]))
    assert load_cache(tmp_path) == {}
