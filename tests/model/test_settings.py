"""Reading settings files: one ValueError line that names the file and, past the TOML, the field.

Pinned for :func:`arkgpu.model.settings.load_settings` (every daemon's ``load_config``)
and :func:`~arkgpu.model.settings.subtable`: what ``build`` is given, and the messages
an unreadable file, a non-UTF-8 file, bad TOML, a bad field and a non-table give.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from arkgpu.model.settings import integer, load_settings, parsed, subtable, text

PARSERS = {"name": text, "count": integer(1)}


def _build(table: dict[str, Any], source: str) -> dict[str, Any]:
    top = dict(table)
    inner = parsed(subtable(top, "inner", source), PARSERS, f"{source}: [inner] ")
    return {**parsed(top, PARSERS, f"{source}: "), "inner": inner}


def _error(file: Path) -> str:
    with pytest.raises(ValueError, match=f"^{re.escape(str(file))}: ") as info:
        load_settings(file, _build)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_build_gets_the_table_and_the_files_name(tmp_path: Path) -> None:
    """The TOML table and ``str(file)``, the prefix of the build's own messages."""
    file = tmp_path / "a.toml"
    file.write_text('name = "x"\ncount = 2\n[inner]\ncount = 3\n', encoding="utf-8")
    seen: list[tuple[dict[str, Any], str]] = []

    def build(table: dict[str, Any], source: str) -> int:
        seen.append((table, source))
        return 7

    assert load_settings(file, build) == 7
    assert seen == [({"name": "x", "count": 2, "inner": {"count": 3}}, str(file))]
    assert load_settings(file, _build) == {"name": "x", "count": 2, "inner": {"count": 3}}


def test_an_unreadable_file_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "missing.toml"
    assert _error(missing) == f"{missing}: cannot read (No such file or directory)"


def test_a_binary_file_is_not_utf8(tmp_path: Path) -> None:
    file = tmp_path / "binary.toml"
    file.write_bytes(b"name = '\xff\xfe'\n")
    assert _error(file) == f"{file}: not a UTF-8 text file"


def test_bad_toml_names_the_file_and_the_line(tmp_path: Path) -> None:
    file = tmp_path / "bad.toml"
    file.write_text('name = "x"\ncount =\n', encoding="utf-8")
    message = _error(file)
    assert message.startswith(f"{file}: not valid TOML (")
    assert "line 2" in message


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("count = 0\n", "field count: expected an integer >= 1, got 0"),
        ("colour = 1\n", "unknown field 'colour' (known: name, count)"),
        ("[inner]\nname = 3\n", "[inner] field name: expected a non-empty string, got 3"),
        ("inner = 3\n", "field inner: expected a table, got 3"),
    ],
)
def test_a_bad_field_is_named_after_the_file(tmp_path: Path, content: str, expected: str) -> None:
    file = tmp_path / "fields.toml"
    file.write_text(content, encoding="utf-8")
    assert _error(file) == f"{file}: {expected}"


def test_subtable_pops_the_table_and_defaults_to_empty() -> None:
    top: dict[str, Any] = {"a": 1, "t": {"b": 2}}
    assert subtable(top, "t", "f") == {"b": 2}
    assert top == {"a": 1}
    assert subtable(top, "t", "f") == {}
    assert top == {"a": 1}
