"""Reading a component's settings from TOML: field parsers and one-line errors.

Every ArkGPU daemon (node runtime, extender, webhook, device plugin) keeps its
settings in a frozen dataclass and reads them from a TOML file. A table maps
each TOML key to a parser from this module; :func:`parsed` applies them and
turns any refusal into a ``ValueError`` that names the file and the field, and
an unknown key into one listing the known keys.

Each component's ``load_config`` is :func:`load_settings` with its own
``config_from_dict(table, source)``: reading the file and its TOML is here, once,
and every error of either is one line that names the file; the field parsing
and the checks across fields stay with the component.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

Parser = Callable[[object], Any]
"""Turns a TOML value into a field's value; TypeError (the reason) when it cannot."""
Settings = TypeVar("Settings")


def number(low: float, high: float | None = None) -> Parser:
    """A number > ``low`` (and <= ``high`` when given), as a float."""

    def parse(value: object) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise TypeError(f"expected a number, got {value!r}")
        if value <= low or (high is not None and value > high):
            bound = f"> {low:g}" + (f" and <= {high:g}" if high is not None else "")
            raise TypeError(f"expected a number {bound}, got {value!r}")
        return float(value)

    return parse


def integer(low: int, high: int | None = None) -> Parser:
    """An integer >= ``low`` (and <= ``high`` when given)."""

    def parse(value: object) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise TypeError(f"expected an integer >= {low}, got {value!r}")
        if high is not None and value > high:
            raise TypeError(f"expected an integer <= {high}, got {value!r}")
        return value

    return parse


def boolean(value: object) -> bool:
    """``true`` or ``false``."""
    if not isinstance(value, bool):
        raise TypeError(f"expected true or false, got {value!r}")
    return value


def text(value: object) -> str:
    """A non-empty string."""
    if not isinstance(value, str) or not value:
        raise TypeError(f"expected a non-empty string, got {value!r}")
    return value


def path(value: object) -> Path:
    """A non-empty string, as a path."""
    return Path(text(value))


def choice(*allowed: str) -> Parser:
    """One of ``allowed``."""

    def parse(value: object) -> str:
        if value not in allowed:
            raise TypeError(f"expected one of {', '.join(allowed)}, got {value!r}")
        return str(value)

    return parse


def parsed(table: dict[str, Any], parsers: dict[str, Parser], where: str) -> dict[str, Any]:
    """``table`` with every value parsed; ``where`` prefixes errors (``"file: "``)."""
    out = {}
    for key, value in table.items():
        if key not in parsers:
            known = ", ".join(parsers)
            raise ValueError(f"{where}unknown field {key!r} (known: {known})")
        try:
            out[key] = parsers[key](value)
        except TypeError as exc:
            raise ValueError(f"{where}field {key}: {exc}") from None
    return out


def read_toml(file: Path) -> dict[str, Any]:
    """The table in ``file``; ValueError with one line naming the file."""
    try:
        content = file.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{file}: not a UTF-8 text file") from None
    except OSError as exc:
        raise ValueError(f"{file}: cannot read ({exc.strerror})") from None
    try:
        return tomllib.loads(content)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{file}: not valid TOML ({exc})") from None


def load_settings(file: Path, build: Callable[[dict[str, Any], str], Settings]) -> Settings:
    """``build(table, source)`` of the TOML table in ``file``, ``source`` being the file's name.

    Every error, the file's (unreadable, not UTF-8, not TOML) and the fields' (``build``
    prefixes its messages with ``source``), is a ValueError of one line naming the file.
    """
    return build(read_toml(file), str(file))


def subtable(top: dict[str, Any], key: str, source: str) -> dict[str, Any]:
    """Pops the table ``[key]`` from ``top`` (empty when absent); ValueError when not a table."""
    value = top.pop(key, {})
    if not isinstance(value, dict):
        raise ValueError(f"{source}: field {key}: expected a table, got {value!r}")
    return value
