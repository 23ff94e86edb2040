"""RFC 3339 timestamps as integer epoch nanoseconds, in the two wire formats Crux uses.

Fact times (`stored_at`, `valid_from`, ...) are written by chrono's serde impl with a `Z` suffix;
event times (`deleted_at`, `superseded_at`, ...) by `to_rfc3339()` with `+00:00`. Both use chrono's
`AutoSi` fraction: none, 3, 6 or 9 digits depending on the nanoseconds (chrono's serde form).
Python's datetime only has microseconds, so everything here works on integers.

The range is chrono's, not the view's: Crux reads any instant a `DateTime<Utc>` holds (years -262144 ..
+262143, chrono's `NaiveDate` range; `9999-12-31T23:59:59Z` is the usual "forever" of a validity).
The view's `*_ns` columns are signed 64-bit (1677-09-21 .. 2262-04-11): an instant outside that is
held there clamped to the nearest end (`column_ns`), its text column keeps it exactly, and
`from_columns` gives the exact instant back (docs/sql.md, "Times outside 1677-2262").
"""

from __future__ import annotations

import re
import time
from functools import lru_cache
from typing import Optional, overload

from ..errors import InvalidInput

_NS = 1_000_000_000
_DAY_NS = 86_400 * _NS
# The view's `*_ns` columns hold a signed 64-bit count of nanoseconds (1677-09-21 .. 2262-04-11).
MIN_NS = -(2**63)
MAX_NS = 2**63 - 1

# chrono's `FromStr for DateTime<FixedOffset>` (`parse_rfc3339_relaxed`), which serde uses for every
# `DateTime<Utc>` in the journal: whitespace (Rust White_Space) may separate any components; numbers are
# ASCII digits, unpadded allowed (year 1-4 digits, or any length with a sign); the date and time are
# separated by exactly one `T`, `t` or space; an optional fraction needs at least one digit (only nine
# count); the offset is `UTC` (any case), `Z`/`z`, or a sign (`+`, `-`, U+2212) with hh, then colons or
# whitespace, then mm; trailing whitespace is allowed.
_WS = re.escape("\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009"
                "\u200a\u2028\u2029\u202f\u205f\u3000")
_W = f"[{_WS}]*"
_RFC3339 = re.compile(
    rf"{_W}([+-][0-9]+|[0-9]{{1,4}}){_W}-{_W}([0-9]{{1,2}}){_W}-{_W}([0-9]{{1,2}})[Tt ]"
    rf"{_W}([0-9]{{1,2}}){_W}:{_W}([0-9]{{1,2}}){_W}:{_W}([0-9]{{1,2}})(?:\.([0-9]+))?{_W}"
    rf"(?:([Uu][Tt][Cc])|([Zz])|([+\-\u2212])([0-9]{{2}})[:{_WS}]*([0-9]{{2}})){_W}\Z"
)


# The two forms chrono itself writes (AutoSi fraction; `Z` or `+00:00`): parsed without the general regex.
_CANONICAL = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})"
                        r"(?:\.([0-9]{3}|[0-9]{6}|[0-9]{9}))?(?:Z|\+00:00)")
_CANONICAL_MINUTE = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):")
_FRACTION_SCALE = {3: 1_000_000, 6: 1_000, 9: 1}


def _days_from_civil(y: int, m: int, d: int) -> int:
    y -= m <= 2
    era = y // 400  # (Python's // floors: no adjustment for negative years, unlike the C original)
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def _civil_from_days(z: int) -> tuple[int, int, int]:
    z += 719468
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    y = yoe + era * 400
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d = doy - (153 * mp + 2) // 5 + 1
    m = mp + (3 if mp < 10 else -9)
    return y + (m <= 2), m, d


# chrono's NaiveDateTime::MIN / MAX (MIN_YEAR = i32::MIN >> 13, MAX_YEAR = i32::MAX >> 13: chrono's
# src/naive/date/mod.rs), the instants a `DateTime<Utc>` can hold and so the ones serde reads.
CHRONO_MIN_NS = _days_from_civil(-262144, 1, 1) * _DAY_NS
CHRONO_MAX_NS = (_days_from_civil(262143, 12, 31) + 1) * _DAY_NS - 1


def _days_in_month(y: int, m: int) -> int:
    if m == 2:
        return 29 if (y % 4 == 0 and (y % 100 != 0 or y % 400 == 0)) else 28
    return 30 if m in (4, 6, 9, 11) else 31


@lru_cache(maxsize=8192)
def _date_days(y: int, mo: int, d: int) -> int:
    if not (1 <= mo <= 12 and 1 <= d <= _days_in_month(y, mo)):
        raise ValueError("no such date")
    return _days_from_civil(y, mo, d)


@lru_cache(maxsize=8192)
def _date_text(days: int) -> str:
    y, m, d = _civil_from_days(days)
    # chrono's write_rfc3339 (src/format/formatting.rs): four digits for years 0..=9999, else a sign and
    # at least four digits (`{:+05}`)
    year = f"{y:04d}" if 0 <= y <= 9999 else f"{y:+05d}"
    return f"{year}-{m:02d}-{d:02d}T"


def parse_ns(text: str) -> int:
    """Parse an RFC 3339 timestamp (any offset, 0-9+ fraction digits) to UTC epoch nanoseconds.

    Raises InvalidInput naming the text when it is not a valid timestamp.
    """
    fast = _CANONICAL.fullmatch(text) if type(text) is str else None
    if fast is not None:
        y, mo, d, hh, mi, ss, frac = fast.groups()
        try:
            days = _date_days(int(y), int(mo), int(d))
        except ValueError:
            raise InvalidInput(f"not an RFC 3339 timestamp: {text!r}") from None
        h, m_, s = int(hh), int(mi), int(ss)
        if h > 23 or m_ > 59 or s > 60:
            raise InvalidInput(f"not an RFC 3339 timestamp: {text!r}")
        nanos = int(frac) * _FRACTION_SCALE[len(frac)] if frac else 0
        if s == 60:
            return _leap((days * 86_400 + h * 3600 + m_ * 60 + 59) * _NS, nanos, text)
        return check_chrono_range((days * 86_400 + h * 3600 + m_ * 60 + s) * _NS + nanos, text)
    m = _RFC3339.match(text) if isinstance(text, str) else None
    if m is None:
        raise InvalidInput(f"not an RFC 3339 timestamp: {text!r}")
    y, mo, d, hh, mi, ss, frac, utc, zulu, sign, oh, om = m.groups()
    hh, mi, ss = int(hh), int(mi), int(ss)
    try:
        days = _date_days(int(y), int(mo), int(d))
    except ValueError:
        raise InvalidInput(f"not an RFC 3339 timestamp: {text!r}") from None
    if hh > 23 or mi > 59 or ss > 60:
        raise InvalidInput(f"not an RFC 3339 timestamp: {text!r}")
    nanos = int(frac[:9].ljust(9, "0")) if frac else 0
    offset_s = 0
    if sign is not None:
        offset_s = int(oh) * 3600 + int(om) * 60
        if int(om) > 59 or offset_s >= 86_400:  # FixedOffset::east_opt: |offset| < 24 h
            raise InvalidInput(f"not an RFC 3339 timestamp: {text!r}")
        offset_s = offset_s if sign == "+" else -offset_s
    if ss == 60:
        return _leap((days * 86_400 + hh * 3600 + mi * 60 + 59 - offset_s) * _NS, nanos, text)
    return check_chrono_range((days * 86_400 + hh * 3600 + mi * 60 + ss - offset_s) * _NS + nanos, text)


class LeapSecond(int):
    """An instant inside a leap second, `hh:mm:60.f`. chrono holds it as second 59 with nanoseconds
    1e9 + f, writes it back as `hh:mm:60.f` and orders it after every instant of :59 and before the
    next :00 (chrono's NaiveTime compares (secs, frac)). As an integer it is the last nanosecond of :59,
    so it sorts where chrono sorts it (tied only with :59.999999999 and with the other instants of the
    same leap second); `fraction` keeps f, so it is written back as it was read."""

    fraction: int

    def __new__(cls, ns: int, fraction: int) -> "LeapSecond":
        value = super().__new__(cls, ns)
        value.fraction = fraction
        return value


def _leap(second_59_ns: int, nanos: int, text: object) -> int:
    check_chrono_range(second_59_ns + _NS - 1, text)
    return LeapSecond(second_59_ns + _NS - 1, nanos)


def canonical_fact_time_ns(text: object) -> Optional[int]:
    """Epoch ns of a fact time written exactly as chrono writes one (AutoSi fraction, `Z`), so that
    `format_fact_time` gives the same text back; None for any other text (valid or not)."""
    if type(text) is not str or not text.endswith("Z"):
        return None
    minute = _canonical_minute_ns(text[:17])  # "YYYY-MM-DDTHH:MM:", shared by many facts
    seconds = text[17:19]
    if minute is None or not (seconds.isascii() and seconds.isdigit()) or seconds > "60":
        return None
    ns = minute + int(seconds) * _NS
    nanos = 0
    if len(text) != 20:
        frac = text[20:-1]
        if (text[19] != "." or len(frac) not in _FRACTION_SCALE or not (frac.isascii() and frac.isdigit())
                or frac.endswith("000")):  # AutoSi drops trailing zero triples
            return None
        nanos = int(frac) * _FRACTION_SCALE[len(frac)]
    if seconds == "60":  # a leap second (LeapSecond)
        return LeapSecond(ns - 1, nanos)
    return ns + nanos  # (every four-digit year is inside chrono's range)


@lru_cache(maxsize=4096)
def _canonical_minute_ns(prefix: str) -> Optional[int]:
    m = _CANONICAL_MINUTE.fullmatch(prefix)
    if m is None:
        return None
    y, mo, d, hh, mi = map(int, m.groups())
    if hh > 23 or mi > 59:
        return None
    try:
        days = _date_days(y, mo, d)
    except ValueError:
        return None
    return (days * 86_400 + hh * 3600 + mi * 60) * _NS


def check_range(ns: int, what: object) -> int:
    """`ns` itself, or InvalidInput when it does not fit the view's 64-bit nanosecond columns."""
    if not MIN_NS <= ns <= MAX_NS:
        raise InvalidInput(
            f"timestamp {what!r} is outside the supported range {_format(MIN_NS, 'Z')} .. {_format(MAX_NS, 'Z')}")
    return ns


def check_chrono_range(ns: int, what: object) -> int:
    """`ns` itself, or InvalidInput when a `DateTime<Utc>` cannot hold it (serde would reject it)."""
    if not CHRONO_MIN_NS <= ns <= CHRONO_MAX_NS:
        raise InvalidInput(f"timestamp {what!r} is outside chrono's range "
                           f"{_format(CHRONO_MIN_NS, 'Z')} .. {_format(CHRONO_MAX_NS, 'Z')}")
    return ns


@overload
def column_ns(ns: int) -> int: ...


@overload
def column_ns(ns: None) -> None: ...


def column_ns(ns: Optional[int]) -> Optional[int]:
    """The value of a `*_ns` column for the instant `ns`: itself, or the nearest end of the signed
    64-bit range for an instant outside it (its text column holds it exactly)."""
    if ns is None or MIN_NS <= ns <= MAX_NS:
        return ns
    return MAX_NS if ns > MAX_NS else MIN_NS


@overload
def from_columns(ns: int, text: str) -> int: ...


@overload
def from_columns(ns: Optional[int], text: Optional[str]) -> Optional[int]: ...


def from_columns(ns: Optional[int], text: Optional[str]) -> Optional[int]:
    """The instant a `*_ns` column and its text column hold together: the integer, unless it may stand
    for something else (an end of the range, where clamped instants sit; the last nanosecond of a
    second, where a leap second sits), then the text read back exactly."""
    if ns is None or text is None or (MIN_NS < ns < MAX_NS and ns % _NS != _NS - 1):
        return ns
    return parse_ns(text)


def _format(ns: int, suffix: str) -> str:
    days, rem = divmod(ns, _DAY_NS)
    secs, nanos = divmod(rem, _NS)
    hh, rest = divmod(secs, 3600)
    mi, ss = divmod(rest, 60)
    if type(ns) is LeapSecond:  # chrono writes a leap second as :60 with its own fraction
        ss, nanos = 60, ns.fraction
    if nanos == 0:
        frac = ""
    elif nanos % 1_000_000 == 0:
        frac = f".{nanos // 1_000_000:03d}"
    elif nanos % 1_000 == 0:
        frac = f".{nanos // 1_000:06d}"
    else:
        frac = f".{nanos:09d}"
    return f"{_date_text(days)}{hh:02d}:{mi:02d}:{ss:02d}{frac}{suffix}"


def format_fact_time(ns: int) -> str:
    """A fact timestamp as chrono serde writes it: AutoSi fraction, `Z` suffix."""
    return _format(ns, "Z")


def format_optional_fact_time(ns: Optional[int]) -> Optional[str]:
    """`format_fact_time`, or None for an unset timestamp."""
    return None if ns is None else _format(ns, "Z")


def format_event_time(ns: int) -> str:
    """An event timestamp as `Utc::now().to_rfc3339()` writes it: AutoSi fraction, `+00:00`."""
    return _format(ns, "+00:00")


def now_ns() -> int:
    return time.time_ns()
