"""What strangers can make a node hold: RSS under partial frames, lockout under idle sockets.

Two attacks from issue 17, each against a node *process* (``bench/nodeproc.py``, its
store in a temp dir):

1. ``--partial N`` connections each send a CAPABILITY_HELLO header claiming 10 MiB and
   then ``--partial-mib`` MiB of it, never the rest. RSS of the node before and after.
2. ``--idle N`` connections that send nothing; then an honest client connects,
   handshakes, cold-boots and writes. Seconds until it succeeded (or ``--lockout-s``).

``--before-src PATH`` runs the same against another checkout's ``src`` (the code before
the admission fix, e.g. the main worktree before merging) and reports both.

    PYTHONPATH=src:. python bench/node_limits.py --before-src /work/main/src
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import struct
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import save
from bench.nodeproc import NodeProcess, rss_mb

from amcp.wire import HEADER_SIZE, Frame, MsgType, encode_frame

MiB = 1024 * 1024


def _header(length: int) -> bytes:
    clock = int(time.time() * 1000) << 16
    frame = encode_frame(Frame(MsgType.CAPABILITY_HELLO, {}, 1, clock=clock))
    return frame[:10] + struct.pack(">I", length) + frame[14:HEADER_SIZE]


def partial_frames(node: NodeProcess, count: int, mib: float) -> dict[str, Any]:
    before = rss_mb(node.pid)
    socks, refused = [], 0
    body = b"\x00" * int(mib * MiB)
    for _ in range(count):
        s = socket.create_connection(("127.0.0.1", node.port), 10)
        s.settimeout(20)
        try:
            s.sendall(_header(10 * MiB) + body)
        except OSError:
            refused += 1  # the node cut the connection off mid-send
        socks.append(s)
    time.sleep(1.0)
    after = rss_mb(node.pid)
    for s in socks:
        s.close()
    time.sleep(0.5)
    return {"connections": count, "mib_each": mib, "rss_before_mb": round(before, 1),
            "rss_after_mb": round(after, 1), "rss_growth_mb": round(after - before, 1),
            "cut_off_mid_send": refused, "rss_after_close_mb": round(rss_mb(node.pid), 1)}


async def _honest_client(port: int, give_up: float) -> tuple[float | None, int]:
    from amcp.node import RetryPolicy, connect

    retry = RetryPolicy(ack_timeout=1.0, backoff=(1.0,), request_timeout=5.0,
                        connect_timeout=2.0)
    start = time.monotonic()
    attempts = 0
    while time.monotonic() - start < give_up:
        attempts += 1
        try:
            client = await connect("127.0.0.1", port, retry=retry)
            await client.end()
            return time.monotonic() - start, attempts
        except Exception:  # refused, reset or timed out: try again, as a client would
            await asyncio.sleep(0.2)
    return None, attempts


def idle_lockout(node: NodeProcess, count: int, give_up: float) -> dict[str, Any]:
    socks = []
    for _ in range(count):
        s = socket.create_connection(("127.0.0.1", node.port), 10)
        socks.append(s)
    time.sleep(0.5)
    seconds, attempts = asyncio.run(_honest_client(node.port, give_up))
    for s in socks:
        s.close()
    return {"idle_connections": count, "honest_client_s": None if seconds is None
            else round(seconds, 3), "attempts": attempts, "gave_up_after_s": give_up}


def run_one(src: Path | None, args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        node = NodeProcess.start(Path(tmp) / "node" / "memory.db", src=src)
        try:
            time.sleep(0.5)
            partial = partial_frames(node, args.partial, args.partial_mib)
            idle = idle_lockout(node, args.idle, args.lockout_s)
        finally:
            node.stop()
    return {"src": str(src) if src else "this checkout", "partial_frames": partial,
            "idle_connections": idle}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--partial", type=int, default=40)
    ap.add_argument("--partial-mib", type=float, default=9.5)
    ap.add_argument("--idle", type=int, default=1024)
    ap.add_argument("--lockout-s", type=float, default=40.0)
    ap.add_argument("--before-src", type=Path, default=None)
    args = ap.parse_args()
    runs = {"after": run_one(None, args)}
    if args.before_src is not None:
        runs["before"] = run_one(args.before_src, args)
    path = save("node_limits", {"conditions": "loopback, node process with default Limits, "
                                "hashing embedder; machine shared with other engineers",
                                **runs})
    print(path.read_text())


if __name__ == "__main__":
    main()
