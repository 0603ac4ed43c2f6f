"""POST /v1/import is spooled and read line by line: memory stays bounded (issue 21)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from tests.api.kit import free_port
from tests.ui.kit import make_memory, ui_client

from amcp.api.imports import iter_lines
from amcp.errors import ValidationError

ROOT = Path(__file__).resolve().parents[2]
BLANK_BODY = 40 * 1000 * 1000  # the 40 MB of blank lines (was 1.26 GB RSS)


def test_iter_lines_refuses_an_overlong_line_without_holding_it() -> None:
    spool = io.BytesIO(b'{"a": 1}\n' + b"x" * 100 + b"\n")
    with pytest.raises(ValidationError) as err:
        list(iter_lines(spool, max_line=50))
    assert err.value.field == "line 2"
    assert list(iter_lines(io.BytesIO(b"a\n\nb"), max_line=50)) == [b"a\n", b"\n", b"b"]


def test_bad_line_named_and_nothing_stored(tmp_path: Path) -> None:
    src = make_memory(tmp_path, "src.db")
    src.remember("one", scope=["team:a"])
    src.remember("two", scope=["team:a"])
    with ui_client(src) as c:
        dump = c.get("/v1/export").content
    dst = make_memory(tmp_path, "dst.db")
    with ui_client(dst) as c:
        lines = dump.splitlines(keepends=True)
        bad = b"".join([*lines[:2], b"\n", b"{not json\n", *lines[2:]])
        r = c.post("/v1/import", content=bad, headers={"Content-Type": "application/x-ndjson"})
        assert r.status_code == 400 and r.json()["field"] == "line 4"
        assert dst.stats().records == 0
        ok = c.post("/v1/import", content=dump, headers={"Content-Type": "application/x-ndjson"})
        assert ok.json()["created"] == 2 and ok.json()["complete"] is True
    src.close()
    dst.close()


def _hwm_kib(pid: int) -> int:
    """The process's peak resident set (VmHWM), KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


def _chunks(total: int, size: int = 1 << 20) -> Iterator[bytes]:
    block = b"\n" * size
    sent = 0
    while sent < total:
        yield block[: min(size, total - sent)]
        sent += size


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs /proc (Linux)")
def test_forty_megabytes_of_blank_lines_keep_rss_flat(tmp_path: Path) -> None:
    port = free_port()
    log = (tmp_path / "server.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "amcp.cli.api_cmd", "http", "--store", str(tmp_path / "m.db"),
         "--embedder", "hashing", "--port", str(port), "--no-mcp"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=log,
        env=dict(os.environ, HF_HUB_OFFLINE="1"),
    )
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                if httpx.get(f"{base}/v1/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.05)
        else:
            raise AssertionError((tmp_path / "server.log").read_text())
        before = _hwm_kib(proc.pid)
        r = httpx.post(f"{base}/v1/import", content=_chunks(BLANK_BODY), timeout=120,
                       headers={"Content-Type": "application/x-ndjson"})
        after = _hwm_kib(proc.pid)
        assert r.status_code == 200, r.text
        assert r.json()["created"] == 0
        grown_mib = (after - before) / 1024
        print(f"server peak RSS {before / 1024:.1f} MiB -> {after / 1024:.1f} MiB "
              f"(+{grown_mib:.1f} MiB) for a {BLANK_BODY / 1e6:.0f} MB body of blank lines")
        assert grown_mib < 64, f"the import grew the server's peak RSS by {grown_mib:.0f} MiB"
    finally:
        proc.terminate()
        proc.wait(10)
        log.close()
