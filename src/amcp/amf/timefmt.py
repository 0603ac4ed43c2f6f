"""Timestamps: AMF wants UTC ``YYYY-MM-DDTHH:MM:SS[.ffffff]Z`` (PROFILE §6).

``normalise_timestamp`` is for input from people and other tools: it accepts epoch seconds,
epoch milliseconds and ISO 8601 with an offset, and refuses naive local times, because
guessing the zone of a naive time silently reorders memories.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from amcp.errors import ValidationError

AMF_TS_RE = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?Z")
# Epoch values above this are milliseconds: 1e11 s is the year 5138, 1e11 ms is 1973.
_MS_THRESHOLD = 100_000_000_000
_MIN_YEAR, _MAX_YEAR = 1970, 9999


def format_ts(dt: datetime) -> str:
    dt = dt.astimezone(UTC)
    if dt.microsecond:
        return dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return dt.strftime("%Y-%m-%dT%H:%M:%SZ")


def utc_now() -> str:
    return format_ts(datetime.now(UTC))


def check_amf_ts(value: object, field: str) -> str:
    """Validate an AMF timestamp string exactly; no normalisation."""
    if not isinstance(value, str) or not AMF_TS_RE.fullmatch(value):
        raise ValidationError(field, "must be UTC 'YYYY-MM-DDTHH:MM:SS[.ffffff]Z'")
    parse_ts(value, field)
    return value


def parse_ts(value: str, field: str = "timestamp") -> datetime:
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise ValidationError(field, f"not a valid date/time: {value!r}") from exc


def normalise_timestamp(value: object, field: str = "created_at") -> str:
    """Turn common timestamp spellings into the AMF form, or say why not."""
    if isinstance(value, bool):
        raise ValidationError(field, "a boolean is not a timestamp")
    if isinstance(value, (int, float)):
        seconds = value / 1000 if abs(value) >= _MS_THRESHOLD else float(value)
        try:
            dt = datetime.fromtimestamp(seconds, tz=UTC)
        except (OverflowError, OSError, ValueError) as exc:
            raise ValidationError(field, f"epoch value {value!r} is out of range") from exc
        return format_ts(dt)
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise ValidationError(field, "naive datetime has no time zone; give it a tzinfo")
        return format_ts(value)
    if not isinstance(value, str):
        raise ValidationError(field, f"expected a timestamp, got {type(value).__name__}")
    text = value.strip()
    if AMF_TS_RE.fullmatch(text):
        parse_ts(text, field)
        return text
    if re.fullmatch(r"-?\d+(\.\d+)?", text):
        return normalise_timestamp(float(text) if "." in text else int(text), field)
    try:
        dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise ValidationError(
            field, f"unrecognised timestamp {text[:60]!r}; use ISO 8601 with a zone or epoch"
        ) from exc
    if dt.tzinfo is None:
        raise ValidationError(
            field,
            f"naive local time {text[:60]!r} is ambiguous; add 'Z' or an offset such as +02:00",
        )
    if not _MIN_YEAR <= dt.astimezone(UTC).year <= _MAX_YEAR:
        raise ValidationError(field, "year out of range")
    return format_ts(dt)
