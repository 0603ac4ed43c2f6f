from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from amcp.amf.timefmt import normalise_timestamp
from amcp.errors import ValidationError

GOOD = [
    ("2024-05-08T13:56:00Z", "2024-05-08T13:56:00Z"),
    ("2024-05-08T13:56:00.250Z", "2024-05-08T13:56:00.250Z"),
    ("2024-05-08T15:56:00+02:00", "2024-05-08T13:56:00Z"),
    (1715176560, "2024-05-08T13:56:00Z"),  # epoch seconds
    (1715176560000, "2024-05-08T13:56:00Z"),  # epoch milliseconds
    (1715176560.5, "2024-05-08T13:56:00.500000Z"),
    ("1715176560", "2024-05-08T13:56:00Z"),
    (datetime(2024, 5, 8, 13, 56, tzinfo=UTC), "2024-05-08T13:56:00Z"),
    (datetime(2024, 5, 8, 8, 56, tzinfo=timezone(timedelta(hours=-5))), "2024-05-08T13:56:00Z"),
]


@pytest.mark.parametrize(("value", "expected"), GOOD)
def test_normalises(value: object, expected: str) -> None:
    assert normalise_timestamp(value) == expected


BAD = [
    ("2024-05-08 13:56:00", "naive local time"),
    ("2024-05-08T13:56:00", "naive local time"),
    (datetime(2024, 5, 8, 13, 56), "naive datetime"),
    ("yesterday", "unrecognised"),
    ("2024-13-45T00:00:00Z", "not a valid"),
    (True, "boolean"),
    (10**20, "out of range"),
    ([2024], "expected a timestamp"),
]


@pytest.mark.parametrize(("value", "reason"), BAD)
def test_rejects_with_reason(value: object, reason: str) -> None:
    with pytest.raises(ValidationError, match=reason):
        normalise_timestamp(value)
