"""MCP over stdio without a thread per read and write (docs/mcp.md, Latency).

The SDK's ``stdio_server`` reads stdin and writes stdout through ``anyio.wrap_file``: every
line read, every write and every flush is a hop to a worker thread and back. A
``memory_recall`` round trip made ~16 of them, a few milliseconds per call on a busy
2-core machine. Here the same two descriptors are driven by the event loop itself
(``connect_read_pipe`` / ``connect_write_pipe``), and the SDK's own ``stdio_server`` still
does the JSON-RPC framing, validation and serialisation: we hand it these two streams.

Like the SDK, the wire descriptors are claimed while serving: fd 0 reads the null device
and fd 1 writes to stderr, so a stray ``print`` or a child process cannot corrupt the
protocol; both are restored on exit. When stdin or stdout is not a pipe, socket or
terminal (a regular file, which epoll cannot watch), ``claimed_pipes`` yields None and the
caller falls back to the SDK's threaded transport.
"""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import IO

# One JSON-RPC message per line. A line longer than this is discarded (the SDK answers
# the placeholder below with a parse error) instead of growing the buffer without bound.
MAX_LINE = 32 * 1024 * 1024
_TOO_LONG = "{ line exceeds the transport's limit }"


class PipeLines:
    """``async for line in ...``: text lines of the wire's stdin (what the SDK iterates)."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader

    def __aiter__(self) -> PipeLines:
        return self

    async def __anext__(self) -> str:
        try:
            line = await self._reader.readuntil(b"\n")
        except asyncio.IncompleteReadError as exc:
            if not exc.partial:
                raise StopAsyncIteration from None
            line = exc.partial  # a last line without its newline, as a file would give it
        except asyncio.LimitOverrunError:
            await self._discard_line()
            return _TOO_LONG
        return line.decode("utf-8", errors="replace")

    async def _discard_line(self) -> None:
        while True:
            try:
                await self._reader.readuntil(b"\n")
                return
            except asyncio.LimitOverrunError as exc:
                await self._reader.readexactly(exc.consumed)
            except asyncio.IncompleteReadError:
                return


class PipeWriter:
    """``await write(text)`` / ``await flush()`` on the wire's stdout (what the SDK calls)."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    async def write(self, text: str) -> None:
        self._writer.write(text.encode("utf-8"))

    async def flush(self) -> None:
        await self._writer.drain()  # backpressure: waits while the client is not reading


def _watchable(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)


@asynccontextmanager
async def claimed_pipes() -> AsyncIterator[tuple[PipeLines, PipeWriter] | None]:
    """The wire's stdin and stdout as event-loop streams, fds 0 and 1 diverted meanwhile;
    None (nothing claimed) when either cannot be watched by the event loop."""
    if not (_watchable(0) and _watchable(1)):
        yield None
        return
    loop = asyncio.get_running_loop()
    wire_in, wire_out = os.dup(0), os.dup(1)
    saved_in, saved_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    rfile: IO[bytes] = os.fdopen(wire_in, "rb", buffering=0)
    wfile: IO[bytes] = os.fdopen(wire_out, "wb", buffering=0)
    try:
        reader = asyncio.StreamReader(limit=MAX_LINE)
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), rfile)
        transport, protocol = await loop.connect_write_pipe(
            lambda: asyncio.StreamReaderProtocol(asyncio.StreamReader()), wfile
        )
        writer = asyncio.StreamWriter(transport, protocol, None, loop)
        try:
            yield PipeLines(reader), PipeWriter(writer)
        finally:
            transport.close()
    finally:
        rfile.close()
        wfile.close()
        # The event loop made the wire's open files non-blocking, and the saved descriptors
        # share them: a later blocking read or print on fd 0/1 would fail with EAGAIN.
        for fd in (saved_in, saved_out):
            os.set_blocking(fd, True)
        os.dup2(saved_in, 0)
        os.dup2(saved_out, 1)
        os.close(saved_in)
        os.close(saved_out)


__all__ = ["MAX_LINE", "PipeLines", "PipeWriter", "claimed_pipes"]
