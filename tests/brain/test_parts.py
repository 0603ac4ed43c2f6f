"""A cold compile's read split over worker processes (amcp.brain.parts): the same bytes as a
read in one process, real workers (spawned processes that open the store themselves), and a
worker that cannot read handing its slice back."""

from __future__ import annotations

import itertools
import logging
from pathlib import Path
from typing import Any

import pytest
from tests.brain.conftest import NOW

from amcp.brain import parts
from amcp.brain.compile import compile_brain
from amcp.errors import StoreError
from amcp.memory import Memory
from amcp.store.url import parse_store_url


def files_of(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()}


@pytest.fixture
def split(monkeypatch: pytest.MonkeyPatch) -> list[parts.IdSlice]:
    """Split even a small store, and record the slices this process walked itself."""
    monkeypatch.setattr(parts, "MIN_RECORDS", 0)
    walked: list[parts.IdSlice] = []
    walk = parts.walk

    def spy(store: Any, part: parts.IdSlice, now: float) -> parts.SliceRead:
        walked.append(part)
        return walk(store, part, now)

    monkeypatch.setattr(parts, "walk", spy)
    return walked


def more(mem: Memory, n: int = 40) -> None:
    mem.remember_many([{"text": f"note {i} about the build cache", "scope": f"project:p{i % 3}"}
                       for i in range(n)])


def test_plan_cuts_the_id_space_into_contiguous_slices() -> None:
    assert parts.plan(1_000_000, 0) == [(None, None)]
    assert parts.plan(parts.MIN_RECORDS - 1, 3) == [(None, None)]
    for records, workers in ((100_000, 1), (1_000_000, 3), (parts.MIN_RECORDS, 8)):
        cut = parts.plan(records, workers)
        assert len(cut) == workers + 1
        assert cut[0][0] is None and cut[-1][1] is None
        assert all(a[1] == b[0] for a, b in itertools.pairwise(cut))
        bounds = [hi for _lo, hi in cut[:-1]]
        assert bounds == sorted(bounds) and len(set(bounds)) == len(bounds)
    # This process reads while the workers start: its slice is the larger one.
    (_, first), (second, _) = parts.plan(100_000, 1)
    assert first is not None and second == first and first > "K-80000000"


def test_split_read_gives_the_same_bytes(brain_mem: Memory, tmp_path: Path,
                                         split: list[parts.IdSlice],
                                         caplog: pytest.LogCaptureFixture) -> None:
    more(brain_mem)
    one = compile_brain(brain_mem, tmp_path / "one", now=NOW, workers=0)
    assert split == [(None, None)]
    split.clear()
    with caplog.at_level(logging.WARNING, logger="amcp.brain.parts"):
        two = compile_brain(brain_mem, tmp_path / "two", now=NOW, workers=2)
    assert not caplog.records  # both workers read their slices
    assert len(split) == 1 and split[0][1] is not None  # only the first slice was read here
    assert files_of(tmp_path / "one") == files_of(tmp_path / "two")
    assert one.records == two.records == 47
    assert "hunter2" not in (tmp_path / "two" / "REGION-user-alice.md").read_text()


def test_a_worker_that_cannot_open_the_store_hands_its_slice_back(
        brain_mem: Memory, tmp_path: Path, split: list[parts.IdSlice],
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    more(brain_mem)
    compile_brain(brain_mem, tmp_path / "one", now=NOW, workers=0)
    split.clear()
    real = parts.Opener.of

    def elsewhere(mem: Memory) -> parts.Opener:  # a store id the worker will not find
        o = real(mem)
        return parts.Opener(o.location, o.key_dir, o.witness_dirs, "S-another-store")

    monkeypatch.setattr(parts.Opener, "of", staticmethod(elsewhere))
    with caplog.at_level(logging.WARNING, logger="amcp.brain.parts"):
        compile_brain(brain_mem, tmp_path / "two", now=NOW, workers=1)
    assert "reading them here" in caplog.text and "another store" in caplog.text
    assert len(split) == 2  # its own slice, then the worker's
    assert files_of(tmp_path / "one") == files_of(tmp_path / "two")


def test_a_worker_never_creates_a_store(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "memory.db"
    opener = parts.Opener(parse_store_url(str(missing)), tmp_path / "keys", (tmp_path / "w",),
                          "S-x")
    with pytest.raises(StoreError, match="no store to read"):
        opener.open()
    assert not missing.exists()


def test_an_injected_store_is_read_here(tmp_path: Path, split: list[parts.IdSlice],
                                        brain_mem: Memory) -> None:
    """A Memory over a store object it did not open itself (tests, embedders of amcp) has a
    location that is not that store: the worker finds no such store, and the read is
    done here, complete."""
    other = Memory(tmp_path / "elsewhere" / "memory.db", embedder=None, check_embedder=False,
                   store=brain_mem.store)
    rep = compile_brain(other, tmp_path / "b", now=NOW, workers=1)
    assert rep.records == 7 and len(split) == 2


@pytest.mark.postgres
def test_split_and_warm_compiles_on_postgres(postgres_db: str, tmp_path: Path,
                                             split: list[parts.IdSlice]) -> None:
    """The worker opens PostgreSQL by its DSN; the warm compile reads every state in one
    call (``Store.states`` with no limit), which PostgreSQL refused before."""
    with Memory(postgres_db, key_dir=tmp_path / "keys", embedder="hashing",
                witness_dirs=[tmp_path / "w"]) as mem:
        more(mem, 30)
        one = compile_brain(mem, tmp_path / "one", now=NOW, workers=0)
        two = compile_brain(mem, tmp_path / "two", now=NOW, workers=1)
        assert len(split) == 2 and split[1][1] is not None  # no fallback: the worker read
        assert files_of(tmp_path / "one") == files_of(tmp_path / "two")
        warm = compile_brain(mem, tmp_path / "two", now=NOW)
        assert one.records == two.records == warm.records == 30
        assert files_of(tmp_path / "one") == files_of(tmp_path / "two")


def test_workers_are_the_cli_default_not_the_library_default(
        brain_mem: Memory, tmp_path: Path, split: list[parts.IdSlice],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A library call starts no process (under spawn a worker imports the caller's main
    module); ``amcp brain compile`` takes one worker per spare core, or ``--workers``."""
    from typer.testing import CliRunner

    from amcp.cli.app import app

    compile_brain(brain_mem, tmp_path / "lib", now=NOW)
    assert split == [(None, None)]
    monkeypatch.setattr(parts, "default_workers", lambda: 1)
    path = str(brain_mem.path)
    brain_mem.close()
    for extra, walks in (([], 1), (["--workers", "0"], 1)):
        split.clear()
        res = CliRunner().invoke(app, ["brain", "compile", str(tmp_path / f"cli{len(extra)}"),
                                       "--store", path, "--now", "2026-12-01T00:00:00Z",
                                       *extra])
        assert res.exit_code == 0, res.output
        assert len(split) == walks
        assert (split[0][1] is None) == bool(extra)  # split: this process's slice is bounded
    assert files_of(tmp_path / "lib") == files_of(tmp_path / "cli0") == files_of(
        tmp_path / "cli2")
    res = CliRunner().invoke(app, ["brain", "compile", str(tmp_path / "x"), "--store", path,
                                   "--workers", "-1"])
    assert res.exit_code != 0 and "-1" in res.output


class HungOpener(parts.Opener):
    """An opener whose worker never answers (a server that does not, a held lock)."""

    __slots__ = ()

    def open(self) -> Any:
        import time

        time.sleep(60)
        return super().open()


def worker_slice_ids(mem: Memory, workers: int = 1) -> list[str]:
    """Ids in the workers' slices of ``mem`` (as ``plan`` cuts this store)."""
    from amcp.brain.entries import ALL_RECORDS

    first_end = parts.plan(mem.store.count(ALL_RECORDS), workers)[0][1]
    assert first_end is not None
    return sorted(i.knowledge_id for i in mem.store.states(ALL_RECORDS, limit=-1)
                  if i.knowledge_id >= first_end)


def test_a_hung_worker_is_ended_and_its_slice_read_here(
        brain_mem: Memory, tmp_path: Path, split: list[parts.IdSlice],
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    more(brain_mem)
    compile_brain(brain_mem, tmp_path / "one", now=NOW)
    real = parts.Opener.of
    monkeypatch.setattr(parts.Opener, "of", staticmethod(
        lambda mem: HungOpener(*(getattr(real(mem), f) for f in parts.Opener.__slots__))))
    monkeypatch.setattr(parts, "WAIT_S", 1.0)
    monkeypatch.setattr(parts, "WAIT_FACTOR", 0)
    with caplog.at_level(logging.WARNING, logger="amcp.brain.parts"):
        compile_brain(brain_mem, tmp_path / "two", now=NOW, workers=1)
    assert "no answer within 1 s" in caplog.text and "reading them here" in caplog.text
    assert files_of(tmp_path / "one") == files_of(tmp_path / "two")


def test_quarantine_crosses_the_process_boundary(
        brain_mem: Memory, tmp_path: Path, split: list[parts.IdSlice],
        caplog: pytest.LogCaptureFixture) -> None:
    """A worker's store checks what it reads, but knows nothing of what this process
    quarantined before; and what a worker quarantines must be said here. Purged and
    sensitive records in a worker's slice come out as in one process."""
    import sqlite3

    more(brain_mem)
    theirs = worker_slice_ids(brain_mem)
    assert len(theirs) >= 3
    brain_mem.purge(theirs[0])
    brain_mem.remember("the worker slice's secret is swordfish", sensitive=True)
    with sqlite3.connect(brain_mem.path) as db:  # edited outside amcp: its seal fails
        db.execute("UPDATE records SET weight = 0.42 WHERE knowledge_id=?", (theirs[1],))
    known_bad = theirs[2]  # quarantined here only, as a full verify does for a bad signature
    brain_mem.store.verifier.quarantine_add(  # type: ignore[attr-defined]
        known_bad, "its body does not verify: bad signature (test)")
    one = compile_brain(brain_mem, tmp_path / "one", now=NOW)
    with caplog.at_level(logging.WARNING, logger="amcp.brain.parts"):
        two = compile_brain(brain_mem, tmp_path / "two", now=NOW, workers=1)
    assert "reading them here" not in caplog.text  # the worker did read its slice
    assert "left out 1 record(s)" in caplog.text and theirs[1] in caplog.text
    weights = (tmp_path / "two" / "weights.json").read_text()
    assert theirs[0] not in weights and theirs[1] not in weights
    assert known_bad not in weights
    assert one.records == two.records
    assert files_of(tmp_path / "one") == files_of(tmp_path / "two")
    assert "swordfish" not in "".join(p.read_text() for p in (tmp_path / "two").glob("*.md"))


def test_a_worker_count_out_of_range_is_refused(brain_mem: Memory, tmp_path: Path) -> None:
    from amcp.errors import ValidationError

    with pytest.raises(ValidationError, match="workers: 0 to 8"):
        compile_brain(brain_mem, tmp_path / "b", now=NOW, workers=9)
    assert not (tmp_path / "b" / "INDEX.md").exists()
    compile_brain(brain_mem, tmp_path / "b", now=NOW)
    with pytest.raises(ValidationError, match="workers: 0 to 8"):  # warm too
        compile_brain(brain_mem, tmp_path / "b", now=NOW, workers=-1)
