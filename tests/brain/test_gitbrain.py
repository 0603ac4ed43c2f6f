from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from amcp.amf.types import Lifecycle
from amcp.brain.errors import BrainError
from amcp.brain.gitbrain import init, sync
from amcp.brain.mdrecord import read
from amcp.memory import Memory
from amcp.store.base import ChangeOp, RecordFilter

ID = ("-c", "user.name=t", "-c", "user.email=t@t.invalid")


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *ID, *args], cwd=cwd, check=True, capture_output=True,
                          text=True).stdout


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[Memory]:
    m = Memory(tmp_path / "s" / "memory.db", embedder=None, check_embedder=False)
    for i in range(4):
        m.remember(f"fact number {i}", scope="project:amcp", kind="learning")
    m.remember("a secret token abc", scope="project:amcp", sensitive=True)
    yield m
    m.close()


def files(repo: Path) -> list[Path]:
    return sorted((repo / "memories").rglob("*.md"))


def ops(mem: Memory) -> list[ChangeOp]:
    return [c.op for c in mem.store.changes(0, limit=10_000)]


def test_export_writes_one_file_per_active_memory(mem: Memory, tmp_path: Path) -> None:
    init(tmp_path / "repo")
    rep = sync(mem, tmp_path / "repo")
    found = files(tmp_path / "repo")
    assert rep.written == 4 and len(found) == 4 and len(rep.commits) == 1
    doc = read(found[0].read_text(), "f")
    assert doc.knowledge_id and doc.text.startswith("fact number")
    assert "secret" not in "".join(p.read_text() for p in found)
    assert git(tmp_path / "repo", "status", "--porcelain") == ""
    again = sync(mem, tmp_path / "repo")  # idempotent: nothing to do, nothing committed
    assert again.commits == [] and again.written == 0


def test_edit_delete_add_become_store_operations(mem: Memory, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    init(repo)
    sync(mem, repo)
    before = ops(mem)
    first, second, third, _ = files(repo)
    edited_id = read(first.read_text(), "f").knowledge_id
    first.write_text(first.read_text().replace("fact number", "FACT NUMBER")
                     .replace('kind: "learning"', 'kind: "pitfall"'))
    deleted_id = read(second.read_text(), "f").knowledge_id
    second.unlink()
    third.write_text(third.read_text() + "\n")  # layout only: not a new version
    (repo / "memories" / "project-amcp" / "hand.md").write_text("Written by a person\n")
    rep = sync(mem, repo)
    assert len(rep.superseded) == 1 and rep.superseded[0][0] == edited_id
    assert rep.invalidated == [deleted_id] and len(rep.remembered) == 1
    assert ops(mem)[len(before):].count(ChangeOp.SUPERSEDE) == 1
    new = mem.get(rep.superseded[0][1]).record
    assert new is not None and new.text.startswith("FACT NUMBER") and new.kind == "pitfall"
    assert mem.get(deleted_id).state.lifecycle is Lifecycle.INVALIDATED
    assert "deleted from the git brain" in (mem.get(deleted_id).state.reason or "")
    hand = mem.get(rep.remembered[0]).record
    assert hand is not None and hand.meta.project_scope == ("project:amcp",)
    names = {p.name for p in files(repo)}
    assert "hand.md" not in names and f"{rep.remembered[0][:14]}.md" in names
    assert git(repo, "status", "--porcelain") == ""
    assert mem.store.verify(full=True).ok


def test_broken_front_matter_is_reported_and_kept(mem: Memory, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    init(repo)
    sync(mem, repo)
    target = files(repo)[0]
    broken = "---\ntype: [unclosed\n---\nmy careful edit\n"
    target.write_text(broken)
    active = mem.store.count(RecordFilter())
    rep = sync(mem, repo)
    assert len(rep.problems) == 1 and "not valid YAML" in rep.problems[0]
    assert target.read_text() == broken  # never overwritten
    assert mem.store.count(RecordFilter()) == active and rep.superseded == []
    rep = sync(mem, repo)  # still reported until fixed
    assert target.read_text() == broken and len(rep.problems) == 1
    target.write_text("---\ntype: KT-FACT\n---\nmy careful edit\n")
    rep = sync(mem, repo)
    assert rep.problems == [] and len(rep.superseded) == 1


def test_remote_round_trip_and_conflict(mem: Memory, tmp_path: Path) -> None:
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(remote))
    repo = tmp_path / "repo"
    init(repo, remote=str(remote))
    assert sync(mem, repo).pushed
    other = tmp_path / "other"  # a person's clone, no amcp
    git(tmp_path, "clone", "-q", str(remote), str(other))
    name = files(repo)[0].relative_to(repo).as_posix()
    base_id = read((repo / name).read_text(), "f").knowledge_id
    theirs = (other / name).read_text().replace("fact number", "remote says")
    (other / name).write_text(theirs)
    git(other, "commit", "-qam", "remote edit")
    git(other, "push", "-q", "origin", "HEAD:main")
    (repo / name).write_text((repo / name).read_text().replace("fact number", "local says"))
    rep = sync(mem, repo)
    assert rep.pulled and rep.pushed and rep.conflicts, rep
    texts = []
    kid = base_id
    while kid:  # walk the supersede chain: base → ours → theirs, nothing lost
        item = mem.get(kid)
        assert item.record is not None
        texts.append(item.record.text)
        kid = item.state.superseded_by
    assert texts[0].startswith("fact number") and texts[1].startswith("local says")
    assert texts[2].startswith("remote says") and len(texts) == 3
    git(other, "pull", "-q", "origin", "main")
    assert any("remote says" in p.read_text() for p in files(other))
    assert mem.store.verify(full=True).ok


def test_unfinished_merge_and_not_a_repo(mem: Memory, tmp_path: Path) -> None:
    with pytest.raises(BrainError, match="not a git repository"):
        sync(mem, tmp_path / "nowhere")
    repo = tmp_path / "repo"
    init(repo)
    sync(mem, repo)
    (repo / ".git" / "MERGE_HEAD").write_text(git(repo, "rev-parse", "HEAD"))
    with pytest.raises(BrainError, match="merge in progress"):
        sync(mem, repo)
