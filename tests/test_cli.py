"""The command line's shared behaviour and conventions."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

import pytest

from arkgpu.cli.main import GROUPS, build_parser, main
from arkgpu.cli.options import ArgType

PENDING: tuple[str, ...] = ()
"""Groups whose options are not yet under the convention: ``demo`` is being rewritten
(it owns its options); every other group must follow it."""


def test_version_prints_and_exits_zero(capsys: pytest.CaptureFixture[str]) -> None:
    """``arkgpu --version`` names the package version."""
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert "arkgpu 0.1.0" in capsys.readouterr().out


def test_help_lists_every_group_without_loading_it(capsys: pytest.CaptureFixture[str]) -> None:
    """``arkgpu --help`` names every group with its summary."""
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for name in GROUPS:
        assert name in out


def _commands() -> Iterator[tuple[str, argparse.ArgumentParser]]:
    def walk(
        parser: argparse.ArgumentParser, path: str
    ) -> Iterator[tuple[str, argparse.ArgumentParser]]:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs:
            yield path, parser
            return
        assert subs[0].metavar == ("GROUP" if not path else "COMMAND"), path
        for name, child in subs[0].choices.items():
            yield from walk(child, f"{path} {name}".strip())

    yield from walk(build_parser(), "")


def test_every_option_says_what_it_takes_and_its_default() -> None:
    """Every option has help; one that takes a value gives its default or says required,
    and is checked by a type (or fixed choices) when it is a number, a list or a path."""
    for path, parser in _commands():
        if path.split()[0] in PENDING:
            continue
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            name = action.option_strings[0] if action.option_strings else action.dest
            assert action.help, f"{path} {name}: no help text"
            if action.nargs == 0 or not action.option_strings:
                continue
            assert "default" in action.help or action.required, f"{path} {name}: no default"
            assert action.metavar, f"{path} {name}: no metavar naming what it takes"


def test_outputs_are_named_the_same_everywhere() -> None:
    """``--json`` takes an optional PATH and ``--plot`` a PATH in every command."""
    for path, parser in _commands():
        for action in parser._actions:
            if "--json" in action.option_strings:
                assert action.metavar == "PATH", path
                assert isinstance(action.type, ArgType), path
            if "--plot" in action.option_strings:
                assert action.metavar == "PATH", path
                assert isinstance(action.type, ArgType), path


def test_every_help_page_formats() -> None:
    """Each command's ``--help`` renders, with no unformatted or broken text."""
    for path, parser in _commands():
        text = parser.format_help()
        assert "option_strings" not in text, path
        assert f"usage: arkgpu {path}" in " ".join(text.split()), path
