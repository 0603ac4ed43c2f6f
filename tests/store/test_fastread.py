"""The hooks' read-only store view: same answers as Memory, refuses what Memory refuses."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from amcp.errors import StoreError, StoreIntegrityError
from amcp.memory import Memory
from amcp.retrieval.fastsearch import fast_search
from amcp.retrieval.lexical_recall import LEXICAL_DEFAULTS
from amcp.retrieval.search import SearchTuning
from amcp.store.base import RecordFilter
from amcp.store.fastread import FastReader, StaleStore, Unreconciled

WORDS = ["parser", "lexer", "planner", "deploy", "migration", "cache", "index", "vector",
         "socket", "frame", "session", "ledger", "commit", "branch", "release", "docker"]
QUERIES = [
    "why does the planner depend on the cache when the index changes?",
    "docker release branch",
    "socket frame",
    "migration",
    "nothing matches zzzz",
]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("fastread")
    with Memory(home / "memory.db", embedder="hashing") as mem:
        items = []
        for i in range(300):
            a, b, c = WORDS[i % 16], WORDS[(i * 7) % 16], WORDS[(i * 5) % 16]
            scope = "project:p" if i % 3 else ("user:alice" if i % 2 else "project:q")
            items.append({"text": f"Note {i}: the {a} needs the {b} when {c} moves",
                          "scope": scope, "kind": "preference" if i % 4 == 0 else "fact"})
        outs = mem.remember_many(items)
        mem.remember("User's deploy token for the planner: tok-123", scope="project:p",
                     kind="credential", sensitive=True)
        mem.remember("Bob likes planner docs", scope="user:bob", kind="preference")
        mem.store.set_weight(outs[7].knowledge_id, 0.9)
        mem.invalidate(outs[10].knowledge_id, "wrong")
    return home / "memory.db"


def test_search_defaults_are_the_one_lexical_tuning() -> None:
    """The fast reader runs ``lexical_recall`` with ``LEXICAL_DEFAULTS``; the searcher's
    defaults are the same values, defined once."""
    assert SearchTuning().lexical == LEXICAL_DEFAULTS


@pytest.mark.parametrize("query", QUERIES)
@pytest.mark.parametrize("scopes", [("project:p", "user:alice"), ("project:q",), ()])
def test_search_matches_memory_recall_without_embedder(store: Path, query: str,
                                                       scopes: tuple[str, ...]) -> None:
    with Memory(store, embedder=None, check_embedder=False) as mem:
        want = [(h.knowledge_id, h.item.record.text if h.item.record else "")
                for h in mem.recall(query, k=15, scope=list(scopes) or None,
                                    touch=False).hits]
    with FastReader(store) as reader:
        got = [(r.knowledge_id, r.text) for r in fast_search(reader, query, scopes, 15)]
    assert got == want


def test_sensitive_hit_is_redacted(store: Path) -> None:
    with FastReader(store) as reader:
        hits = [r for r in fast_search(reader, "credential", ("project:p",), 15)
                if r.sensitive]
    assert hits and "tok-123" not in hits[0].text and "[redacted]" in hits[0].text


@pytest.mark.parametrize("small_scope", [0, 10_000])  # both plans: index walk, scope rows
@pytest.mark.parametrize(("scopes", "kinds"), [(("project:p",), None),
                                               (("user:alice", "user:bob"), ("preference",)),
                                               (("project:p", "user:bob"), ("preference",
                                                                            "fact"))])
def test_ranked_is_the_stores_ranked_order(store: Path, scopes: tuple[str, ...],
                                           kinds: tuple[str, ...] | None,
                                           small_scope: int) -> None:
    with Memory(store, embedder=None, check_embedder=False) as mem:
        rows = mem.store.states(RecordFilter(scopes=scopes, kinds=kinds), limit=500,
                                ranked=True)
        want = [r.knowledge_id for r in rows if not r.state.sensitive][:40]
    with FastReader(store, small_scope=small_scope) as reader:
        got = reader.ranked(scopes, 40, kinds=kinds)
    assert [r.knowledge_id for r in got] == want
    assert all(not r.sensitive for r in got)


def test_user_scopes_by_loose_index_scan(store: Path) -> None:
    with FastReader(store) as reader:
        assert reader.scopes_with_prefix("user:") == ("user:alice", "user:bob")
        assert reader.scopes_with_prefix("nobody:") == ()


def _copy(store: Path, tmp_path: Path) -> Path:
    shutil.copytree(store.parent, tmp_path / "home")
    return tmp_path / "home" / "memory.db"


def _small_store(tmp_path: Path) -> tuple[Path, list[str]]:
    """A store of its own, for a test that writes (copies of the module's store share its
    store id, so one copy's write would move the witness past the others' logs)."""
    db = tmp_path / "own" / "memory.db"
    with Memory(db, embedder="hashing") as mem:
        outs = mem.remember_many([{"text": f"own note {i} about the planner",
                                   "scope": "project:p"} for i in range(20)])
    return db, [o.knowledge_id for o in outs]


def test_reading_never_writes_the_file(store: Path, tmp_path: Path) -> None:
    db = _copy(store, tmp_path)
    before = db.read_bytes()
    with FastReader(db) as reader:
        reader.ranked(("project:p",), 40)
        fast_search(reader, "planner cache", ("project:p",), 5)
        with pytest.raises(StoreError):
            reader._q("DELETE FROM records")
    assert db.read_bytes() == before


def test_edited_body_is_refused(store: Path, tmp_path: Path) -> None:
    db = _copy(store, tmp_path)
    with FastReader(db) as reader:
        kid = reader.ranked(("project:p",), 1)[0].knowledge_id
    raw = sqlite3.connect(db)
    body = raw.execute("SELECT body FROM records WHERE knowledge_id=?", (kid,)).fetchone()[0]
    raw.execute("UPDATE records SET body=? WHERE knowledge_id=?",
                (body.replace(b"Note", b"Nope"), kid))
    raw.commit()
    raw.close()
    with FastReader(db) as reader:
        shown = [r.knowledge_id for r in reader.ranked(("project:p",), 40)]
    assert kid not in shown and shown  # left out (quarantined); the others still shown


def test_row_without_change_log_entry_is_refused(store: Path, tmp_path: Path) -> None:
    db = _copy(store, tmp_path)
    with FastReader(db) as reader:
        kid = reader.ranked(("project:p",), 1)[0].knowledge_id
    raw = sqlite3.connect(db)
    raw.execute("DELETE FROM changes WHERE knowledge_id=?", (kid,))
    raw.commit()
    raw.close()
    with FastReader(db) as reader:
        shown = [r.knowledge_id for r in reader.ranked(("project:p",), 40)]
    assert kid not in shown and shown


def test_rollback_against_the_witness_is_refused(store: Path, tmp_path: Path) -> None:
    db = _copy(store, tmp_path)
    raw = sqlite3.connect(db)
    raw.execute("DELETE FROM changes WHERE seq = (SELECT MAX(seq) FROM changes)")
    raw.commit()
    raw.close()
    with pytest.raises(StoreIntegrityError, match="rolled back"):
        FastReader(db)


def test_stale_schema_and_garbage(store: Path, tmp_path: Path) -> None:
    db = _copy(store, tmp_path)
    raw = sqlite3.connect(db)
    raw.execute("PRAGMA user_version=4")
    raw.commit()
    raw.close()
    with pytest.raises(StaleStore):
        FastReader(db)
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not sqlite at all" * 100)
    with pytest.raises(StoreError, match="not a readable amcp store"):
        FastReader(junk)
    with pytest.raises(StoreError, match="no store"):
        FastReader(tmp_path / "absent.db")


def test_reads_a_store_in_a_directory_with_uri_characters(tmp_path: Path) -> None:
    home = tmp_path / "a b?c#d%e"
    with Memory(home / "memory.db") as mem:
        kid = mem.remember("The odd directory still opens read-only", scope="project:p")
    with FastReader(str(home / "memory.db")) as reader:
        assert [r.knowledge_id for r in reader.ranked(["project:p"], 5)] == [kid.knowledge_id]


def _edit(db: Path, *statements: str) -> None:
    raw = sqlite3.connect(db)
    for sql in statements:
        raw.execute(sql)
    raw.commit()
    raw.close()


@pytest.mark.parametrize("edit", [
    # a record row deleted, a live record hidden by its lifecycle column, its scope row
    # deleted (left out of every scoped search), a vector row deleted
    "DELETE FROM records WHERE rowid = (SELECT MAX(rowid) FROM records)",
    "UPDATE records SET lifecycle='invalidated' WHERE rowid = 5",
    "DELETE FROM record_scopes WHERE rid = 5",
    "DELETE FROM vectors WHERE rowid = 5",
])
def test_rows_that_do_not_add_up_to_the_signed_head_are_not_read_here(
        store: Path, tmp_path: Path, edit: str) -> None:
    """What no per-record check can see (a row that is gone is never read) is seen from the
    head's counts: the reader hands the open to Memory's full check."""
    db = _copy(store, tmp_path)
    _edit(db, edit)
    with pytest.raises(Unreconciled, match="differ from the signed head"):
        FastReader(db)


def test_a_head_without_its_mac_is_handed_to_the_full_check(store: Path,
                                                            tmp_path: Path) -> None:
    db = _copy(store, tmp_path)
    _edit(db, "UPDATE store_meta SET value = substr(value, 1, length(value) - 65)"
              " WHERE key = 'chain_head'")  # the head as written before the MAC existed
    with pytest.raises(Unreconciled, match="no MAC"):
        FastReader(db)
    with Memory(db) as mem:  # the signature still verifies: Memory opens it, unharmed
        assert not mem.warnings()


def test_a_forged_head_mac_is_not_believed(store: Path, tmp_path: Path) -> None:
    """An attacker who deletes a row and rewrites the head's counts cannot MAC them."""
    db = _copy(store, tmp_path)
    raw = sqlite3.connect(db)
    text = raw.execute("SELECT value FROM store_meta WHERE key='chain_head'").fetchone()[0]
    seq, hash_, sig, rows, digest, census, _mac = text.split()
    forged = " ".join([seq, hash_, sig, str(int(rows) - 1), digest, census, "0" * 64])
    raw.execute("DELETE FROM records WHERE rowid = (SELECT MAX(rowid) FROM records)")
    raw.execute("UPDATE store_meta SET value=? WHERE key='chain_head'", (forged,))
    raw.commit()
    raw.close()
    with pytest.raises(Unreconciled, match="no MAC"):
        FastReader(db)


def test_an_older_copy_of_a_row_is_left_out(tmp_path: Path) -> None:
    """A row from a backup carries a valid seal; it is not its record's latest state."""
    db, kids = _small_store(tmp_path)
    kid = kids[3]
    raw = sqlite3.connect(db)
    old = raw.execute("SELECT * FROM records WHERE knowledge_id=?", (kid,)).fetchone()
    raw.close()
    with Memory(db) as mem:
        mem.store.set_weight(kid, 0.2)  # a logged change: the row moves on
    cols = ",".join("?" * len(old))
    raw = sqlite3.connect(db)
    raw.execute(f"REPLACE INTO records VALUES ({cols})", old)  # the backup's row put back
    raw.commit()
    raw.close()
    with FastReader(db) as reader:
        shown = [r.knowledge_id for r in reader.ranked(("project:p",), 400)]
        assert kid not in shown and shown
        assert "older copy" in reader.quarantined()[kid]


def test_opens_while_another_process_writes_see_no_damage(tmp_path: Path) -> None:
    """The witness, the log tail and the head's counts are read in one snapshot: an open
    racing a writer never mistakes a commit in between for a rollback or a missing row."""
    import subprocess
    import sys
    import textwrap

    db, _kids = _small_store(tmp_path)
    script = textwrap.dedent(f"""
        import sys
        from amcp.memory import Memory
        with Memory({str(db)!r}, embedder="hashing") as mem:
            print("ready", flush=True)
            for i in range(150):
                mem.remember(f"concurrent note {{i}} about the planner", scope="project:p")
    """)
    writer = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                              text=True)
    assert writer.stdout is not None and writer.stdout.readline().strip() == "ready"
    opens = 0
    try:
        while writer.poll() is None:
            with FastReader(db) as reader:  # raises on any alarm, false or not
                reader.ranked(("project:p",), 5)
                assert not reader.quarantined()
            opens += 1
    finally:
        writer.wait(60)
        writer.stdout.close()
    assert writer.returncode == 0 and opens > 5


def test_a_store_upgraded_from_before_the_mac_gets_it_on_its_first_open(
        tmp_path: Path) -> None:
    """Migration 10 re-stores the signed head with its MAC, so a store only hooks read after
    an upgrade is not handed to the full check on every prompt."""
    db, kids = _small_store(tmp_path)
    _edit(db, "UPDATE store_meta SET value = substr(value, 1, length(value) - 65)"
              " WHERE key = 'chain_head'", "DROP INDEX vectors_count", "PRAGMA user_version=9")
    with pytest.raises(StaleStore):
        FastReader(db)
    with Memory(db, embedder="hashing"):
        pass
    with FastReader(db) as reader:
        assert {r.knowledge_id for r in reader.ranked(("project:p",), 40)} == set(kids)
