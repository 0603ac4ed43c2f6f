"""AmfCache: a record's dict is reused only for the very object it was built from, and
amf_out never changes what the cache holds."""

from __future__ import annotations

import time
from pathlib import Path

from tests.node.kit import make_memory

from amcp.node.views import AmfCache, amf_out


def test_cache_reuses_only_the_same_record_object(tmp_path: Path) -> None:
    mem = make_memory(tmp_path)
    try:
        kid = mem.remember("cached view", scope="team:a").knowledge_id
        item = mem.read([kid])[0]
        assert item.record is not None
        cache = AmfCache(size=4)
        first = cache.to_dict(item.record)
        assert cache.to_dict(item.record) is first
        assert first == item.record.to_dict()
        # Same id, another object (e.g. a superseded or redacted view): rebuilt.
        other = item.record.with_causal(superseded_by=kid)
        rebuilt = cache.to_dict(other)
        assert rebuilt is not first
        assert rebuilt == other.to_dict()
    finally:
        mem.close()


def test_cache_is_bounded_oldest_first(tmp_path: Path) -> None:
    mem = make_memory(tmp_path)
    try:
        ids = [mem.remember(f"record {i}", scope="team:a").knowledge_id for i in range(5)]
        records = [item.record for item in mem.read(ids)]
        cache = AmfCache(size=3)
        built = [cache.to_dict(r) for r in records if r is not None]
        assert len(cache._entries) == 3
        assert list(cache._entries) == ids[2:]
        assert records[0] is not None
        assert cache.to_dict(records[0]) is not built[0]  # evicted, built again
    finally:
        mem.close()


def test_amf_out_leaves_the_cached_dict_alone(tmp_path: Path) -> None:
    mem = make_memory(tmp_path)
    try:
        kid = mem.remember("x-state goes on a copy", scope="team:a").knowledge_id
        item = mem.read([kid])[0]
        assert item.record is not None
        cache = AmfCache()
        out = amf_out(mem, item, time.time(), cache)
        cached = cache.to_dict(item.record)
        assert "x-state" in out["vendor_extensions"]
        assert "x-state" not in (cached.get("vendor_extensions") or {})
        plain = item.record.to_dict()
        assert {k: v for k, v in out.items() if k != "vendor_extensions"} == {
            k: v for k, v in plain.items() if k != "vendor_extensions"}
    finally:
        mem.close()


def test_iso_matches_datetime_formatting() -> None:
    from datetime import UTC, datetime

    from amcp.node.views import iso

    def reference(ts: float) -> str:
        return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")

    edges = [0.0, 0.5, 1.0000005, 1.0000015, 1.9999995, 1_764_510_000.0, 1_764_510_000.9999996,
             1_764_510_000.0000004, 1_764_510_000.123456, 4_102_444_799.999999, 951_782_400.25]
    import random

    rng = random.Random(7)
    values = edges + [rng.uniform(0, 4e9) for _ in range(2000)]
    for ts in values + values[::-1]:  # the second cache is hit and missed both ways
        assert iso(ts) == reference(ts), ts
    assert iso(None) is None


def test_amf_out_sized_reports_the_packed_size(tmp_path: Path) -> None:
    """bounded() counts bytes and tokens from these sizes instead of packing each result
    again, so they must be exactly what MessagePack makes of the dict."""
    from amcp.node.views import amf_out_sized, bounded
    from amcp.wire.encoder import pack_payload

    mem = make_memory(tmp_path)
    try:
        ids = [
            mem.remember("plain record", scope="team:a").knowledge_id,
            mem.remember("record with its own vendor data", scope="team:a", ttl=3600).knowledge_id,
            mem.remember("secret record é ü", scope="team:a", sensitive=True).knowledge_id,
            mem.remember("x" * 5000, scope="team:a").knowledge_id,
        ]
        items = mem.read(ids)
        assert any(i.record is not None and i.record.vendor_extensions for i in items)
        cache = AmfCache()
        now = time.time()
        for cached in (cache, None, cache):  # built, uncached, then served from the cache
            outs = [amf_out_sized(mem, item, now, cached) for item in items]
            for amf, size in outs:
                assert size == len(pack_payload(amf))
            amfs, sizes = [a for a, _ in outs], [s for _, s in outs]
            for limit in (10 << 20, 4096 + 600, 4096 + 9000):
                assert bounded(amfs, limit, sizes) == bounded(amfs, limit)
    finally:
        mem.close()


def test_map_header_size_follows_msgpack() -> None:
    import msgpack

    from amcp.node.views import _map_header_size

    for n in (0, 1, 15, 16, 17, 0xFFFF, 0x10000):
        packed = msgpack.packb({str(i): None for i in range(n)})
        body = sum(len(msgpack.packb(str(i))) + 1 for i in range(n))
        assert len(packed) - body == _map_header_size(n), n
