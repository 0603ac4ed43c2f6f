"""The event-loop stdio transport (amcp.api.mcp_stdio), driven through real pipes in a child
process: line framing, the over-long line, stray prints kept off the wire, descriptors
restored (and blocking again) afterwards, and the fallback for a regular-file stdin."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[2] / "src")

ECHO = textwrap.dedent(
    """
    import asyncio, sys
    sys.path.insert(0, {src!r})
    import amcp.api.mcp_stdio as T
    T.MAX_LINE = 64

    async def main():
        async with T.claimed_pipes() as pipes:
            if pipes is None:
                print("fallback")
            else:
                lines, out = pipes
                print("stray")  # fd 1 is stderr while serving: must not reach the wire
                async for line in lines:
                    await out.write("got:" + line.strip() + "\\n")
                    await out.flush()
        print("restored", flush=True)  # fd 1 is the wire again, and blocking

    asyncio.run(main())
    """
).format(src=SRC)


def run(stdin: bytes | Path) -> subprocess.CompletedProcess[bytes]:
    if isinstance(stdin, Path):
        with stdin.open("rb") as f:
            return subprocess.run([sys.executable, "-c", ECHO], stdin=f, capture_output=True,
                                  timeout=60, check=False)
    return subprocess.run([sys.executable, "-c", ECHO], input=stdin, capture_output=True,
                          timeout=60, check=False)


def test_lines_round_trip_and_stray_output_goes_to_stderr() -> None:
    res = run("héllo\nsecond\nlast without newline".encode())
    assert res.returncode == 0, res.stderr
    assert res.stdout.decode().splitlines() == [
        "got:héllo", "got:second", "got:last without newline", "restored",
    ]
    assert b"stray" in res.stderr and b"stray" not in res.stdout


def test_an_over_long_line_is_replaced_and_the_stream_goes_on() -> None:
    res = run(b"a\n" + b"x" * 500 + b"\nb\n")
    assert res.returncode == 0, res.stderr
    got = res.stdout.decode().splitlines()
    assert got[0] == "got:a" and got[2:] == ["got:b", "restored"]
    assert got[1].startswith("got:{") and "xxxx" not in got[1]  # not JSON: a parse error


def test_a_regular_file_stdin_falls_back(tmp_path: Path) -> None:
    feed = tmp_path / "in.txt"
    feed.write_text("a\n", encoding="utf-8")
    res = run(feed)
    assert res.returncode == 0, res.stderr
    assert res.stdout.decode().splitlines() == ["fallback", "restored"]
