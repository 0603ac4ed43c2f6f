"""Messy data: timestamps, classification, logs, duplicates, foreign vectors, secrets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.portability.kit import run, texts

from amcp.errors import ValidationError
from amcp.memory import Memory
from amcp.portability.classify import classify
from amcp.portability.model import Kind
from amcp.portability.timestamps import normalise_when
from amcp.store.base import RecordFilter

WHEN = "2024-03-05T14:05:00Z"


@pytest.mark.parametrize(
    ("value", "kwargs"),
    [
        (1709647500, {}),  # epoch seconds
        (1709647500000, {}),  # milliseconds
        (1709647500000000, {}),  # microseconds
        ("1709647500", {}),
        ("2024-03-05T14:05:00Z", {}),
        ("2024-03-05T15:05:00+01:00", {}),
        ("2024-03-05 14:05:00+00:00", {}),
        ("Tue, 05 Mar 2024 14:05:00 +0000", {}),
        ("2024-03-05T14:05:00", {"assume_tz": "UTC"}),
        ("2024-03-05 15:05", {"assume_tz": "Europe/Paris"}),
        ("05.03.2024 14:05", {"assume_tz": "UTC"}),
        ("03/05/2024 2:05 PM", {"assume_tz": "UTC"}),  # US order by default
        ("05/03/2024 14:05", {"assume_tz": "UTC", "day_first": True}),
        ("Mar 5, 2024 2:05 PM", {"assume_tz": "UTC"}),
        ("5 March 2024 14:05", {"assume_tz": "UTC"}),
    ],
)
def test_timestamp_spellings(value: object, kwargs: dict[str, object]) -> None:
    assert normalise_when(value, "item", **kwargs) == WHEN  # type: ignore[arg-type]


def test_naive_time_without_zone_is_a_clear_error() -> None:
    with pytest.raises(ValidationError, match="--assume-tz") as exc:
        normalise_when("2024-03-05 14:05:00", "f.csv: row 7: created_at")
    assert exc.value.field == "f.csv: row 7: created_at"


@pytest.mark.parametrize("value", ["30000-01-01T00:00:00Z", 1e20 * 1e9, "1969-12-31T00:00:00Z"])
def test_out_of_range_years_refused(value: object) -> None:
    with pytest.raises(ValidationError):
        normalise_when(value, "item")


@pytest.mark.parametrize(
    ("text", "hint", "role", "kind"),
    [
        ("ERROR 2024-03-01 db connection refused", None, None, Kind.LOG),
        ("2024-03-01T10:00:00Z INFO worker started", "preference", None, Kind.LOG),
        ('{"level": "info", "msg": "user prefers dark mode"}', None, None, Kind.LOG),
        ("level=warn msg=retrying", None, None, Kind.LOG),
        ("anything at all", None, "tool", Kind.LOG),
        ("Alice prefers tabs", None, None, Kind.PREFERENCE),
        ("Remind me to call the bank", None, None, Kind.TASK),
        ("TODO: rotate keys", None, None, Kind.TASK),
        ("We deployed v2 yesterday", None, None, Kind.EVENT),
        ("The office is in Lisbon", None, None, Kind.FACT),
        ("The office is in Lisbon", "todo", None, Kind.TASK),
        ("Error handling is done in the gateway", None, None, Kind.FACT),
        ("Remind  jamal to renew the certificate", None, None, Kind.TASK),
        ('10.0.0.1 - - [05/mar/2024:14:05:00 +0000] "get /api HTTP/1.1" 200 5', None, None,
         Kind.LOG),
        ("LEVEL=INFO MSG=done", "preference", None, Kind.LOG),
    ],
)
def test_classification_rules(text: str, hint: str | None, role: str | None, kind: Kind) -> None:
    assert classify(text, hint, role)[0] is kind


def _table(tmp_path: Path, rows: list[dict[str, object]]) -> Path:
    f = tmp_path / "mixed.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return f


ROWS = [
    {"text": "Erin prefers window seats", "ts": 1709647500, "user": "erin"},
    {"text": "INFO sync finished in 2.1s", "ts": "2024-03-05T14:06:00Z", "user": "erin"},
    {"text": "erin prefers window seats.", "ts": 1709647600000, "user": "erin"},  # duplicate
    {"text": "Remind Erin to book the hotel", "ts": "05.03.2024 16:00", "user": "erin"},
]


def test_logs_kept_low_weight_never_recalled_as_preferences(mem: Memory, tmp_path: Path) -> None:
    res = run(mem, _table(tmp_path, ROWS), assume_tz="UTC",
              mapping={"text": "text", "created_at": "ts", "scope": "user"})
    assert res.ok
    assert res.health.decisions["merge"] == 1  # the duplicate, case and "." aside
    logs = mem.list_records(RecordFilter(kinds=("log",)))
    assert [r.record.text for r in logs] == ["INFO sync finished in 2.1s"]
    assert logs[0].record.core.confidence < 0.5
    prefs = mem.recall("sync finished preference", kinds=["preference"], scope="user:erin")
    assert all(h.item.record.kind == "preference" for h in prefs.hits)
    assert "INFO sync finished in 2.1s" not in [h.item.record.text for h in prefs.hits]


def test_drop_logs(mem: Memory, tmp_path: Path) -> None:
    res = run(mem, _table(tmp_path, ROWS), assume_tz="UTC", drop_logs=True,
              mapping={"text": "text", "created_at": "ts"})
    assert res.ok and "INFO sync finished in 2.1s" not in texts(mem)
    assert any("--drop-logs" in r for r, _n in res.health.reasons)


def test_naive_times_need_assume_tz_and_nothing_is_written(mem: Memory, tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="mixed.jsonl: line 4") as exc:
        run(mem, _table(tmp_path, ROWS), mapping={"text": "text", "created_at": "ts"})
    assert "--assume-tz" in str(exc.value)
    assert mem.stats().records == 0


def test_duplicates_across_sources_and_runs_merge(mem: Memory, tmp_path: Path) -> None:
    a = tmp_path / "a.csv"
    a.write_text("text,created_at\nFrank likes jazz,1709647500\n")
    b = tmp_path / "b.jsonl"
    b.write_text(json.dumps({"content": "frank likes JAZZ", "created_at": 1709650000}) + "\n")
    assert run(mem, a).created == 1
    res = run(mem, b)
    assert res.created == 0 and res.health.decisions["merge"] == 1
    assert texts(mem) == ["Frank likes jazz"]


def test_foreign_vectors_discarded_and_reembedded(mem: Memory, tmp_path: Path) -> None:
    rows = [{"text": "Gina uses a standing desk", "created_at": 1709647500,
             "embedding": [0.1] * 1536, "embedding_model": "text-embedding-3-small"},
            {"text": "Gina owns a cat", "created_at": 1709647501, "embedding": [0.2] * 8,
             "embedding_model": "old-model"}]
    res = run(mem, _table(tmp_path, rows))
    assert dict(res.health.vectors_discarded) == {"text-embedding-3-small": 1, "old-model": 1}
    stats = mem.stats()
    assert stats.vectors == 2 and stats.embedding_model == mem.embedder.model_id  # type: ignore[union-attr]
    for r in mem.list_records(limit=10):
        assert "embedding" not in json.dumps(r.record.to_dict()["vendor_extensions"])


def test_secrets_stored_encrypted_and_verified(mem: Memory, tmp_path: Path) -> None:
    secret = "ghp_" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAB7C"
    rows = [{"text": f"deploy token for CI: token={secret}", "created_at": 1709647500}]
    res = run(mem, _table(tmp_path, rows))
    assert res.ok and res.health.secrets == 1
    five = res.verification.checks[4]  # type: ignore[union-attr]
    assert five.ok and "1 secrets checked" in five.detail
    stored = mem.list_records(limit=5)[0]
    assert stored.state.sensitive and secret not in stored.record.text
    assert secret not in Path(mem.path).read_bytes().decode("latin-1")
    assert secret not in res.health.to_markdown() + res.health.to_json()


def test_norm_is_the_character_rule() -> None:
    """``plan.norm`` (one regex pass) keeps exactly the letters, digits and whitespace that
    the per-character rule it replaced kept, for any text."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from amcp.portability.plan import norm

    def by_char(text: str) -> str:
        return " ".join("".join(c for c in text.casefold() if c.isalnum() or c.isspace())
                        .split())

    @settings(max_examples=400, deadline=None)
    @given(st.text())
    def same(text: str) -> None:
        assert norm(text) == by_char(text)

    same()
    assert norm("Alice_prefers  DARK-roast! 咖啡") == "aliceprefers darkroast 咖啡"
