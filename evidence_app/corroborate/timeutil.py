"""RFC 3339 instants the way Go's ``time.Parse(time.RFC3339, s)`` reads them.

The generator orders runs by ``attestedAt`` and drops a run whose timestamp Go cannot parse,
so the accepted set must match Go's, not Python's ``datetime.fromisoformat`` (which accepts
lowercase ``z``, missing seconds, week dates ...). Instants are plain ``int`` nanoseconds since
the Unix epoch: they order like Go's ``time.Time`` and cover Go's whole year range 0000-9999,
which ``datetime`` does not (it starts at year 1).
"""

from __future__ import annotations

import re

_NS_PER_SECOND = 1_000_000_000
_SECONDS_PER_DAY = 86_400

# Strict layout "2006-01-02T15:04:05Z07:00": ASCII digits only ([0-9], never \d, which
# matches any Unicode digit), upper-case "T" and "Z", an optional fraction after the seconds
# (Go accepts "." or "," there even though the layout has none).
_RFC3339 = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})"
    r"(?:[.,]([0-9]+))?"
    r"(Z|[+-][0-9]{2}:[0-9]{2})"
)


def _is_leap(year: int) -> bool:
    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)


def _days_in_month(year: int, month: int) -> int:
    if month == 2:
        return 29 if _is_leap(year) else 28
    return 30 if month in (4, 6, 9, 11) else 31


def days_from_civil(year: int, month: int, day: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm)."""
    year -= month <= 2
    era = year // 400  # floor division: no truncation fix-up needed (unlike C++)
    yoe = year - era * 400
    mp = (month + 9) % 12
    doy = (153 * mp + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def civil_from_days(days: int) -> tuple[int, int, int]:
    days += 719468
    era = days // 146097
    doe = days - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    return yoe + era * 400 + (month <= 2), month, day


# Go's zero time.Time (0001-01-01T00:00:00Z): what a missing map entry compares as.
ZERO_INSTANT = days_from_civil(1, 1, 1) * _SECONDS_PER_DAY * _NS_PER_SECOND


def parse_rfc3339(value: str) -> int | None:
    """Nanoseconds since the epoch of an RFC 3339 timestamp, or None where Go rejects it."""
    m = _RFC3339.fullmatch(value)
    if m is None:
        return None
    year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
    if not (1 <= month <= 12 and 1 <= day <= _days_in_month(year, month)):
        return None
    if hour > 23 or minute > 59 or second > 59:
        return None
    # Go keeps at most nine fractional digits (parseNanoseconds truncates the rest).
    frac = (m.group(7) or "")[:9]
    nanos = int(frac.ljust(9, "0")) if frac else 0
    offset = 0
    zone = m.group(8)
    if zone != "Z":
        off_h, off_m = int(zone[1:3]), int(zone[4:6])
        # Go's general parser tolerates 24 hours / 60 minutes ("some people do write
        # offsets of 24 hours"); it is the fallback when the strict fast path fails.
        if off_h > 24 or off_m > 60:
            return None
        offset = (off_h * 60 + off_m) * 60 * (-1 if zone[0] == "-" else 1)
    seconds = (
        days_from_civil(year, month, day) * _SECONDS_PER_DAY
        + hour * 3600
        + minute * 60
        + second
        - offset
    )
    return seconds * _NS_PER_SECOND + nanos


def _go_year(year: int) -> str:
    # Go's appendInt(b, year, 4): sign, then at least four digits.
    return ("-" if year < 0 else "") + str(abs(year)).zfill(4)


def format_utc(instant: int, *, with_time: bool) -> str:
    """``2006-01-02 15:04 UTC`` (with_time) or ``2006-01-02`` of an instant, in UTC."""
    seconds = instant // _NS_PER_SECOND
    days, rem = divmod(seconds, _SECONDS_PER_DAY)
    year, month, day = civil_from_days(days)
    date = f"{_go_year(year)}-{month:02d}-{day:02d}"
    if not with_time:
        return date
    return f"{date} {rem // 3600:02d}:{rem % 3600 // 60:02d} UTC"
