"""Bad input to the predictor, co-location, profiling and profile import commands.

Each case must end as every bad input does (:func:`bad_input_helpers.check`).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from cli.bad_input_helpers import Case, run_case

FIT = ("predictor", "fit", "--out", "{tmp}/p.json")
EVAL = ("predictor", "eval")
SHOW = ("predictor", "show", "{predictor}")
SCENARIO_COMMANDS = (
    ("colocate", "run", "--mode", "arkgpu"),
    ("colocate", "bench"),
    ("colocate", "sensitivity"),
    ("colocate", "calibration-study"),
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


PREDICTOR_CASES: tuple[Case, ...] = (
    *_scenario_cases(),
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
    *PROFILE_CASES,
)


@pytest.mark.parametrize("case", PREDICTOR_CASES, ids=lambda c: c.what)
def test_bad_input_is_one_line_naming_the_option(
    case: Case, files: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """The case exits 2 with one ``arkgpu: error:`` line naming its option or file."""
    run_case(case, files, capsys)
