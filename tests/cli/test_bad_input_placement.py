"""Bad input to the placement commands: trace and node files, the study's options.

Each case must end as every bad input does (:func:`bad_input_helpers.check`).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from cli.bad_input_helpers import Case, run_case

P_RUN = ("placement", "run", "--policy", "fgd")
TRACE_COMMANDS = (
    P_RUN,
    ("placement", "bench"),
    ("placement", "bound"),
    ("placement", "defrag", "--policy", "fgd"),
    ("placement", "replay", "--policy", "fgd"),
    ("placement", "cost"),
    ("placement", "anatomy"),
)


def _trace_cases() -> Iterator[Case]:
    for cmd in TRACE_COMMANDS:
        for value, expect, what in (
            ("{tmp}/missing.csv", "missing.csv", "a trace file that does not exist"),
            ("nosuchtrace", "nosuchtrace", "an openb name with no file"),
            ("{binary}", "{binary}", "a binary trace file"),
            ("{wrong_csv}", "{wrong_csv}", "a trace CSV with the wrong header"),
            ("{empty}", "{empty}", "an empty trace file"),
        ):
            yield Case(
                f"{' '.join(cmd[:2])} --trace: {what}", (*cmd, "--trace", value), expect, "--trace"
            )
        yield Case(
            f"{' '.join(cmd[:2])} --nodes: a binary node list",
            (*cmd, "--nodes", "{binary}"),
            "--nodes",
            "--nodes",
        )


PLACEMENT_CASES: tuple[Case, ...] = (
    *_trace_cases(),
    Case(
        "placement study --traces: an unknown trace",
        ("placement", "study", "--json", "{tmp}/s.json", "--traces", "nosuchtrace"),
        "nosuchtrace",
        "--traces",
    ),
    Case(
        "placement study --traces: no trace at all",
        ("placement", "study", "--json", "{tmp}/s.json", "--traces", ","),
        "--traces",
        "--traces",
    ),
    Case(
        "placement study --json: standard output (the study rewrites its file)",
        ("placement", "study", "--json", "-"),
        "--json",
        "--json",
    ),
    Case(
        "placement study --nodes: a node list with the wrong header",
        (
            "placement",
            "study",
            "--json",
            "{tmp}/s.json",
            "--traces",
            "default",
            "--nodes",
            "{wrong_csv}",
        ),
        "--nodes",
        "--nodes",
    ),
    Case(
        "placement bench --json: a folder that cannot be made (parent is a file)",
        ("placement", "bench", "--json", "{file}/nodir/x.json"),
        "{file}",
        "--json",
    ),
)


@pytest.mark.parametrize("case", PLACEMENT_CASES, ids=lambda c: c.what)
def test_bad_input_is_one_line_naming_the_option(
    case: Case, files: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """The case exits 2 with one ``arkgpu: error:`` line naming its option or file."""
    run_case(case, files, capsys)
