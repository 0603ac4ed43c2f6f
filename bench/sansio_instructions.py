"""Instructions per operation of the sans-IO core, counted by callgrind (load-independent).

A shared 2-vCPU machine makes wall-clock figures swing by 2x between runs; instruction
counts do not. Run this under ``valgrind --tool=callgrind`` twice, with ``--n 0`` and
``--n N``, and divide the difference of the totals by N (``--mode``: ``decode`` one
256-byte frame per feed, ``roundtrip`` a client MEMORY_READ through both Sessions and both
codecs and its reply). ``sh bench/sansio_instructions.sh MODE N [PYTHON]`` does both runs
and prints the figure.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from tests.session.session_kit import activate, make_pair  # noqa: E402

from amcp.session import Request, Response, SendFrame  # noqa: E402
from amcp.wire import Frame, FrameDecoder, MsgType, encode_frame  # noqa: E402


def decode(n: int) -> None:
    wire = encode_frame(Frame(MsgType.MEMORY_READ, {"query": "x" * 240}, seq=1))
    decoder = FrameDecoder()
    for _ in range(n):
        decoder.feed(wire)


def roundtrip(n: int) -> None:
    pair = make_pair()
    activate(pair)
    to_node, to_client = FrameDecoder(), FrameDecoder()
    for _ in range(n):
        sent = pair.client.send(MsgType.MEMORY_READ, {"query": "x" * 200, "limit": 5})
        (frame,) = to_node.feed(encode_frame(sent))
        (req,) = [e for e in pair.node.receive(frame) if isinstance(e, Request)]
        answer = pair.node.reply(req.frame, MsgType.MEMORY_READ_RESPONSE, {"results": []})
        (back,) = to_client.feed(encode_frame(answer))
        events = pair.client.receive(back)
        assert isinstance(events[0], Response)
        assert not any(isinstance(e, SendFrame) for e in events)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=("decode", "roundtrip"), required=True)
    ap.add_argument("--n", type=int, required=True)
    args = ap.parse_args()
    (decode if args.mode == "decode" else roundtrip)(args.n)


if __name__ == "__main__":
    main()
