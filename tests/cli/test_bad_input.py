"""Every command refuses bad input with one line that names the option or file.

The cases are of two kinds:

- generated: every option whose type knows values it refuses (``ArgType.bad``), and
  every option with fixed choices, gets each of those values;
- written out: inputs only a command can judge (a file's contents, a name resolved
  later, an output that exists) and options that take free text; the general ones
  (``CASES``) here, the others by area in ``test_bad_input_placement.py``,
  ``test_bad_input_predictor.py`` and ``test_bad_input_k8s.py``.

Each case must end with exit status 2 and exactly one line on standard error,
``arkgpu: error: ...``, naming what it checks; nothing on standard output, never a
traceback, never a success. The parser tree is walked so that a command or an option
without a case in any of these files fails the test. The shared helpers are in
``bad_input_helpers.py``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from arkgpu.cli.main import build_parser, main
from cli.bad_input_helpers import (
    Case,
    check,
    generated_cases,
    groups_without_command,
    leaves,
    option_name,
    run_case,
    takes_value,
)
from cli.test_bad_input_k8s import K8S_CASES
from cli.test_bad_input_placement import P_RUN, PLACEMENT_CASES
from cli.test_bad_input_predictor import PREDICTOR_CASES

CASES: tuple[Case, ...] = (
    Case("no command group", (), "GROUP", "command"),
    Case("an unknown command group", ("nosuch",), "nosuch", "command"),
    Case("an unknown top-level option", ("--nosuch", "limiter", "show", "{dir}"), "--nosuch", "-"),
    Case("an unknown option of a command", (*P_RUN, "--nosuch"), "--nosuch", "-"),
    Case("an option of another command", (*P_RUN, "--modes", "all"), "--modes", "-"),
    Case("demo --out: an existing file", ("demo", "--out", "{file}"), "{file}", "--out"),
    Case("demo --seeds: not a number", ("demo", "--seeds", "abc"), "--seeds", "--seeds"),
    Case("demo --jobs: not a number", ("demo", "--jobs", "abc"), "--jobs", "--jobs"),
    Case("demo --only: an unknown part", ("demo", "--only", "nosuch"), "--only", "--only"),
)
GENERAL_CASES = (*CASES, *generated_cases(), *groups_without_command())
"""The cases of this file: the general ones and those generated from the parser tree."""
EVERY_CASE = (*GENERAL_CASES, *PLACEMENT_CASES, *PREDICTOR_CASES, *K8S_CASES)
"""The cases of every bad-input file."""


@pytest.mark.parametrize("case", GENERAL_CASES, ids=lambda c: c.what)
def test_bad_input_is_one_line_naming_the_option(
    case: Case, files: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """The case exits 2 with one ``arkgpu: error:`` line naming its option or file."""
    run_case(case, files, capsys)


def test_every_command_and_option_has_a_case() -> None:
    """A command or an option that takes a value, added without a bad-input case, fails."""
    covered = {(c.argv[: len(p)], c.option) for c in EVERY_CASE for p, _ in leaves(build_parser())}
    for path, parser in leaves(build_parser()):
        assert any(c.argv[: len(path)] == path for c in EVERY_CASE), f"no case for {path}"
        for action in filter(takes_value, parser._actions):
            assert (path, option_name(action)) in covered, (
                f"no case for {' '.join(path)} {option_name(action)}"
            )


@pytest.mark.parametrize(
    ("argv", "expect"),
    [
        (["placement", "run", "--policy", "fgd", "--seed", "-5"], "--seed"),
        (["colocate", "bench", "--seeds", "5-1"], "--seeds"),
        (["limiter", "show", "{file}"], "{file}"),
    ],
)
def test_the_installed_command_answers_in_one_line(
    argv: list[str], expect: str, files: dict[str, str]
) -> None:
    """The real entry point (the ``arkgpu`` script, else ``python -m arkgpu``) behaves alike."""
    script = Path(sys.executable).parent / "arkgpu"
    command = [str(script)] if script.exists() else [sys.executable, "-m", "arkgpu"]
    words = [w.format(**files) for w in argv]
    env = {**os.environ, "COLUMNS": "80"}
    done = subprocess.run(
        [*command, *words], capture_output=True, text=True, timeout=120, env=env, check=False
    )
    check(done.returncode, done.stdout, done.stderr, expect.format(**files))


def test_an_unexpected_error_is_one_line_unless_debugging(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bug prints one line and exit status 70; ARKGPU_DEBUG=1 raises it with its traceback."""
    from arkgpu.cli import colocate  # noqa: PLC0415

    def broken(args: argparse.Namespace) -> int:
        raise RuntimeError("boom")

    monkeypatch.setattr(colocate, "_mps_check", broken)
    monkeypatch.delenv("ARKGPU_DEBUG", raising=False)
    assert main(["colocate", "mps-check"]) == 70
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "RuntimeError: boom" in err
    assert "ARKGPU_DEBUG=1" in err
    monkeypatch.setenv("ARKGPU_DEBUG", "1")
    with pytest.raises(RuntimeError, match="boom"):
        main(["colocate", "mps-check"])


def test_a_missing_key_in_our_own_data_is_a_bug(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A plain KeyError is not blamed on the user: exit 70, not 2."""
    from arkgpu.cli import colocate  # noqa: PLC0415

    def broken(args: argparse.Namespace) -> int:
        summaries: dict[str, int] = {}
        return summaries["summaries"]

    monkeypatch.setattr(colocate, "_mps_check", broken)
    monkeypatch.delenv("ARKGPU_DEBUG", raising=False)
    assert main(["colocate", "mps-check"]) == 70
    assert "internal error (a bug): KeyError" in capsys.readouterr().err
