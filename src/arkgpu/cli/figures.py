"""Figures for people: durations, sizes and rates in human units.

JSON documents keep machine figures (seconds, bytes); these functions are only for
what the command line prints. ``None`` (a figure that does not exist) prints as ``n/a``.
"""

from __future__ import annotations

import math

NA = "n/a"
"""What a missing figure prints as."""

_SMALL_UNITS = ((1e-6, 1e-9, "ns"), (1e-3, 1e-6, "µs"), (1.0, 1e-3, "ms"))


def _digits(value: float) -> str:
    """Three significant figures at most, no exponent."""
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def duration(seconds: float | None) -> str:
    """``0.0244`` -> ``24.4 ms``; ``70225`` -> ``19 h 30 min``; ``987404`` -> ``11 d 10 h``."""
    if seconds is None or not math.isfinite(seconds):
        return NA
    if seconds < 0:
        return f"-{duration(-seconds)}"
    if seconds == 0:
        return "0 s"
    for limit, scale, unit in _SMALL_UNITS:
        if seconds < limit:
            return f"{_digits(seconds / scale)} {unit}"
    if seconds < 60:
        return f"{_digits(seconds)} s"
    return _long_duration(round(seconds))


def _long_duration(seconds: int) -> str:
    minutes, secs = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    if days:
        return f"{days} d {hours} h"
    if hours:
        return f"{hours} h {minutes} min"
    return f"{minutes} min {secs} s"


def size(num_bytes: float | None) -> str:
    """``1536`` -> ``1.50 KiB``; ``3 * 2**30`` -> ``3.00 GiB``."""
    if num_bytes is None or not math.isfinite(num_bytes):
        return NA
    value = float(num_bytes)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{_digits(value)} {unit}"
        value /= 1024
    return NA  # pragma: no cover (the loop always returns)


def rate(per_second: float | None, what: str = "") -> str:
    """``1234.5, 'req'`` -> ``1.23 k req/s``; ``1234.5`` -> ``1.23 k/s``; ``0.5`` -> ``0.50/s``."""
    if per_second is None or not math.isfinite(per_second):
        return NA
    unit = f" {what}/s" if what else "/s"
    for scale, prefix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(per_second) >= scale:
            return f"{_digits(per_second / scale)} {prefix}{unit}"
    return f"{_digits(per_second)}{unit}"


def percent(value: float | None, places: int = 2) -> str:
    """``12.3456`` -> ``12.35%``."""
    if value is None or not math.isfinite(value):
        return NA
    return f"{value:.{places}f}%"


def count(value: float | None) -> str:
    """``1523`` -> ``1,523``; a fraction keeps one decimal."""
    if value is None or not math.isfinite(value):
        return NA
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.1f}"


def change(ratio: float | None) -> str:
    """A ratio as a signed change: ``1.25`` -> ``+25.0%``; no finite ratio -> ``n/a``."""
    if ratio is None or not math.isfinite(ratio):
        return NA
    return f"{(ratio - 1) * 100:+.1f}%"


def scaled_duration(value: float | None, unit_s: float) -> str:
    """A duration given in a unit of ``unit_s`` seconds (1e-3 for ms, 1e-9 for ns)."""
    return duration(None if value is None else value * unit_s)


MS = 1e-3
"""Seconds in a millisecond, for :func:`scaled_duration`."""
US = 1e-6
"""Seconds in a microsecond."""
NS = 1e-9
"""Seconds in a nanosecond."""
