"""Bad input: a clear error naming file, line or item, and nothing half-written."""

from __future__ import annotations

import io
import json
import tracemalloc
import zipfile
from pathlib import Path

import pytest
from tests.portability.kit import FIXTURES, run

from amcp.errors import ValidationError
from amcp.memory import Memory
from amcp.portability.api import plan_import
from amcp.portability.model import ImportOptions


def _nothing_written(mem: Memory) -> None:
    assert mem.stats().records == 0


def test_unknown_format(mem: Memory, tmp_path: Path) -> None:
    f = tmp_path / "blob.bin"
    f.write_bytes(b"\x00\x01binary")
    with pytest.raises(ValidationError, match="unknown format"):
        run(mem, f)
    _nothing_written(mem)


def test_unknown_and_wrong_from(mem: Memory) -> None:
    with pytest.raises(ValidationError, match="unknown source 'zep'"):
        run(mem, FIXTURES / "mem0_get_all.json", kind="zep")
    with pytest.raises(ValidationError, match="not a Letta agent file"):
        run(mem, FIXTURES / "mem0_get_all.json", kind="letta")
    with pytest.raises(ValidationError, match=r"langgraph_store.db: line 1: invalid UTF-8"):
        run(mem, FIXTURES / "langgraph_store.db", kind="mcp-memory")
    _nothing_written(mem)


def test_half_one_format(mem: Memory, tmp_path: Path) -> None:
    lines = (FIXTURES / "mcp_memory.jsonl").read_text().splitlines()
    lines.insert(3, json.dumps({"id": "x", "memory": "a mem0 item", "user_id": "u"}))
    f = tmp_path / "memory.jsonl"
    f.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValidationError, match=r"memory.jsonl: line 4: not an MCP memory line"):
        run(mem, f)
    _nothing_written(mem)


def test_invalid_utf8_names_the_line(mem: Memory, tmp_path: Path) -> None:
    f = tmp_path / "t.jsonl"
    f.write_bytes(b'{"text": "ok", "created_at": 1}\n{"text": "caf\xe9"}\n')
    with pytest.raises(ValidationError, match=r"t.jsonl: line 2: invalid UTF-8 at byte 13"):
        run(mem, f)
    _nothing_written(mem)


def test_cut_line_refused_before_anything_is_written(mem: Memory, tmp_path: Path) -> None:
    rows = [json.dumps({"text": f"note {n}", "created_at": 1709647500 + n}) for n in range(600)]
    f = tmp_path / "t.jsonl"
    f.write_text("\n".join(rows) + "\n" + rows[0][:15] + "\n")  # the last line is cut
    with pytest.raises(ValidationError, match=r"line 601: not JSON .*cut"):
        run(mem, f, batch=50)
    _nothing_written(mem)  # not the 600 lines before it


def test_year_30000(mem: Memory, tmp_path: Path) -> None:
    f = tmp_path / "t.jsonl"
    f.write_text(json.dumps({"text": "far future", "created_at": "30000-01-01T00:00:00Z"}) + "\n")
    with pytest.raises(ValidationError, match=r"t.jsonl: line 1: created_at.*9999"):
        run(mem, f)
    _nothing_written(mem)


def test_zip_bomb_refused(mem: Memory, tmp_path: Path) -> None:
    f = tmp_path / "export.zip"
    with zipfile.ZipFile(f, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("conversations.json", b"[" + b" " * (64 * 1024 * 1024) + b"]")
    assert f.stat().st_size < 200_000
    with pytest.raises(ValidationError, match=r"export.zip!conversations.json: .*zip bomb"):
        run(mem, f)
    _nothing_written(mem)


def test_zip_archive_is_read(mem: Memory, tmp_path: Path) -> None:
    f = tmp_path / "chatgpt.zip"
    with zipfile.ZipFile(f, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for p in (FIXTURES / "chatgpt_export").iterdir():
            zf.write(p, p.name)
    res = run(mem, f)
    assert res.ok and res.created == 6


def test_big_json_document_refused_with_advice(mem: Memory) -> None:
    with pytest.raises(ValidationError, match="JSON Lines"):
        run(mem, FIXTURES / "mem0_get_all.json", max_json_bytes=100)


def test_tombstone_with_a_non_knowledge_id(mem: Memory, tmp_path: Path) -> None:
    from amcp.portability.amcp_ndjson import run_amcp_import

    buf = io.StringIO()
    mem.remember("kept", scope="x")
    mem.export(buf)
    lines = buf.getvalue().splitlines()
    lines.insert(2, json.dumps({"tombstone": {"knowledge_id": "../../etc/passwd"}}))
    f = tmp_path / "e.ndjson"
    f.write_text("\n".join(lines) + "\n")
    with Memory(tmp_path / "o" / "m.db", embedder="hashing") as other:
        with pytest.raises(ValidationError, match="line 3: tombstone knowledge_id"):
            run_amcp_import(other, f)
        assert other.stats().records == 0


def test_truncated_amcp_export_refused_whole(mem: Memory, tmp_path: Path) -> None:
    from amcp.portability.amcp_ndjson import run_amcp_import

    for n in range(5):
        mem.remember(f"fact {n}", scope="x")
    buf = io.StringIO()
    mem.export(buf)
    f = tmp_path / "e.ndjson"
    f.write_text("\n".join(buf.getvalue().splitlines()[:-2]) + "\n")  # cut before the end
    with Memory(tmp_path / "o" / "m.db", embedder="hashing") as other:
        with pytest.raises(ValidationError, match="no end marker"):
            run_amcp_import(other, f)
        assert other.stats().records == 0


def test_large_file_streams_in_bounded_memory(mem: Memory, tmp_path: Path) -> None:
    """Planning memory does not grow with the file: 10x the lines, about the same peak.
    (The 2 GB case is this at scale; lines repeat so the dedup keys stay few.)"""
    line = json.dumps({"text": "the same log line " + "x" * 400, "created_at": 1709647500})

    def peak(n: int) -> int:
        f = tmp_path / f"big{n}.jsonl"
        f.write_text((line + "\n") * n)
        tracemalloc.start()
        health = plan_import(mem, f, ImportOptions())
        _cur, top = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert health.items == n
        return top

    small, large = peak(2_000), peak(20_000)  # ~0.8 MB vs ~8 MB of input
    assert large < small * 2 + 512 * 1024
