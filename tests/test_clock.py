from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from amcp.clock import HLC, MAX_LOGICAL, Timestamp
from amcp.errors import PreconditionFailed, ValidationError

T0 = 1_700_000_000_000


class FakeWall:
    def __init__(self, values: list[int]) -> None:
        self.values = values
        self.i = 0

    def __call__(self) -> int:
        v = self.values[min(self.i, len(self.values) - 1)]
        self.i += 1
        return v


@given(st.lists(st.integers(min_value=-10_000, max_value=10_000), min_size=1, max_size=200))
def test_send_is_strictly_monotonic_under_any_wall_clock(deltas: list[int]) -> None:
    wall = FakeWall([T0 + d for d in deltas])  # jumps forwards and backwards
    clock = HLC("n1", wall=wall)
    last = 0
    for _ in deltas:
        now = clock.send()
        assert now > last
        last = now


@given(
    st.lists(
        st.tuples(
            st.booleans(), st.integers(min_value=-5_000, max_value=50_000), st.integers(0, 50)
        ),
        min_size=1,
        max_size=100,
    )
)
def test_receive_is_monotonic_and_dominates_remote(events: list[tuple[bool, int, int]]) -> None:
    wall = FakeWall([T0 + i for i in range(1000)])
    clock = HLC("n1", wall=wall)
    last = 0
    for is_receive, skew, logical in events:
        if is_receive:
            remote = ((T0 + skew) << 16) | logical
            now = clock.receive(remote)
            assert now > remote
        else:
            now = clock.send()
        assert now > last
        last = now


def test_logical_overflow_advances_physical() -> None:
    clock = HLC("n1", wall=lambda: T0, last=(T0 << 16) | (MAX_LOGICAL - 1))
    a = clock.send()
    b = clock.send()
    assert a & MAX_LOGICAL == MAX_LOGICAL
    assert b >> 16 == T0 + 1 and b & MAX_LOGICAL == 0


def test_receive_refuses_clock_too_far_ahead() -> None:
    clock = HLC("n1", wall=lambda: T0, max_drift_ms=60_000)
    clock.receive((T0 + 59_000) << 16)  # within drift: merged
    with pytest.raises(PreconditionFailed) as info:
        clock.receive((T0 + 61_000) << 16)
    assert int(info.value.status) == 412


@given(
    st.integers(min_value=0, max_value=253_402_300_799_999),  # up to 9999-12-31
    st.integers(min_value=0, max_value=MAX_LOGICAL),
    st.from_regex(r"[A-Za-z0-9_]{1,64}", fullmatch=True),
)
def test_string_and_u64_round_trip(ms: int, logical: int, node: str) -> None:
    ts = Timestamp(ms, logical, node)
    assert Timestamp.parse(str(ts)) == ts
    assert Timestamp.unpack(ts.pack(), node) == ts


@given(
    st.lists(
        st.tuples(
            st.integers(0, 2**40), st.integers(0, MAX_LOGICAL), st.sampled_from(["a", "b", "n1"])
        ),
        min_size=2,
        max_size=50,
    )
)
def test_total_order_is_physical_logical_node(items: list[tuple[int, int, str]]) -> None:
    stamps = [Timestamp(*i) for i in items]
    assert sorted(stamps) == sorted(stamps, key=lambda t: (t.physical_ms, t.logical, t.node))
    assert sorted(stamps, key=str) == sorted(
        stamps
    ) or any(  # string order matches within a year range
        t.physical_ms >= 253_402_300_800_000 for t in stamps
    )


def test_upstream_hlc_string_parses() -> None:
    ts = Timestamp.parse("2026-03-10T14:35:00.123Z-0001-node_abc")
    assert (ts.logical, ts.node) == (1, "node_abc")
    for bad in ("2026-03-10T14:35:00Z-0001-n", "2026-03-10T14:35:00.123Z-00001-n", "x"):
        with pytest.raises(ValidationError):
            Timestamp.parse(bad)


def test_hlc_string_of_the_right_shape_but_no_date_is_a_validation_error() -> None:
    # Such a string reaches apply from a peer (the drift check): a ValueError there would
    # not be counted as one refused record but end the batch.
    for bad in ("2026-13-10T14:35:00.123Z-0001-n", "2026-02-30T14:35:00.123Z-0001-n",
                "0000-01-01T00:00:00.000Z-0001-n", "2026-01-01T24:00:00.000Z-0001-n"):
        with pytest.raises(ValidationError):
            Timestamp.parse(bad)


@given(st.integers(min_value=0, max_value=253_402_300_799_999))
def test_parse_agrees_with_strptime(ms: int) -> None:
    text = str(Timestamp(ms, 7, "n"))
    dt = datetime.strptime(text[:23], "%Y-%m-%dT%H:%M:%S.%f").replace(tzinfo=UTC)
    delta = dt - datetime(1970, 1, 1, tzinfo=UTC)
    expected = (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000
    assert Timestamp.parse(text).physical_ms == expected == ms
