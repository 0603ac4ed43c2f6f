"""Fuzz the frame decoder: mutated valid frames and random garbage through FrameDecoder.

    .venv/bin/python bench/fuzz_frames.py [--count 1000000] [--seed 1] [--hang-ms 1000]

The invariant (ARCHITECTURE.md): every input is decoded, dropped silently, or refused with
RemoteProtocolError. Anything else is a crash; a case that takes longer than --hang-ms is a
hang (a SIGALRM watchdog also breaks real infinite loops). Prints the tally and writes
bench/results/fuzz_frames.json. Throughput is the median over --batches batches.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import signal
import statistics
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import msgpack
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from amcp.errors import RemoteProtocolError
from amcp.wire import Flag, Frame, FrameCipher, FrameDecoder, MsgType, encode_message
from amcp.wire.header import CHECKSUM, HEADER, HEADER_PREFIX, frame_checksum

RESULTS = Path(__file__).resolve().parent / "results"
SMALL = 1024  # the max_payload of "small" decoders, so fragments are common


class Hang(BaseException):
    """Raised by the watchdog; BaseException so no `except Exception` can swallow it."""


def _alarm(_signum: int, _frame: Any) -> None:
    raise Hang


def ciphers(rng: random.Random) -> tuple[FrameCipher, FrameCipher]:
    a = X25519PrivateKey.from_private_bytes(rng.randbytes(32))
    b = X25519PrivateKey.from_private_bytes(rng.randbytes(32))
    salt = rng.randbytes(32)
    return FrameCipher(a, b.public_key(), salt=salt), FrameCipher(b, a.public_key(), salt=salt)


def seed_streams(rng: random.Random, send: FrameCipher) -> list[tuple[bytes, bool, int]]:
    """Valid wire streams to mutate: (bytes, encrypted, max_payload)."""
    payloads: list[dict[str, Any]] = [
        {},
        {"status": 200, "ref_seq": 7},
        {"amf": {"core": {"subject": "s", "predicate": "p", "object": "o", "confidence": 0.9}}},
        {"changes": [{"op": "put", "hlc": 2**60, "amf": {"x": "memory " * 30}}] * 8},
        {"blob": rng.randbytes(1500), "n": -1, "f": 1.5, "none": None, "list": [1, [2, [3]]]},
        {"text": "recall " * 400},
    ]
    streams = []
    for payload in payloads:
        for msg_type in (MsgType.HEALTH_CHECK, MsgType.MEMORY_WRITE, MsgType.SYNC_PUSH):
            for encrypt in (False, True):
                for max_payload in (SMALL, 10 * 1024 * 1024):
                    seq = rng.randrange(1, 1000)
                    frame = Frame(
                        msg_type,
                        payload,
                        seq,
                        rng.randbytes(16),
                        seq << 16,
                        Flag.REQUIRES_ACK if seq % 2 else Flag.NONE,
                    )
                    wire = encode_message(
                        frame, cipher=send if encrypt else None, max_payload=max_payload
                    ).data
                    streams.append((wire, encrypt, max_payload))
    return streams


def refix_first_crc(data: bytearray) -> None:
    """Recompute the first frame's CRC so the mutation reaches the layers behind it."""
    if len(data) < HEADER.size:
        return
    length = HEADER.unpack_from(data, 0)[4]
    if HEADER.size + length <= len(data):
        prefix = bytes(data[: HEADER_PREFIX.size])
        payload = bytes(data[HEADER.size : HEADER.size + length])
        data[HEADER_PREFIX.size : HEADER.size] = CHECKSUM.pack(frame_checksum(prefix, payload))


INTERESTING_U16 = [0, 1, 0x00FF, 0x0100, 0x01FF, 0x0200, 0x003F, 0x0040, 0x8000, 0xFFFF]
INTERESTING_U32 = [
    0,
    1,
    49,
    50,
    1024,
    1025,
    10 * 1024 * 1024,
    10 * 1024 * 1024 + 1,
    2**31,
    2**32 - 1,
]


def mutate(rng: random.Random, data: bytearray) -> None:
    for _ in range(rng.randint(1, 4)):
        if not data:
            return
        at = rng.randrange(len(data))
        kind = rng.randrange(9)
        if kind == 0:
            data[at] ^= 1 << rng.randrange(8)
        elif kind == 1:
            data[at] = rng.randrange(256)
        elif kind == 2:
            data[at:at] = rng.randbytes(rng.randint(1, 16))
        elif kind == 3:
            del data[at : at + rng.randint(1, 16)]
        elif kind == 4:
            del data[at:]
        elif kind == 5:  # duplicate a region: repeated or overlapping frames
            end = min(len(data), at + rng.randint(1, 200))
            data[at:at] = data[at:end]
        elif kind == 6 and len(data) >= HEADER.size:  # a header field to an edge value
            field = rng.choice([(4, 2), (6, 2), (8, 2), (10, 4)])
            off, size = field
            pool = INTERESTING_U16 if size == 2 else INTERESTING_U32
            data[off : off + size] = rng.choice(pool).to_bytes(size, "big")
        elif kind == 7 and len(data) > HEADER.size:  # payload replaced by random msgpack-ish
            data[HEADER.size :] = rng.choice(
                [
                    msgpack.packb(rng.choice([[1], "s", 1.0, None, {1: 2}, {"a": [1] * 5}])),
                    rng.randbytes(rng.randint(0, 64)),
                    b"\x04\x22\x4d\x18" + rng.randbytes(20),
                ]
            )
            data[10:14] = (len(data) - HEADER.size).to_bytes(4, "big")
        else:
            data[at : at + 1] = b""
    if rng.random() < 0.6:
        refix_first_crc(data)


def garbage(rng: random.Random) -> bytearray:
    if rng.random() < 0.5:
        return bytearray(rng.randbytes(rng.randint(0, 256)))
    # Something header-shaped: valid magic and version, random rest, CRC made right.
    data = bytearray(b"AMCP\x01\x00" + rng.randbytes(44 + rng.randint(0, 200)))
    data[10:14] = rng.choice([len(data) - 50, rng.randrange(2**32)]).to_bytes(4, "big")
    data[8:10] = rng.choice([0, rng.randrange(64), rng.randrange(2**16)]).to_bytes(2, "big")
    refix_first_crc(data)
    return data


def _kind(message: str) -> str:
    """A violation message without its numbers and quoted bytes, for the coverage tally."""
    message = re.split(r"[:'\"]| b'| b\"", message, maxsplit=1)[0]
    words = [w for w in message.split() if not any(c.isdigit() for c in w)]
    return " ".join(words[:5])


def run(count: int, seed: int, hang_ms: float, batches: int) -> dict[str, Any]:
    rng = random.Random(seed)
    send, recv = ciphers(rng)
    seeds = seed_streams(rng, send)
    tally = {
        "cases": 0,
        "frames_decoded": 0,
        "dropped_bad_checksum": 0,
        "violations": 0,
        "incomplete": 0,
        "crashes": 0,
        "hangs": 0,
    }
    crashes: list[dict[str, Any]] = []
    kinds: dict[str, int] = {}
    hangs: list[dict[str, Any]] = []
    slowest = 0.0
    rates = []
    per_batch = max(1, count // batches)
    signal.signal(signal.SIGALRM, _alarm)
    watchdog = max(hang_ms * 5, 1000) / 1000  # break real loops; hang_ms itself is the verdict
    done = 0
    while done < count:
        n = min(per_batch, count - done)
        t0 = time.perf_counter()
        for _ in range(n):
            if rng.random() < 0.75:
                wire, encrypt, max_payload = seeds[rng.randrange(len(seeds))]
                data = bytearray(wire)
                mutate(rng, data)
            else:
                data, encrypt, max_payload = garbage(rng), rng.random() < 0.5, SMALL
            decoder = FrameDecoder(
                cipher=recv if encrypt else None,
                max_payload=max_payload,
                accept_compression=rng.random() < 0.9,
            )
            raw = bytes(data)
            cut = rng.randrange(len(raw) + 1) if raw and rng.random() < 0.3 else len(raw)
            start = time.perf_counter()
            signal.setitimer(signal.ITIMER_REAL, watchdog)
            try:
                got = decoder.feed(raw[:cut]) + decoder.feed(raw[cut:])
                tally["frames_decoded"] += len(got)
                if decoder.buffered or decoder.reassembly_buffered:
                    tally["incomplete"] += 1
            except RemoteProtocolError as exc:
                tally["violations"] += 1
                kind = _kind(str(exc))
                kinds[kind] = kinds.get(kind, 0) + 1
            except Hang:
                tally["hangs"] += 1
                hangs.append({"input_hex": raw.hex()[:4096], "reason": "watchdog"})
            except Exception as exc:  # the whole point: anything else is a crash
                tally["crashes"] += 1
                if len(crashes) < 20:
                    crashes.append(
                        {
                            "error": repr(exc),
                            "input_hex": raw.hex()[:4096],
                            "traceback": traceback.format_exc()[-2000:],
                        }
                    )
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            elapsed = time.perf_counter() - start
            slowest = max(slowest, elapsed)
            if elapsed * 1000 > hang_ms:
                tally["hangs"] += 1
                hangs.append({"input_hex": raw.hex()[:4096], "seconds": elapsed})
            tally["dropped_bad_checksum"] += decoder.dropped_bad_checksum
            tally["cases"] += 1
        rates.append(n / (time.perf_counter() - t0))
        done += n
    return {
        "tally": tally,
        "crashes": crashes,
        "hangs": hangs[:20],
        "slowest_case_ms": slowest * 1000,
        "median_cases_per_s": statistics.median(rates),
        "batches": len(rates),
        "violation_kinds": dict(sorted(kinds.items())),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=20260601)
    parser.add_argument("--hang-ms", type=float, default=1000.0)
    parser.add_argument("--batches", type=int, default=10)
    args = parser.parse_args()
    if args.batches < 5:
        parser.error("--batches must be at least 5 (the rate reported is a median)")
    t0 = time.perf_counter()
    result = run(args.count, args.seed, args.hang_ms, args.batches)
    tally = result["tally"]
    report = {
        "benchmark": "fuzz_frames",
        "count": args.count,
        "seed": args.seed,
        "hang_ms": args.hang_ms,
        "seconds": time.perf_counter() - t0,
        "machine": {
            "platform": platform.platform(),
            "cpu_count": os.cpu_count(),
            "python": sys.version.split()[0],
            "loadavg_1_5_15": os.getloadavg(),
        },
        **result,
    }
    for key, value in tally.items():
        print(f"{key:22} {value:>12,}")
    print(f"{'slowest case':22} {result['slowest_case_ms']:>12.2f} ms")
    print(f"{'median rate':22} {result['median_cases_per_s']:>12,.0f} cases/s")
    for kind, n in result["violation_kinds"].items():
        print(f"  violation: {kind:40} {n:>9,}")
    print(f"crashes/hangs: {tally['crashes']}/{tally['hangs']}")
    for crash in result["crashes"][:3]:
        print(crash["traceback"])
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / "fuzz_frames.json"
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {out}")
    return 1 if tally["crashes"] or tally["hangs"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
