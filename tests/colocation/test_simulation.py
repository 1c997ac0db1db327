"""Whole runs: conservation of requests, determinism per seed, the bench's JSON and the CLI."""

import json
from pathlib import Path

import pytest

from arkgpu.bench.colocation import BenchSpec, json_ready, parse_modes, parse_seeds, run_bench
from arkgpu.cli.main import main
from arkgpu.colocation.sizing import ShareSizer
from arkgpu.sim.colocation.modes import ModeOptions
from arkgpu.sim.colocation.running import alone_goodput, simulate
from arkgpu.sim.colocation.simulating import RunOptions
from arkgpu.sim.colocation.truth import GroundTruth
from colocation.colocation_helpers import be, lc, tiny

MODES = ("k8s-native", "timeslice", "mps", "mps-equal", "hami", "tgs", "arkgpu-static", "arkgpu")
BODY = (
    lc("a", "resnet50", 25.0, 300.0)
    + lc("b", "alexnet", 10.0, 500.0)
    + lc("c", "vgg19", 40.0, 60.0)
    + be("t", "vgg19")
    + be("u", "resnet50", iterations=20)
)


@pytest.mark.parametrize("mode", MODES)
def test_no_request_is_lost_or_counted_twice(
    truth: GroundTruth, sizer: ShareSizer, mode: str
) -> None:
    """Every arrived request is completed, lost in a fault, or still unserved, exactly once;
    good requests are completed ones; BE jobs never exceed their length."""
    options = RunOptions(ModeOptions(fault_rate_per_h=360.0, restart_s=0.3), record_series=True)
    result = simulate(
        tiny(BODY, gpus=2), mode=mode, seed=4, truth=truth, sizer=sizer, options=options
    )
    for r in result.lcs:
        assert r.arrived == r.completed + r.lost + r.unserved
        assert 0 <= r.good <= r.completed
    assert result.bes[1].iterations <= 20
    assert result.series is not None
    assert len(result.series.t) == 20


def test_same_seed_same_result_other_seed_other_result(
    truth: GroundTruth, sizer: ShareSizer
) -> None:
    """A run is a function of its seed: repeated runs agree exactly, another seed differs."""
    sc = tiny(BODY, gpus=2)
    options = RunOptions(record_series=False)
    runs = [
        simulate(sc, mode="arkgpu", seed=s, truth=truth, sizer=sizer, options=options)
        for s in (7, 7, 8)
    ]
    ref = {r.name: 1.0 for r in runs[0].lcs}
    first, again, other = (r.to_dict(ref) for r in runs)
    for d in (first, again, other):
        d.pop("wall_s")
        d.pop("cpu_s")
    assert first == again
    assert first != other


def test_an_application_sees_the_same_arrivals_in_every_mode(
    truth: GroundTruth, sizer: ShareSizer
) -> None:
    """Arrival streams are keyed by seed and name: modes and the alone run agree on counts."""
    sc = tiny(BODY, gpus=2)
    options = RunOptions(record_series=False)
    arrived = {
        m: [
            r.arrived
            for r in simulate(sc, mode=m, seed=2, truth=truth, sizer=sizer, options=options).lcs
        ]
        for m in ("k8s-native", "mps")
    }
    assert arrived["k8s-native"] == arrived["mps"]
    alone = alone_goodput(sc, 2, truth, sizer)
    assert set(alone) == {"a", "b", "c"}
    assert all(alone[n] <= a for n, a in zip(("a", "b", "c"), arrived["mps"], strict=True))
    assert alone["a"] > 0.99 * arrived["mps"][0]


def test_bench_document_has_the_agreed_keys(tmp_path: Path) -> None:
    """modes.<mode> carries the means and per_seed lists; ratios.arkgpu_vs_<mode> exists."""
    path = tmp_path / "s.toml"
    path.write_text(tiny_text(), encoding="utf-8")
    spec = BenchSpec(str(path), ("k8s-native", "mps", "mig", "arkgpu"), (1, 2))
    doc = json_ready(run_bench(spec, jobs=1))
    for mode in ("k8s-native", "mps", "arkgpu"):
        entry = doc["modes"][mode]
        for key in (
            "goodput_rps",
            "normalized_goodput",
            "slo_attainment_min_pct",
            "lc_throughput_rps",
            "be_throughput_norm",
            "gpus_used",
        ):
            assert len(entry["per_seed"][key]) == 2
            assert entry[key] == pytest.approx(sum(entry["per_seed"][key]) / 2)
    assert "mig" in doc["skipped"]
    assert (
        doc["ratio_details"]["arkgpu_vs_mps"]["normalized_goodput"]
        == doc["ratios"]["arkgpu_vs_mps"]
    )
    ratio = doc["ratios"]["arkgpu_vs_mps"]
    assert ratio == pytest.approx(
        doc["modes"]["arkgpu"]["normalized_goodput"] / doc["modes"]["mps"]["normalized_goodput"]
    )
    json.dumps(doc)


def tiny_text() -> str:
    """A two-GPU scenario file's text."""
    return (
        '[scenario]\nname = "t"\ngpus = 2\nday_s = 60.0\nduration_s = 10.0\n'
        + lc("a", rps=150.0)
        + be("t")
    )


def test_cli_run_prints_json_and_rejects_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``arkgpu colocate run --json`` prints the document; a bad mode or seed list is exit 2."""
    path = tmp_path / "s.toml"
    path.write_text(tiny_text(), encoding="utf-8")
    assert main(["colocate", "run", "--scenario", str(path), "--mode", "arkgpu", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["modes"]["arkgpu"]["slo_attainment_min_pct"] > 90.0
    assert main(["colocate", "run", "--scenario", str(path), "--mode", "nope"]) == 2
    assert "unknown modes" in capsys.readouterr().err
    with pytest.raises(ValueError, match="bad seeds"):
        parse_seeds("1-x")
    assert parse_seeds("1-3,7") == (1, 2, 3, 7)
    assert parse_modes("all")[-1] == "arkgpu"
