"""What the bad-input tests (``test_bad_input*.py``) share: a case, the check of its one
line, the bad files the cases name, and the cases generated from the parser tree."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from arkgpu.cli.main import build_parser, main
from arkgpu.cli.options import ArgType


@dataclass(frozen=True)
class Case:
    """One bad command line."""

    what: str
    """What the case checks."""
    argv: tuple[str, ...]
    """The command line, with placeholders for the test's files ({dir}, {binary}...)."""
    expect: str
    """Text the error line must contain (the option or the file); placeholders allowed."""
    option: str
    """The option (or positional's name) the case covers."""


def leaves(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every command (a parser without subcommands) under ``parser``, with its words."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path, parser
        return
    for name, child in subs[0].choices.items():
        yield from leaves(child, (*path, name))


def takes_value(action: argparse.Action) -> bool:
    """Whether ``action`` is an option or positional that takes a value."""
    return action.nargs != 0 and not isinstance(
        action, argparse._HelpAction | argparse._VersionAction | argparse._SubParsersAction
    )


def option_name(action: argparse.Action) -> str:
    """The option's first spelling, or the positional's name."""
    return action.option_strings[0] if action.option_strings else action.dest


VALID_POSITIONALS = {"source": "{dir}", "predictor": "{predictor}", "region": "{dir}"}
"""A good value of each positional, to reach the positionals after it."""


def generated_cases() -> Iterator[Case]:
    """Each refused value of every typed option, and an unknown choice of every choice."""
    for path, parser in leaves(build_parser()):
        before: list[str] = []
        for action in filter(takes_value, parser._actions):
            name = option_name(action)
            head = [name] if action.option_strings else list(before)
            if not action.option_strings:
                before.append(VALID_POSITIONALS.get(action.dest, "x"))
            bad: tuple[str, ...] = ()
            if isinstance(action.type, ArgType):
                bad = action.type.bad
            elif action.choices is not None:
                bad = ("nosuch",)
            expect = name if action.option_strings else (action.metavar or action.dest)
            for value in bad:
                argv = (*path, *head, value)
                yield Case(f"{' '.join(path)} {name} {value!r}: refused", argv, str(expect), name)


def groups_without_command() -> Iterator[Case]:
    """Each group named without one of its commands."""
    for name, child in _subcommands(build_parser()).items():
        if _subcommands(child):
            yield Case(f"{name} without a command", (name,), "COMMAND", "-")


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(subs[0].choices) if subs else {}


def bad_files(tmp: Path) -> dict[str, str]:
    """Write the bad files the cases name, and one good predictor, in ``tmp``; placeholder ->
    path (``{tmp}``, ``{binary}``...), with the shipped profile folder as ``{profiles}``."""
    from arkgpu.predictor import default_predictor  # noqa: PLC0415 (slow; only here)
    from arkgpu.traces.profiles import default_profile_dir  # noqa: PLC0415

    (tmp / "extender_policy.toml").write_text('policy = "nosuch"\n')
    (tmp / "extender_kubeconfig.toml").write_text(f'kubeconfig = "{tmp}/no-such.kubeconfig"\n')
    (tmp / "adir").mkdir()
    (tmp / "afile.txt").write_text("hello\n")
    (tmp / "empty.csv").write_bytes(b"")
    (tmp / "binary.csv").write_bytes(b"\xff\xfe\x00\x81binary\x00\xc3" * 64)
    (tmp / "binary.toml").write_bytes(b"\xff\xfe\x00\x81binary\x00\xc3" * 64)
    (tmp / "wrong.csv").write_text("alpha,beta\n1,2\n")
    (tmp / "bad.toml").write_text("this is = = not toml\n")
    (tmp / "node_unknown.toml").write_text("nosuch = 1\n")
    (tmp / "node_badtype.toml").write_text('period_s = "fast"\n')
    (tmp / "webhook_no_tls.toml").write_text("port = 9443\n")
    tls = f'tls_cert_file = "{tmp}/none.crt"\ntls_key_file = "{tmp}/none.key"\n'
    (tmp / "webhook_bad_qos.toml").write_text(tls + '[defaults]\nqos = "gold"\n')
    (tmp / "webhook_missing_cert.toml").write_text(
        tls + f'predictor = "{tmp}/predictor.json"\n[limits]\nmax_gpu_memory_mib = 1024\n'
    )
    (tmp / "dp_unknown.toml").write_text('node_name = "n"\nnosuch = 1\n')
    (tmp / "dp_badtype.toml").write_text('node_name = "n"\nsplit_count = "ten"\n')
    (tmp / "dp_nonode.toml").write_text('node_name = ""\n')
    (tmp / "dp_nokubelet.toml").write_text(f'node_name = "n"\nkubelet_dir = "{tmp}/nodir"\n')
    (tmp / "dp_nokubeconfig.toml").write_text(
        f'node_name = "n"\nkubelet_dir = "{tmp}"\nkubeconfig = "{tmp}/no.kubeconfig"\n'
    )
    (tmp / "dra_badtype.toml").write_text('node_name = "n1"\nresync_s = "fast"\n')
    (tmp / "profile_plan.toml").write_text("shares = [1.5]\n")
    paper = (Path(__file__).parents[2] / "src/arkgpu/data/scenarios/paper.toml").read_text()
    (tmp / "unknown_model.toml").write_text(paper.replace('"alexnet"', '"nosuchnet"', 1))
    default_predictor().save(tmp / "predictor.json")
    return {
        "tmp": str(tmp),
        "extender_policy": str(tmp / "extender_policy.toml"),
        "extender_kubeconfig": str(tmp / "extender_kubeconfig.toml"),
        "dir": str(tmp / "adir"),
        "file": str(tmp / "afile.txt"),
        "empty": str(tmp / "empty.csv"),
        "binary": str(tmp / "binary.csv"),
        "binary_toml": str(tmp / "binary.toml"),
        "wrong_csv": str(tmp / "wrong.csv"),
        "bad_toml": str(tmp / "bad.toml"),
        "node_unknown": str(tmp / "node_unknown.toml"),
        "node_badtype": str(tmp / "node_badtype.toml"),
        "webhook_no_tls": str(tmp / "webhook_no_tls.toml"),
        "webhook_bad_qos": str(tmp / "webhook_bad_qos.toml"),
        "webhook_missing_cert": str(tmp / "webhook_missing_cert.toml"),
        "dra_badtype": str(tmp / "dra_badtype.toml"),
        "profile_plan": str(tmp / "profile_plan.toml"),
        "unknown_model": str(tmp / "unknown_model.toml"),
        **{k: str(tmp / f"{k}.toml") for k in ("dp_unknown", "dp_badtype", "dp_nonode")},
        **{k: str(tmp / f"{k}.toml") for k in ("dp_nokubelet", "dp_nokubeconfig")},
        "missing": str(tmp / "missing.csv"),
        "predictor": str(tmp / "predictor.json"),
        "profiles": str(default_profile_dir()),
    }


def check(code: int, out: str, err: str, expect: str) -> None:
    """Exit status 2, one ``arkgpu: error:`` line naming ``expect``, nothing on stdout."""
    lines = [line for line in err.splitlines() if line.strip()]
    assert "Traceback" not in err, err
    assert code == 2, f"exit status {code}, stderr: {err!r}"
    assert len(lines) == 1, f"expected one line on stderr, got: {err!r}"
    assert lines[0].startswith("arkgpu: error: "), lines[0]
    assert expect in lines[0], f"{expect!r} not named in {lines[0]!r}"
    assert out == "", f"standard output should stay empty, got {out!r}"


def run_case(case: Case, files: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    """Run ``case`` in this process and check its one line."""
    argv = [word.format(**files) for word in case.argv]
    code = main(argv)
    captured = capsys.readouterr()
    check(code, captured.out, captured.err, case.expect.format(**files))
