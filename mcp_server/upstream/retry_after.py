"""Retry-After (RFC 9110 §10.2.3), read totally: seconds, or None.

`Retry-After = HTTP-date / delay-seconds`. delay-seconds are ASCII digits only (str.isdigit
also admits "²" and "١", which int() refuses); an HTTP-date is one of the three forms of
§5.6.7, always GMT. Whatever else a gateway sends is ignored, never raised.
"""

from __future__ import annotations

import functools
import re
import time
from typing import Final

# Longer than ten digits (over 300 years) is not a wait anyone means; it is ignored, not stated.
MAX_DIGITS: Final = 10
_MONTHS: Final = {m: i for i, m in enumerate("Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split(), 1)}
_DAY: Final = r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)"
_DAY_LONG: Final = r"(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday)"
_MONTH: Final = r"(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
_TIME: Final = r"([0-9]{2}):([0-9]{2}):([0-9]{2})"


@functools.cache
def _forms() -> tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str]]:
    # Compiled on first use: a date is rare, and start-up does not pay for it.
    return (
        # IMF-fixdate: Sun, 06 Nov 1994 08:49:37 GMT
        re.compile(rf"{_DAY}, ([0-9]{{2}}) {_MONTH} ([0-9]{{4}}) {_TIME} GMT", re.ASCII),
        # rfc850-date: Sunday, 06-Nov-94 08:49:37 GMT
        re.compile(rf"{_DAY_LONG}, ([0-9]{{2}})-{_MONTH}-([0-9]{{2}}) {_TIME} GMT", re.ASCII),
        # asctime-date: Sun Nov  6 08:49:37 1994
        re.compile(rf"{_DAY} {_MONTH} ([0-9]{{2}}| [0-9]) {_TIME} ([0-9]{{4}})", re.ASCII),
    )


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """The wait a Retry-After value asks for: 0 if past; None if absent or bad."""
    if value is None:
        return None
    value = value.strip(" \t")
    if value.isascii() and value.isdigit():
        significant = value.lstrip("0") or "0"
        return float(significant) if len(significant) <= MAX_DIGITS else None
    now = time.time() if now is None else now
    when = http_date(value, now)
    return None if when is None else max(when - now, 0.0)


def http_date(value: str, now: float) -> float | None:
    """An HTTP-date (any of its three forms) as a POSIX timestamp, or None.

    None too for no real time. `now` places an rfc850-date's two-digit year.
    """
    import datetime as dt  # a date is rare: not worth loading at start

    imf, rfc850, asctime = _forms()
    if match := imf.fullmatch(value):
        day, month, year, hour, minute, second = match.groups()
        return _timestamp(int(year), month, int(day), hour, minute, second)
    if match := rfc850.fullmatch(value):
        day, month, yy, hour, minute, second = match.groups()
        # "MUST interpret a timestamp that appears to be more than 50 years in the future as
        # representing the most recent year in the past that had the same last two digits."
        this_year = dt.datetime.fromtimestamp(now, dt.UTC).year
        year = this_year - this_year % 100 + int(yy)
        if year > this_year + 50:
            year -= 100
        return _timestamp(year, month, int(day), hour, minute, second)
    if match := asctime.fullmatch(value):
        month, day, hour, minute, second, year = match.groups()
        return _timestamp(int(year), month, int(day.strip()), hour, minute, second)
    return None


def _timestamp(year: int, month: str, day: int, hour: str, minute: str, second: str) -> float | None:
    import datetime as dt

    # A leap second (60) is allowed by the grammar and has no datetime of its own.
    try:
        when = dt.datetime(year, _MONTHS[month], day, int(hour), int(minute), min(int(second), 59), tzinfo=dt.UTC)
    except ValueError:  # 30 Feb, hour 25, year 0
        return None
    return when.timestamp()
