"""Dedup, R2 topic snapshots, R3 checkpoints and streaming over long transcripts."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from amcp.agent.capture import (
    CaptureConfig,
    CaptureEngine,
    Checkpoint,
    Snapshot,
)


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def test_session_dedup_on_normalised_text() -> None:
    engine = CaptureEngine(CaptureConfig(checkpoint_every=0, snapshots=False))
    assert len(engine.process(user("I prefer tabs over spaces."))) == 1
    assert engine.process(user("i PREFER tabs over   spaces!")) == []


def test_store_dedup_callback_is_asked_before_each_write() -> None:
    asked: list[str] = []

    def is_dup(text: str) -> bool:
        asked.append(text)
        return "tabs" in text

    engine = CaptureEngine(CaptureConfig(checkpoint_every=0, snapshots=False), is_duplicate=is_dup)
    assert engine.process(user("I prefer tabs over spaces.")) == []
    assert len(engine.process(user("I live in Lisbon."))) == 1
    assert asked == ["User prefers tabs over spaces", "User lives in Lisbon"]


def test_checkpoint_every_five_turns() -> None:
    engine = CaptureEngine(CaptureConfig(snapshots=False))
    marks = []
    for i in range(12):
        for o in engine.process(user(f"step {i}: we tuned the parser cache for module {i}")):
            if isinstance(o, Checkpoint):
                marks.append((o.start, o.end))
    assert marks == [(0, 4), (5, 9)]


def test_checkpoint_interval_is_configurable() -> None:
    engine = CaptureEngine(CaptureConfig(snapshots=False, checkpoint_every=3))
    outs = [o for i in range(9) for o in engine.process(user(f"turn {i} about parsers"))]
    cps = [o for o in outs if isinstance(o, Checkpoint)]
    assert [(c.start, c.end) for c in cps] == [(0, 2), (3, 5), (6, 8)]
    assert all(c.sentences for c in cps)


DB = ["The postgres migration needs a new index on the orders table.",
      "Index creation on orders locks the table during the migration.",
      "We could run the migration with concurrent index builds on postgres."]


def test_lexical_topic_switch_snapshots_previous_topic() -> None:
    engine = CaptureEngine(CaptureConfig(checkpoint_every=0))
    for t in DB:
        assert engine.process(user(t)) == []
    out = engine.process(user("Which hiking trails near Lisbon have ocean views in spring?"))
    [snap] = [o for o in out if isinstance(o, Snapshot)]
    assert snap.reason == "lexical" and (snap.start, snap.end) == (0, 2)
    assert "migration" in snap.keywords or "index" in snap.keywords
    assert snap.record_hint().x_kind == "topic_snapshot"


def test_same_topic_does_not_switch() -> None:
    engine = CaptureEngine(CaptureConfig(checkpoint_every=0))
    outs = [o for t in [*DB, "Concurrent index builds on the orders table avoid the migration lock."]
            for o in engine.process(user(t))]
    assert not any(isinstance(o, Snapshot) for o in outs)


def test_marker_switch_en_and_zh() -> None:
    for marker in ("By the way, can you check my flight?", "换个话题，周末去哪里玩？"):
        engine = CaptureEngine(CaptureConfig(checkpoint_every=0))
        for t in DB[:2]:
            engine.process(user(t))
        [snap] = [o for o in engine.process(user(marker)) if isinstance(o, Snapshot)]
        assert snap.reason == "marker"


def test_finish_flushes_current_topic() -> None:
    engine = CaptureEngine(CaptureConfig(checkpoint_every=0))
    outs = list(engine.process_transcript(user(t) for t in DB))
    assert isinstance(outs[-1], Snapshot) and outs[-1].reason == "flush"


def _turns(n: int) -> Iterator[dict[str, Any]]:
    lines = [("user", "Can you look at the failing test in the parser module?"),
             ("assistant", "The test fails because the fixture returns None."),
             ("user", "我们决定用Redis做缓存。"), ("assistant", "好的，我会调整配置。"),
             ("user", "I prefer short answers."), ("assistant", "Noted."),
             ("user", "The migration is done. What's next?"),
             ("assistant", "Next is the API cleanup in the billing service."),
             ("user", "By the way, the weekend hike starts at the north trail."),
             ("user", "ok thanks")]
    for i in range(n):
        role, text = lines[i % len(lines)]
        if i % 997 == 0:  # secrets are rare in real transcripts, and the costliest path
            role, text = "user", "my GitHub token is ghp_R8kd92LmQzXv71PpW0aTyUe5nBc4Hs3JfG6d"
        yield {"role": role, "content": f"{text} #{i}"}


@pytest.mark.slow
def test_100k_turn_stream_is_bounded() -> None:
    # Bounded memory: the engine's internal buffers never grow past their caps, and the
    # outputs are consumed as a stream (never materialised as a list).
    engine = CaptureEngine(CaptureConfig(dedup_capacity=1000))
    counts = {"capture": 0, "snapshot": 0, "checkpoint": 0}
    for out in engine.process_transcript(_turns(100_000)):
        counts[out.kind.value] += 1
    assert counts["checkpoint"] == 20_000
    # Repeated facts are deduplicated: each distinct one is captured once.
    assert counts["capture"] == 4 and counts["snapshot"] > 0
    assert len(engine._seen) <= 1000
    assert len(engine._topic._sentences) <= engine.config.topic.max_topic_sentences
