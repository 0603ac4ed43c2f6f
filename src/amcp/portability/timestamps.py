"""Timestamps as other tools write them, into the AMF form.

Accepted (docs/portability.md, "Timestamps"):

* epochs as numbers or digit strings; the unit is read from the magnitude — seconds below
  1e11, milliseconds below 1e14, microseconds below 1e17, nanoseconds above (1e11 s is the
  year 5138, so no real second count is mistaken for milliseconds);
* ISO 8601 with ``Z`` or an offset, with ``T`` or a space, with or without fractions;
* RFC 2822 (``Tue, 03 Dec 2024 14:05:00 +0000``), as mail and HTTP headers write it;
* common locale forms: ``2024/12/03 14:05``, ``03.12.2024 14:05`` (day first, as dots
  mean in Europe), ``12/03/2024 2:05 PM`` (US month first unless ``day_first``; a first
  field above 12 is read as the day whatever the flag), ``Dec 3, 2024 2:05 PM``,
  ``3 December 2024 14:05``.

A time without a zone is refused unless ``assume_tz`` names one, because guessing the zone
of a naive time silently reorders memories. Years outside 1970..9999 are refused.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, tzinfo
from email.utils import parsedate_to_datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from amcp.amf.timefmt import format_ts
from amcp.errors import ValidationError

_MIN_YEAR, _MAX_YEAR = 1970, 9999
_NUM = re.compile(r"-?\d+(\.\d+)?")
_LOCALE_FORMATS = (
    "%Y/%m/%d %H:%M:%S", "%Y/%m/%d %H:%M", "%Y/%m/%d",
    "%b %d, %Y %I:%M %p", "%b %d, %Y %H:%M", "%b %d, %Y", "%B %d, %Y %I:%M %p", "%B %d, %Y",
    "%d %b %Y %H:%M:%S", "%d %b %Y %H:%M", "%d %b %Y", "%d %B %Y %H:%M", "%d %B %Y",
)
_DOTTED = re.compile(r"(\d{1,2})\.(\d{1,2})\.(\d{4})(?:[ ,]+(\d{1,2}):(\d{2})(?::(\d{2}))?)?")
_SLASHED = re.compile(
    r"(\d{1,2})/(\d{1,2})/(\d{4})(?:[ ,]+(\d{1,2}):(\d{2})(?::(\d{2}))?\s*([AaPp][Mm])?)?"
)


def zone(name: str) -> tzinfo:
    if name.upper() in {"UTC", "Z", "GMT"}:
        return UTC
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValidationError("assume_tz", f"unknown time zone {name!r}") from exc


def epoch_seconds(value: float) -> float:
    magnitude = abs(value)
    if magnitude < 1e11:
        return float(value)
    if magnitude < 1e14:
        return value / 1e3
    if magnitude < 1e17:
        return value / 1e6
    return value / 1e9


def parse_when(
    value: object, where: str, *, assume_tz: str | None = None, day_first: bool = False
) -> datetime:
    """An aware UTC datetime for ``value``, or a ValidationError naming ``where``."""
    if isinstance(value, bool) or value is None:
        raise ValidationError(where, f"{value!r} is not a timestamp")
    if isinstance(value, int | float):
        return _from_epoch(float(value), where)
    if isinstance(value, datetime):
        return _aware(value, where, assume_tz, str(value))
    if not isinstance(value, str) or not value.strip():
        raise ValidationError(where, f"expected a timestamp, got {type(value).__name__}")
    text = value.strip()
    if _NUM.fullmatch(text):
        return _from_epoch(float(text), where)
    dt = _parse_text(text, day_first, where)
    if dt is None:
        raise ValidationError(where, f"unrecognised timestamp {text[:60]!r}")
    return _aware(dt, where, assume_tz, text)


def normalise_when(
    value: object, where: str, *, assume_tz: str | None = None, day_first: bool = False
) -> str:
    return format_ts(parse_when(value, where, assume_tz=assume_tz, day_first=day_first))


def _from_epoch(value: float, where: str) -> datetime:
    try:
        dt = datetime.fromtimestamp(epoch_seconds(value), tz=UTC)
    except (OverflowError, OSError, ValueError) as exc:
        raise ValidationError(where, f"epoch value {value!r} is out of range") from exc
    return _in_range(dt, where, repr(value))


def _aware(dt: datetime, where: str, assume_tz: str | None, shown: str) -> datetime:
    if dt.tzinfo is None:
        if assume_tz is None:
            raise ValidationError(
                where,
                f"naive local time {shown[:60]!r} has no zone; pass --assume-tz "
                "(e.g. --assume-tz UTC or --assume-tz Europe/Paris)",
            )
        dt = dt.replace(tzinfo=zone(assume_tz))
    return _in_range(dt.astimezone(UTC), where, shown)


def _in_range(dt: datetime, where: str, shown: str) -> datetime:
    if not _MIN_YEAR <= dt.year <= _MAX_YEAR:
        raise ValidationError(where, f"{shown[:60]} is outside the years {_MIN_YEAR}-{_MAX_YEAR}")
    return dt


def _parse_text(text: str, day_first: bool, where: str) -> datetime | None:
    if re.match(r"[+-]?\d{5,}-", text):
        # fromisoformat refuses it anyway; say why instead of "unrecognised"
        raise ValidationError(where, f"{text[:60]!r} has a year beyond 9999")
    iso = text.replace("Z", "+00:00").replace("z", "+00:00")
    try:
        return datetime.fromisoformat(iso)
    except ValueError:
        pass
    if "," in text[:5]:
        try:
            return parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            pass
    m = _DOTTED.fullmatch(text)
    if m:
        d, mo, y, hh, mm, ss = m.groups()
        return _build(int(y), int(mo), int(d), hh, mm, ss, None)
    m = _SLASHED.fullmatch(text)
    if m:
        a, b, y, hh, mm, ss, ampm = m.groups()
        first, second = int(a), int(b)
        day_is_first = first > 12 or (day_first and second <= 12)
        d, mo = (first, second) if day_is_first else (second, first)
        return _build(int(y), mo, d, hh, mm, ss, ampm)
    for fmt in _LOCALE_FORMATS:
        try:
            return datetime.strptime(text, fmt)
        except ValueError:
            continue
    return None


def _build(
    y: int, mo: int, d: int, hh: str | None, mm: str | None, ss: str | None, ampm: str | None
) -> datetime | None:
    hour = int(hh) if hh else 0
    if ampm:
        hour = hour % 12 + (12 if ampm.lower() == "pm" else 0)
    try:
        return datetime(y, mo, d, hour, int(mm) if mm else 0, int(ss) if ss else 0)
    except ValueError:
        return None
