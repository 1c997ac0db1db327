"""Checked argparse types: a value a user types is refused at parse time with one line
that names the option and what it accepts. Standard library only (fast start-up).
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


class CliError(Exception):
    """A user error that the command line reports in one line, exit status 2."""


@dataclass(frozen=True)
class ArgType(Generic[T]):
    """An argparse type that knows values it refuses (the bad-input test feeds them).

    ``bad`` may hold placeholders the test fills with its files: ``{missing}`` (no such
    path), ``{dir}`` (a folder), ``{file}`` (a text file), ``{empty}`` (an empty file).
    """

    parse: Callable[[str], T]
    """Turns the text into the value; raises ``argparse.ArgumentTypeError``."""
    bad: tuple[str, ...]
    """Values ``parse`` refuses."""
    name: str = "value"
    """What argparse calls the type."""

    def __call__(self, text: str) -> T:
        return self.parse(text)


def _fail(text: str, accepted: str, why: str = "") -> argparse.ArgumentTypeError:
    return argparse.ArgumentTypeError(f"expected {accepted}, got {text!r}{why}")


def _bounds_text(low: float | None, high: float | None, low_open: bool, kind: str) -> str:
    parts = []
    if low is not None:
        parts.append(f"{'>' if low_open else '>='} {low:g}")
    if high is not None:
        parts.append(f"<= {high:g}")
    return f"{kind} {' and '.join(parts)}".strip()


def integer(low: int | None = None, high: int | None = None) -> ArgType[int]:
    """An argparse type: an integer within ``[low, high]``."""
    accepted = _bounds_text(low, high, False, "an integer")

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise _fail(text, accepted) from None
        if (low is not None and value < low) or (high is not None and value > high):
            raise _fail(text, accepted)
        return value

    bad = ["abc", "1.5"]
    bad += [] if low is None else [str(low - 1)]
    bad += [] if high is None else [str(high + 1)]
    return ArgType(parse, tuple(bad), "integer")


def number(
    low: float | None = None, high: float | None = None, low_open: bool = False
) -> ArgType[float]:
    """An argparse type: a finite number above ``low`` (or at it unless ``low_open``)."""
    accepted = _bounds_text(low, high, low_open, "a number")

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise _fail(text, accepted) from None
        too_low = low is not None and (value <= low if low_open else value < low)
        if not math.isfinite(value) or too_low or (high is not None and value > high):
            raise _fail(text, accepted)
        return value

    bad = ["abc", "nan", "inf"]
    bad += [] if low is None else [f"{low:g}" if low_open else f"{low - 1:g}"]
    bad += [] if high is None else [f"{high * 2 + 1:g}"]
    return ArgType(parse, tuple(bad), "number")


def _seed_list(text: str) -> tuple[int, ...]:
    accepted = "seeds as N, N-M or N,M,... (integers >= 0)"
    seeds: list[int] = []
    for part in text.split(","):
        low, dash, high = part.strip().partition("-")
        try:
            first, last = int(low), int(high if dash else low)
        except ValueError:
            raise _fail(text, accepted) from None
        if first < 0:
            raise _fail(text, accepted, ": a seed is negative")
        if last < first:
            raise _fail(text, accepted, f": end before start in {part.strip()}")
        if last - first > 100_000:
            raise _fail(text, accepted, ": more than 100,000 seeds")
        seeds.extend(range(first, last + 1))
    return tuple(seeds)


seed_list = ArgType(_seed_list, ("5-1", "-5", "abc", "", "1,,2", "0-999999"), "seeds")
"""An argparse type: seeds as ``N``, ``N-M`` or ``N,M,...`` (each >= 0, ranges ascending)."""


def _grid_size(text: str) -> tuple[int, int]:
    accepted = "BxS (batches x shares, integers >= 1, at least 2 points in all)"
    found = re.fullmatch(r"(\d+)x(\d+)", text.strip(), flags=re.ASCII)
    if found is None:
        raise _fail(text, accepted)
    batches, shares = int(found[1]), int(found[2])
    if min(batches, shares) < 1 or batches * shares < 2:
        raise _fail(text, accepted)
    return batches, shares


grid_size = ArgType(_grid_size, ("3", "0x2", "1x1", "ax2", "3x2x1", "٣x2"), "grid")
"""An argparse type: ``BxS``, a count of batches times a count of shares (2 points or more)."""


def name_list(
    known: Callable[[], Sequence[str]],
    all_word: str | None = None,
    empty: bool = False,
    noun: str = "names",
) -> ArgType[tuple[str, ...]]:
    """An argparse type: a comma list of names from ``known()`` (``all_word``: all of them;
    ``empty``: an empty text means none; ``noun``: what the names are, for errors)."""

    def parse(text: str) -> tuple[str, ...]:
        names = known()
        if all_word is not None and text.strip() == all_word:
            return tuple(names)
        chosen = tuple(n.strip() for n in text.split(",") if n.strip())
        if empty and not text.strip():
            return ()
        unknown = [n for n in chosen if n not in names]
        extra = f", or {all_word!r}" if all_word else ""
        accepted = f"a comma list of {', '.join(names)}{extra}"
        if unknown:
            raise argparse.ArgumentTypeError(
                f"unknown {noun} {', '.join(unknown)} (expected {accepted})"
            )
        if not chosen:
            raise _fail(text, accepted)
        return chosen

    return ArgType(parse, ("nosuch",) if empty else ("nosuch", ""), "names")


def number_list(low: float, high: float) -> ArgType[tuple[float, ...]]:
    """An argparse type: a comma list of numbers strictly between ``low`` and ``high``."""
    accepted = f"a comma list of numbers > {low:g} and < {high:g}"

    def parse(text: str) -> tuple[float, ...]:
        try:
            values = tuple(float(v) for v in text.split(","))
        except ValueError:
            raise _fail(text, accepted) from None
        if not all(low < v < high for v in values):
            raise _fail(text, accepted)
        return values

    return ArgType(parse, ("abc", f"{low:g}", f"{high:g}", "nan", ""), "numbers")
