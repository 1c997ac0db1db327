"""Every command refuses bad input with one line that names the option or file.

The cases are of two kinds, both listed here:

- generated: every option whose type knows values it refuses (``ArgType.bad``), and
  every option with fixed choices, gets each of those values;
- written out (``CASES``): inputs only a command can judge (a file's contents, a name
  resolved later, an output that exists) and options that take free text.

Each case must end with exit status 2 and exactly one line on standard error,
``arkgpu: error: ...``, naming what it checks; nothing on standard output, never a
traceback, never a success. The parser tree is walked so that a command or an option
without a case fails the test.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
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


P_RUN = ("placement", "run", "--policy", "fgd")
FIT = ("predictor", "fit", "--out", "{tmp}/p.json")
EVAL = ("predictor", "eval")
SHOW = ("predictor", "show", "{predictor}")
TRACE_COMMANDS = (
    P_RUN,
    ("placement", "bench"),
    ("placement", "bound"),
    ("placement", "defrag", "--policy", "fgd"),
    ("placement", "replay", "--policy", "fgd"),
    ("placement", "cost"),
    ("placement", "anatomy"),
)
SCENARIO_COMMANDS = (
    ("colocate", "run", "--mode", "arkgpu"),
    ("colocate", "bench"),
    ("colocate", "sensitivity"),
    ("colocate", "calibration-study"),
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


def _scenario_cases() -> Iterator[Case]:
    for cmd in SCENARIO_COMMANDS:
        for value, expect, what in (
            ("nosuch", "nosuch", "an unknown shipped scenario"),
            ("{unknown_model}", "nosuchnet", "a scenario naming a model with no profile"),
            ("{bad_toml}", "--scenario", "a scenario file that is not TOML"),
            ("{binary_toml}", "--scenario", "a binary scenario file"),
            ("{tmp}/missing.toml", "missing.toml", "a scenario file that does not exist"),
        ):
            yield Case(
                f"{' '.join(cmd[:2])} --scenario: {what}",
                (*cmd, "--scenario", value),
                expect,
                "--scenario",
            )


DP = ("device-plugin", "run", "--config")
DEVICE_PLUGIN_CASES: tuple[Case, ...] = (
    Case(
        "device-plugin run --config: a missing file", (*DP, "{tmp}/no.toml"), "no.toml", "--config"
    ),
    Case("device-plugin run --config: not TOML", (*DP, "{bad_toml}"), "{bad_toml}", "--config"),
    Case(
        "device-plugin run --config: an unknown field", (*DP, "{dp_unknown}"), "nosuch", "--config"
    ),
    Case(
        "device-plugin run --config: a field of the wrong type",
        (*DP, "{dp_badtype}"),
        "split_count",
        "--config",
    ),
    Case(
        "device-plugin run --config: an empty node name",
        (*DP, "{dp_nonode}"),
        "node_name",
        "--config",
    ),
    Case(
        "device-plugin run --config: no kubelet directory",
        (*DP, "{dp_nokubelet}"),
        "kubelet_dir",
        "--config",
    ),
    Case(
        "device-plugin run --config: a kubeconfig that does not exist",
        (*DP, "{dp_nokubeconfig}"),
        "kubeconfig",
        "--config",
    ),
)


DRA_CASES: tuple[Case, ...] = (
    Case(
        "dra-driver run --config: a missing file",
        ("dra-driver", "run", "--config", "{tmp}/no.toml"),
        "no.toml",
        "--config",
    ),
    Case(
        "dra-driver run --config: not TOML",
        ("dra-driver", "run", "--config", "{bad_toml}"),
        "{bad_toml}",
        "--config",
    ),
    Case(
        "dra-driver run --config: an unknown field",
        ("dra-driver", "run", "--config", "{node_unknown}"),
        "nosuch",
        "--config",
    ),
    Case(
        "dra-driver run --config: a field of the wrong type",
        ("dra-driver", "run", "--config", "{dra_badtype}"),
        "resync_s",
        "--config",
    ),
)


NODE_CASES: tuple[Case, ...] = (
    Case(
        "node run --config: a missing file",
        ("node", "run", "--config", "{tmp}/no.toml"),
        "no.toml",
        "--config",
    ),
    Case(
        "node run --config: not TOML",
        ("node", "run", "--config", "{bad_toml}"),
        "{bad_toml}",
        "--config",
    ),
    Case(
        "node run --config: an unknown field",
        ("node", "run", "--config", "{node_unknown}"),
        "nosuch",
        "--config",
    ),
    Case(
        "node run --config: a field of the wrong type",
        ("node", "run", "--config", "{node_badtype}"),
        "period_s",
        "--config",
    ),
    Case(
        "node demo --plot: a folder instead of a file",
        ("node", "demo", "--plot", "{dir}"),
        "--plot",
        "--plot",
    ),
    Case(
        "node demo --json: under a file",
        ("node", "demo", "--json", "{file}/x.json"),
        "{file}",
        "--json",
    ),
    Case(
        "workload lc --rates: not RATE:SECONDS",
        ("workload", "lc", "--rates", "fast"),
        "--rates",
        "--rates",
    ),
    Case(
        "workload lc --rates: a zero rate",
        ("workload", "lc", "--rates", "0:1"),
        "--rates",
        "--rates",
    ),
    Case(
        "workload lc --region: a missing folder",
        ("workload", "lc", "--rates", "1:1", "--region", "{tmp}/noregion"),
        "noregion",
        "--region",
    ),
    Case(
        "workload lc --log: a folder",
        ("workload", "lc", "--rates", "1:1", "--log", "{dir}"),
        "--log",
        "--log",
    ),
    Case(
        "workload lc --model: a model with no profile",
        ("workload", "lc", "--rates", "1:1", "--region", "{dir}", "--model", "nosuchnet"),
        "--model",
        "--model",
    ),
    Case(
        "workload be --region: a folder with no region",
        ("workload", "be", "--seconds", "1", "--region", "{dir}"),
        "{dir}",
        "--region",
    ),
)

PROFILE = ("profile", "run", "--backend", "fake", "--out", "{tmp}/profile")
PROFILE_CASES: tuple[Case, ...] = (
    Case(
        "profile run --models: an unknown fake model",
        (*PROFILE, "--models", "nosuchnet"),
        "--models",
        "--models",
    ),
    Case(
        "profile run --models: the same model twice",
        (*PROFILE, "--models", "fake-tiny,fake-tiny"),
        "--models",
        "--models",
    ),
    Case(
        "profile run --models: a TorchScript file that does not exist",
        ("profile", "run", "--models", "net={tmp}/none.pt", "--out", "{tmp}/profile"),
        "none.pt",
        "--models",
    ),
    Case(
        "profile run --pairs: a model not in --models",
        (*PROFILE, "--models", "fake-tiny", "--pairs", "fake-tiny+nosuch"),
        "--pairs",
        "--pairs",
    ),
    Case("profile run --gpu: an empty name", (*PROFILE, "--gpu", " "), "--gpu", "--gpu"),
    Case(
        "profile run --plan: not TOML", (*PROFILE, "--plan", "{bad_toml}"), "{bad_toml}", "--plan"
    ),
    Case(
        "profile run --plan: an unknown field",
        (*PROFILE, "--plan", "{node_unknown}"),
        "nosuch",
        "--plan",
    ),
    Case(
        "profile run --plan: a share over a GPU",
        (*PROFILE, "--plan", "{profile_plan}"),
        "field shares",
        "--plan",
    ),
)


WEBHOOK_CASES: tuple[Case, ...] = (
    Case(
        "webhook run --config: a missing file",
        ("webhook", "run", "--config", "{tmp}/no.toml"),
        "no.toml",
        "--config",
    ),
    Case(
        "webhook run --config: not TOML",
        ("webhook", "run", "--config", "{bad_toml}"),
        "{bad_toml}",
        "--config",
    ),
    Case(
        "webhook run --config: no serving certificate (HTTPS only)",
        ("webhook", "run", "--config", "{webhook_no_tls}"),
        "tls_cert_file",
        "--config",
    ),
    Case(
        "webhook run --config: an unknown QoS default",
        ("webhook", "run", "--config", "{webhook_bad_qos}"),
        "[defaults] field qos",
        "--config",
    ),
    Case(
        "webhook run --config: certificate files that do not exist",
        ("webhook", "run", "--config", "{webhook_missing_cert}"),
        "{tmp}/none.crt",
        "--config",
    ),
)


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
    *_trace_cases(),
    *_scenario_cases(),
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
    Case(
        "predictor fit --profiles: a binary profile file",
        (*FIT, "--profiles", "{binary}"),
        "{binary}",
        "--profiles",
    ),
    Case(
        "predictor fit --profiles: a CSV with the wrong header",
        (*FIT, "--profiles", "{wrong_csv}"),
        "--profiles",
        "--profiles",
    ),
    Case(
        "predictor fit --profiles: a folder with no profiles",
        (*FIT, "--profiles", "{dir}"),
        "--profiles",
        "--profiles",
    ),
    Case(
        "predictor fit --gpu: a GPU with no profile records",
        (*FIT, "--profiles", "{profiles}", "--gpu", "H100"),
        "--gpu H100",
        "--gpu",
    ),
    Case(
        "predictor eval --gpu: a GPU with no profile records",
        (*EVAL, "--profiles", "{profiles}", "--gpu", "NOSUCH"),
        "--gpu NOSUCH",
        "--gpu",
    ),
    Case(
        "predictor eval --igniter-config: a binary file",
        (*EVAL, "--profiles", "{profiles}", "--igniter-config", "{binary}"),
        "--igniter-config",
        "--igniter-config",
    ),
    Case(
        "predictor show: a predictor file that is not one",
        ("predictor", "show", "{file}", "--model", "resnet50", "--batch", "1"),
        "{file}",
        "predictor",
    ),
    Case(
        "predictor show --model: a model the predictor does not know",
        (*SHOW, "--model", "nosuchnet", "--batch", "1"),
        "--model",
        "--model",
    ),
    Case(
        "predictor show --gpu: a GPU the predictor does not know",
        (*SHOW, "--model", "resnet50", "--batch", "1", "--gpu", "NOSUCH"),
        "--gpu",
        "--gpu",
    ),
    Case(
        "predictor show --profiles: a binary profile file",
        (*SHOW, "--model", "resnet50", "--batch", "1", "--profiles", "{binary}"),
        "--profiles",
        "--profiles",
    ),
    Case(
        "predictor ask --gpu: a GPU the predictor does not know",
        (
            "predictor",
            "ask",
            "{predictor}",
            "--model",
            "resnet50",
            "--batch",
            "1",
            "--gpu",
            "NOSUCH",
        ),
        "--gpu NOSUCH",
        "--gpu",
    ),
    Case(
        "predictor ask --with: a co-runner that is not MODEL:BATCH:SHARE",
        (
            "predictor",
            "ask",
            "{predictor}",
            "--model",
            "resnet50",
            "--batch",
            "1",
            "--with",
            "vgg19:8",
        ),
        "--with",
        "--with",
    ),
    Case(
        "predictor ask --with: a co-runner the predictor does not know",
        (
            "predictor",
            "ask",
            "{predictor}",
            "--model",
            "resnet50",
            "--batch",
            "1",
            "--with",
            "nosuchnet:8:0.5",
        ),
        "--with nosuchnet:8:0.5",
        "--with",
    ),
    Case(
        "predictor calibrate --gpu: a GPU with no profile records",
        ("predictor", "calibrate", "--profiles", "{profiles}", "--gpu", "NOSUCH"),
        "--gpu NOSUCH",
        "--gpu",
    ),
    Case(
        "predictor ask --model: a model the predictor does not know",
        ("predictor", "ask", "{predictor}", "--model", "nosuchnet", "--batch", "1"),
        "--model nosuchnet",
        "--model",
    ),
    Case(
        "predictor calibrate --profiles: a binary profile file",
        ("predictor", "calibrate", "--profiles", "{binary}"),
        "{binary}",
        "--profiles",
    ),
    Case(
        "profiles import: a binary source file",
        ("profiles", "import", "--from", "igniter", "{binary}", "{tmp}/out"),
        "{binary}",
        "source",
    ),
    Case(
        "profiles import: an output prefix under a file",
        ("profiles", "import", "--from", "igniter", "{dir}", "{file}/x"),
        "{file}",
        "out",
    ),
    Case(
        "limiter show: a folder with no region in it",
        ("limiter", "show", "{dir}"),
        "{dir}",
        "region",
    ),
    Case(
        "limiter bench --plot: a folder instead of a file",
        ("limiter", "bench", "--plot", "{dir}"),
        "--plot",
        "--plot",
    ),
    *NODE_CASES,
    *PROFILE_CASES,
    *WEBHOOK_CASES,
    *DEVICE_PLUGIN_CASES,
    *DRA_CASES,
)


def _leaves(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every command (a parser without subcommands) under ``parser``, with its words."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path, parser
        return
    for name, child in subs[0].choices.items():
        yield from _leaves(child, (*path, name))


def _takes_value(action: argparse.Action) -> bool:
    return action.nargs != 0 and not isinstance(
        action, argparse._HelpAction | argparse._VersionAction | argparse._SubParsersAction
    )


def _name(action: argparse.Action) -> str:
    return action.option_strings[0] if action.option_strings else action.dest


VALID_POSITIONALS = {"source": "{dir}", "predictor": "{predictor}", "region": "{dir}"}
"""A good value of each positional, to reach the positionals after it."""


def _generated() -> Iterator[Case]:
    """Each refused value of every typed option, and an unknown choice of every choice."""
    for path, parser in _leaves(build_parser()):
        before: list[str] = []
        for action in filter(_takes_value, parser._actions):
            name = _name(action)
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


def _groups_without_command() -> Iterator[Case]:
    """Each group named without one of its commands."""
    for name, child in _subcommands(build_parser()).items():
        if _subcommands(child):
            yield Case(f"{name} without a command", (name,), "COMMAND", "-")


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(subs[0].choices) if subs else {}


EXTENDER_CASES: tuple[Case, ...] = (
    Case(
        "extender run --config: a missing file",
        ("extender", "run", "--config", "{tmp}/no.toml"),
        "no.toml",
        "--config",
    ),
    Case(
        "extender run --config: not TOML",
        ("extender", "run", "--config", "{bad_toml}"),
        "{bad_toml}",
        "--config",
    ),
    Case(
        "extender run --config: an unknown field",
        ("extender", "run", "--config", "{node_unknown}"),
        "nosuch",
        "--config",
    ),
    Case(
        "extender run --config: an unknown policy",
        ("extender", "run", "--config", "{extender_policy}"),
        "policy",
        "--config",
    ),
    Case(
        "extender run --config: a kubeconfig that does not exist",
        ("extender", "run", "--config", "{extender_kubeconfig}"),
        "no-such.kubeconfig",
        "--config",
    ),
    Case(
        "extender bench --json: under a file",
        ("extender", "bench", "--nodes", "1", "--json", "{file}/x.json"),
        "{file}",
        "--json",
    ),
)


ALL_CASES = (*CASES, *EXTENDER_CASES, *_generated(), *_groups_without_command())


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The bad files the cases name, and one good predictor and profile folder."""
    from arkgpu.predictor import default_predictor  # noqa: PLC0415 (slow; only here)
    from arkgpu.traces.profiles import default_profile_dir  # noqa: PLC0415

    tmp = tmp_path_factory.mktemp("bad-input")
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


def _check(code: int, out: str, err: str, expect: str) -> None:
    lines = [line for line in err.splitlines() if line.strip()]
    assert "Traceback" not in err, err
    assert code == 2, f"exit status {code}, stderr: {err!r}"
    assert len(lines) == 1, f"expected one line on stderr, got: {err!r}"
    assert lines[0].startswith("arkgpu: error: "), lines[0]
    assert expect in lines[0], f"{expect!r} not named in {lines[0]!r}"
    assert out == "", f"standard output should stay empty, got {out!r}"


@pytest.mark.parametrize("case", ALL_CASES, ids=lambda c: c.what)
def test_bad_input_is_one_line_naming_the_option(
    case: Case, files: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """The case exits 2 with one ``arkgpu: error:`` line naming its option or file."""
    argv = [word.format(**files) for word in case.argv]
    code = main(argv)
    captured = capsys.readouterr()
    _check(code, captured.out, captured.err, case.expect.format(**files))


def test_every_command_and_option_has_a_case() -> None:
    """A command or an option that takes a value, added without a bad-input case, fails."""
    covered = {(c.argv[: len(p)], c.option) for c in ALL_CASES for p, _ in _leaves(build_parser())}
    for path, parser in _leaves(build_parser()):
        assert any(c.argv[: len(path)] == path for c in ALL_CASES), f"no case for {path}"
        for action in filter(_takes_value, parser._actions):
            assert (path, _name(action)) in covered, f"no case for {' '.join(path)} {_name(action)}"


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
    _check(done.returncode, done.stdout, done.stderr, expect.format(**files))


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
        return int({}["summaries"])

    monkeypatch.setattr(colocate, "_mps_check", broken)
    monkeypatch.delenv("ARKGPU_DEBUG", raising=False)
    assert main(["colocate", "mps-check"]) == 70
    assert "internal error (a bug): KeyError" in capsys.readouterr().err
