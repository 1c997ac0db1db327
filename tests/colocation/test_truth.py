"""The simulator's ground truth interpolates the measured iGniter V100 profiles."""

import csv
from itertools import pairwise
from pathlib import Path

import numpy as np
import pytest

from arkgpu.sim.colocation.truth import GroundTruth

MODELS = ("alexnet", "resnet50", "vgg19", "ssd")


def test_measured_points_are_reproduced(truth: GroundTruth, shared_data: Path) -> None:
    """At measured (batch, share) points the truth equals the raw measurement, up to the
    monotone repair (which only lowers a point that was slower than a smaller share)."""
    path = shared_data / "profiles" / "igniter_v100" / "igniter_v100_solo_mps.csv"
    errors = []
    with path.open() as fh:
        for row in csv.DictReader(fh):
            measured = float(row["latency_ms"])
            got = truth.latency_ms(
                row["model"], int(row["batch"]), int(row["mps_thread_pct"]) / 100
            )
            errors.append(abs(got - measured) / measured)
    assert np.median(errors) < 1e-6
    assert np.percentile(errors, 90) < 0.05


@pytest.mark.parametrize("model", MODELS)
def test_latency_is_monotone_in_share_and_batch(truth: GroundTruth, model: str) -> None:
    """More share is never slower; a larger batch is never faster (also off the grid)."""
    shares = np.linspace(0.03, 1.0, 60)
    for batch in (1, 3, 8, 17, 32, 48):
        lat = [truth.latency_ms(model, batch, float(s)) for s in shares]
        assert all(a >= b - 1e-9 for a, b in pairwise(lat))
    for share in (0.15, 0.45, 0.7, 1.0):
        lat = [truth.latency_ms(model, b, share) for b in range(1, 40)]
        assert all(a <= b + 1e-9 for a, b in pairwise(lat))


def test_interference_is_measured_and_additive(truth: GroundTruth, shared_data: Path) -> None:
    """A measured pair's factor is its latency over solo latency; co-runners add excess
    slowdowns."""
    path = shared_data / "profiles" / "igniter_v100" / "igniter_v100_pair_interference.csv"
    with path.open() as fh:
        row = next(r for r in csv.DictReader(fh) if r["mps_pct_a"] == "50" and r["batch_a"] == "8")
    share = 0.5
    solo = truth.latency_ms(row["model_a"], 8, share)
    expected = max(1.0, float(row["latency_a_ms"]) / solo)
    got = truth.factor(row["model_a"], 8, share, row["model_b"], int(row["batch_b"]))
    assert got == pytest.approx(expected, rel=1e-6)
    one = truth.slowdown("resnet50", 8, 0.5, [("vgg19", 16, 1.0)])
    two = truth.slowdown("resnet50", 8, 0.5, [("vgg19", 16, 1.0), ("vgg19", 16, 1.0)])
    assert one >= 1.0
    assert two - 1.0 == pytest.approx(2 * (one - 1.0))
    assert truth.slowdown("resnet50", 8, 0.5, [("vgg19", 16, 0.0)]) == 1.0


def test_noise_uses_measured_spread(truth: GroundTruth) -> None:
    """Sampled latencies centre on the mean with the model's measured relative std."""
    rng = np.random.default_rng(3)
    draws = np.array([truth.sample(10.0, "alexnet", rng) for _ in range(4000)])
    assert draws.mean() == pytest.approx(10.0, rel=0.01)
    assert draws.std() / 10.0 == pytest.approx(truth.noise_cv("alexnet"), rel=0.1)
    assert 0.001 < truth.noise_cv("alexnet") < 0.1


def test_unknown_model_is_an_error(truth: GroundTruth) -> None:
    """A model without a profile is refused by name."""
    with pytest.raises(KeyError, match="bert"):
        truth.latency_ms("bert", 1, 0.5)
