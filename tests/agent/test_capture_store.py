"""The capture adapter: captures → records (scopes, importance, x-kind, sensitivity, dedup)
and the ``amcp capture`` command over a transcript."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from amcp.agent.capture_store import CaptureScopes, CaptureWriter, default_scopes
from amcp.memory import Memory

SECRET = "sk-proj-Q7x9Lm2Vb8Nc4Rt6Yh1Kp3Wd5Fs0Gj"
SCOPES = CaptureScopes(user="user:alice", project="project:proj")


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Memory]:
    m = Memory(tmp_path / "m.db", embedder="hashing")
    yield m
    m.close()


def test_credential_is_encrypted_and_redacted_on_recall(memory: Memory) -> None:
    writer = CaptureWriter.for_memory(memory, scopes=SCOPES, session="S-1")
    stored = writer.feed({"role": "user", "content": f"my openai key is {SECRET}"})
    cred = [s for s in stored if s.x_kind == "credential"]
    assert len(cred) == 1 and cred[0].sensitive and cred[0].created
    assert SECRET not in cred[0].text
    kid = cred[0].knowledge_id
    assert kid is not None
    # at rest: the raw bytes of the store never hold the secret
    raw = b"".join(p.read_bytes() for p in memory.path.parent.glob("m.db*"))
    assert SECRET.encode() not in raw
    hit = memory.recall("openai key", k=3)
    assert hit.records and SECRET not in json.dumps(hit.records[0].to_dict())
    revealed = memory.read([kid], reveal=True)[0].record
    assert revealed is not None and revealed.core.object == SECRET
    assert revealed.meta.project_scope == ("user:alice",)
    assert revealed.vendor_extensions["x-importance"] == 5
    assert revealed.kind == "credential"
    # the same key again is the same record, not a second copy
    again = CaptureWriter.for_memory(memory, scopes=SCOPES).feed(
        {"role": "user", "content": f"my openai key is {SECRET}"})
    assert [(s.knowledge_id, s.created) for s in again if s.x_kind == "credential"] == [(kid, False)]


def test_mapping_scopes_importance_kind_and_dedup(memory: Memory) -> None:
    writer = CaptureWriter.for_memory(memory, scopes=SCOPES)
    out = writer.feed({"role": "user", "content": "I prefer tabs over spaces. "
                       "We decided to use PostgreSQL for the store."})
    kinds = {s.x_kind: s for s in out}
    assert kinds["preference"].scope == "user:alice"
    assert kinds["decision"].scope == "project:proj"
    rec = memory.get(kinds["preference"].knowledge_id or "").record
    assert rec is not None
    assert rec.kind == "preference" and "importance:4" in rec.tags
    assert rec.vendor_extensions["x-importance"] == 4
    # a new engine (another session) finds the text in the store: no second write
    other = CaptureWriter.for_memory(memory, scopes=SCOPES)
    assert [s.x_kind for s in other.feed({"role": "user",
                                          "content": "I prefer tabs over spaces."})] == []


def test_default_scopes_use_login_and_project() -> None:
    s = default_scopes(project="project:x", user=None)
    assert s.user.startswith("user:") or s.user == "*"
    assert s.project == "project:x"
    assert default_scopes().project == "*"


def test_dry_run_writes_nothing(memory: Memory) -> None:
    out = CaptureWriter(None, scopes=SCOPES).feed({"role": "user", "content": "I prefer vim"})
    assert out and all(s.knowledge_id is None for s in out)
    assert memory.stats().records == 0


def _transcript(path: Path, n: int) -> Path:
    """Mostly chatter on one topic, a rule every 500 turns: what a long session looks like."""
    with path.open("w", encoding="utf-8") as fh:
        for i in range(n):
            if i % 2:
                fh.write(json.dumps({"role": "assistant", "content": "Okay, done."}) + "\n")
                continue
            text = (f"From now on, always check parser case {i} first." if i % 500 == 0
                    else f"Let's look at the parser tests again, case {i}.")
            fh.write(json.dumps({"type": "user", "message": {"role": "user",
                                                             "content": text}}) + "\n")
    return path


def test_cli_capture_dry_run_and_store(tmp_path: Path) -> None:
    import typer

    from amcp.cli.hooks_cmd import capture

    app = typer.Typer()
    app.command()(capture)
    tr = tmp_path / "t.jsonl"
    tr.write_text("\n".join(json.dumps(t) for t in [
        {"role": "user", "content": f"I prefer tabs. My token is {SECRET}"},
        {"role": "assistant", "content": "Noted."},
    ]) + "\n", encoding="utf-8")
    store = tmp_path / "home" / "memory.db"
    runner = CliRunner()
    dry = runner.invoke(app, [str(tr), "--dry-run", "--store", str(store)])
    assert dry.exit_code == 0, dry.output
    assert "would store" in dry.output and SECRET not in dry.output
    assert not store.exists()
    res = runner.invoke(app, [str(tr), "--json", "--store", str(store), "-e", "hashing",
                              "--scope", "project:p"])
    assert res.exit_code == 0, res.output
    lines = [json.loads(x) for x in res.output.strip().split("\n") if x.startswith('{"')]
    assert {d["x_kind"] for d in lines} >= {"preference", "credential"}
    assert all(d["scope"] == "project:p" for d in lines)
    assert SECRET not in res.output
    again = runner.invoke(app, [str(tr), "--store", str(store), "-e", "hashing",
                                "--scope", "project:p"])
    assert again.exit_code == 0 and "0 stored" in again.output


def test_cli_capture_reports_a_bad_line(tmp_path: Path) -> None:
    import typer

    from amcp.cli.hooks_cmd import capture

    app = typer.Typer()
    app.command()(capture)
    tr = tmp_path / "bad.jsonl"
    tr.write_text('{"role": "user", "content": "hi"}\n{oops\n', encoding="utf-8")
    res = CliRunner().invoke(app, [str(tr), "--dry-run"])
    assert res.exit_code == 1
    assert "line 2" in res.output


@pytest.mark.slow
def test_100k_turn_transcript_streams_in_bounded_memory(tmp_path: Path) -> None:
    import resource

    from amcp.agent.capture import CaptureConfig, read_transcript

    tr = _transcript(tmp_path / "big.jsonl", 100_000)
    with Memory(tmp_path / "m.db", embedder="hashing") as mem:
        writer = CaptureWriter.for_memory(mem, scopes=SCOPES,
                                          config=CaptureConfig(checkpoint_every=0))
        started = time.perf_counter()
        count = 0
        rss_early = 0
        for n, _ in enumerate(read_transcript(tr)):
            if n == 10_000:
                rss_early = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                break
        for _ in writer.run(read_transcript(tr)):
            count += 1
        rss_end = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
        elapsed = time.perf_counter() - started
        assert count >= 100
        assert mem.stats().records >= 100
        # the whole transcript is ~6 MB of JSON; holding it (or every turn) would show
        assert rss_end - rss_early < 64 * 1024, (rss_early, rss_end)
        print(f"100k turns: {count} captures in {elapsed:.1f}s, "
              f"max RSS {rss_end / 1024:.0f} MiB")
