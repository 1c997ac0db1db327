"""Scenario files: the shipped ones meet the issue's sizes; bad files name file and field."""

import pytest

from arkgpu.sim.colocation.loads import load_curve, poisson_arrivals
from arkgpu.sim.colocation.scenarios import ScenarioError, load_scenario, parse_scenario

HEAD = '[scenario]\nname = "x"\ngpus = 1\nday_s = 60.0\nduration_s = 10.0\n'
LC = '[[lc]]\nname = "a"\nmodel = "resnet50"\ntarget_ms = 20.0\npeak_rps = 10.0\n'


def test_paper_scenario_has_the_papers_setting() -> None:
    """4 V100s, >= 6 LC services of iGniter models, >= 2 training jobs, a day in <= 1 h."""
    sc = load_scenario("paper")
    assert (sc.gpu, sc.gpus) == ("V100", 4)
    assert len(sc.lcs) >= 6
    assert len(sc.bes) >= 2
    assert {s.model for s in sc.lcs} <= {"alexnet", "resnet50", "vgg19", "ssd"}
    assert sc.day_s <= 3600
    assert sc.duration_s >= sc.day_s
    assert all(s.target_ms > 0 and s.peak_rps > 0 for s in sc.lcs)


def test_large_scenario_expands_replicas() -> None:
    """64 GPUs, >= 100 LC services and >= 30 BE jobs, unique names, shifted phases."""
    sc = load_scenario("large")
    assert sc.gpus == 64
    assert len(sc.lcs) >= 100
    assert len(sc.bes) >= 30
    names = [s.name for s in sc.lcs] + [b.name for b in sc.bes]
    assert len(set(names)) == len(names)
    assert len({s.phase_h for s in sc.lcs if s.model == "alexnet"}) > 1


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            HEAD + LC.replace("target_ms = 20.0", "target_ms = -1.0"),
            r"bad\.toml: lc\[0\]\.target_ms",
        ),
        (HEAD + LC.replace('model = "resnet50"\n', ""), r"lc\[0\]\.model: required"),
        (HEAD + LC + "colour = 3\n", r"lc\[0\]\.colour: unknown field"),
        (HEAD.replace("gpus = 1", 'gpus = "two"') + LC, r"scenario\.gpus: must be an integer"),
        (HEAD + LC + LC, r"duplicate application names \['a'\]"),
        (HEAD, r"no \[\[lc\]\] or \[\[be\]\]"),
        (HEAD + "[[lc]\n", r"bad\.toml: "),
        (LC, r"scenario: missing"),
    ],
)
def test_bad_scenarios_name_file_and_field(text: str, message: str) -> None:
    """Every malformed input is a ScenarioError whose message locates the problem."""
    with pytest.raises(ScenarioError, match=message):
        parse_scenario(text, "bad.toml")


def test_unknown_shipped_scenario_lists_the_shipped_ones() -> None:
    """A typo in a scenario name is reported with the names that exist."""
    with pytest.raises(ScenarioError, match="paper"):
        load_scenario("papr")


def test_arrivals_follow_the_curve_and_peak() -> None:
    """Poisson arrivals: sorted, inside the horizon, mean count = integral of the rate."""
    curve = load_curve("alibaba_genai_daily")
    assert curve.relative_rate.max() == 1.0
    rng = __import__("numpy").random.default_rng(1)
    times = poisson_arrivals(
        curve, peak_rps=500.0, day_s=134.0, duration_s=134.0, phase_h=0.0, rng=rng
    )
    assert (times[1:] >= times[:-1]).all()
    assert times[0] >= 0.0
    assert times[-1] < 134.0
    expected = 500.0 * curve.relative_rate.sum()  # 134 windows of 1 s
    assert abs(len(times) - expected) < 5 * expected**0.5
