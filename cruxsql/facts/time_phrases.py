"""Times as people and agents write them, for every time filter: RFC 3339, a date, or a phrase.

    resolve("yesterday", "stored_after", zone="Europe/Paris").text   # '2026-12-06T00:00:00+01:00'

Accepted, case-insensitive:

* RFC 3339 (`2026-11-03T09:00:00Z`): that instant, exactly;
* a date, `2026`, `2026-11` or `2026-11-03`: the start of that year, month or day;
* `now`, `today`, `yesterday`;
* `N unit(s) ago` (seconds, minutes, hours, days, weeks, months, years; `a`/`an` for 1);
* a duration ago as retention writes it, `45s`, `30m`, `12h`, `7d`, `2w`;
* `this|last week|month|year`: the start of that calendar week (weeks start on Monday), month or year;
* a weekday (`monday`, `last monday`): the start of its most recent day, today if it is that day;
* `since X`: X.

Days begin at midnight in the caller's stated zone (an IANA name such as `Europe/Paris`), else the
server's. Anything else is one error naming the argument, with examples of every form.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone, tzinfo
from typing import Optional
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ..errors import InvalidInput
from . import timestamps

EXAMPLES = "RFC 3339 (2026-11-03T09:00:00Z), a date (2026-11, 2026-11-03) or a phrase (yesterday, last week, " \
           "3 days ago, 7d, since monday)"
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
UNITS = {"second": timedelta(seconds=1), "minute": timedelta(minutes=1), "hour": timedelta(hours=1),
         "day": timedelta(days=1), "week": timedelta(weeks=1)}
_DATE = re.compile(r"^(\d{4})(?:-(\d{2}))?(?:-(\d{2}))?$")
_AGO = re.compile(r"^(\d+|an?)\s+(second|minute|hour|day|week|month|year)s?\s+ago$")
_SHORT = re.compile(r"^(\d+)\s*([smhdw])$")
_PERIOD = re.compile(r"^(this|last)\s+(week|month|year)$")
_WEEKDAY = re.compile(r"^(?:last\s+)?(" + "|".join(WEEKDAYS) + r")$")


@dataclass(frozen=True)
class Resolved:
    """A time argument resolved: its name, what was written, nanoseconds since the epoch and the instant
    as RFC 3339 (as written when it was RFC 3339, else in the zone it was resolved in)."""

    name: str
    written: str
    ns: int
    text: str

    @property
    def was_phrase(self) -> bool:
        return self.text != self.written

    def echo(self) -> str:
        return f"{self.name} {self.written!r} = {self.text}"


def resolve_all(values: dict[str, Optional[str]], *, zone: Optional[str] = None,
                now_ns: Optional[int] = None) -> dict[str, Resolved]:
    """Each given time argument (None: not given) resolved, by name."""
    return {name: resolve(value, name, zone=zone, now_ns=now_ns) for name, value in values.items() if value is not None}


def echo_line(resolved: dict[str, Resolved]) -> Optional[str]:
    """One line saying what the phrases among `resolved` were read as (None when all were RFC 3339)."""
    phrases = [r.echo() for r in resolved.values() if r.was_phrase]
    return "times: " + "; ".join(phrases) if phrases else None


def zone_named(name: Optional[str]) -> tzinfo:
    """The IANA zone `name`, or the server's own zone when None."""
    if name is None:
        local = datetime.now().astimezone().tzinfo
        assert local is not None     # astimezone() always sets one
        return local
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidInput(f"time_zone: unknown time zone {name!r} (an IANA name, e.g. Europe/Paris or UTC)") from None


def resolve(value: str, name: str, *, zone: Optional[str] = None, now_ns: Optional[int] = None) -> Resolved:
    """`value` as an instant (see the module docstring); InvalidInput naming `name` when it is none."""
    try:
        return Resolved(name, value, timestamps.parse_ns(value), value)
    except InvalidInput:
        pass
    tz = zone_named(zone)
    now = datetime.fromtimestamp((timestamps.now_ns() if now_ns is None else now_ns) / 1e9, tz)
    when = _phrase(" ".join(value.lower().split()).removeprefix("since "), now, tz)
    if when is None:
        raise InvalidInput(f"{name}: cannot read {value!r} as a time; use {EXAMPLES}")
    return Resolved(name, value, (when - EPOCH) // timedelta(microseconds=1) * 1000, when.isoformat())


def _phrase(text: str, now: datetime, tz: tzinfo) -> Optional[datetime]:
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
    fixed = {"now": now, "today": _day_start(midnight, tz), "yesterday": _day_start(midnight - timedelta(days=1), tz)}
    if text in fixed:
        return fixed[text]
    for pattern, reader in ((_DATE, _date), (_AGO, _ago), (_SHORT, _short), (_PERIOD, _period), (_WEEKDAY, _weekday)):
        match = pattern.match(text)
        if match:
            return reader(match, now, midnight, tz)
    return None


def _day_start(day: datetime, tz: tzinfo) -> datetime:
    """Midnight of `day`'s date in `tz` (its offset recomputed: a DST change may lie between)."""
    return datetime(day.year, day.month, day.day, tzinfo=tz)


def _date(match: re.Match, now: datetime, midnight: datetime, tz: tzinfo) -> Optional[datetime]:
    year, month, day = int(match[1]), int(match[2] or 1), int(match[3] or 1)
    try:
        return datetime(year, month, day, tzinfo=tz)
    except ValueError:
        return None


def _ago(match: re.Match, now: datetime, midnight: datetime, tz: tzinfo) -> Optional[datetime]:
    count, unit = (1 if match[1] in ("a", "an") else int(match[1])), match[2]
    if unit in UNITS:
        return now - count * UNITS[unit]
    months = count * (12 if unit == "year" else 1)
    return _months_before(now, months)


def _short(match: re.Match, now: datetime, midnight: datetime, tz: tzinfo) -> datetime:
    unit = next(name for name in UNITS if name[0] == match[2])
    return now - int(match[1]) * UNITS[unit]


def _months_before(when: datetime, months: int) -> datetime:
    """The same day and time `months` calendar months earlier (the month's last day when shorter)."""
    index = when.year * 12 + when.month - 1 - months
    year, month = divmod(index, 12)
    for day in range(when.day, 27, -1):
        try:
            return when.replace(year=year, month=month + 1, day=day)
        except ValueError:
            continue
    return when.replace(year=year, month=month + 1, day=min(when.day, 28))


def _period(match: re.Match, now: datetime, midnight: datetime, tz: tzinfo) -> datetime:
    which, unit = match[1], match[2]
    if unit == "week":
        start = midnight - timedelta(days=midnight.weekday())
        return _day_start(start - timedelta(weeks=1) if which == "last" else start, tz)
    if unit == "month":
        start = midnight.replace(day=1)
        return _day_start(_months_before(start, 1) if which == "last" else start, tz)
    return datetime(now.year - (which == "last"), 1, 1, tzinfo=tz)


def _weekday(match: re.Match, now: datetime, midnight: datetime, tz: tzinfo) -> datetime:
    back = (midnight.weekday() - WEEKDAYS.index(match[1])) % 7
    return _day_start(midnight - timedelta(days=back), tz)
