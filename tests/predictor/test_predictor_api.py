"""The predictor's public API that the co-location simulator builds on."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from arkgpu.predictor import Predictor, PredictorConfig, UnknownModelError, Workload


def test_models_lists_profiled_models_per_gpu(fitted: Predictor) -> None:
    """The V100 has iGniter's four models and the A100 ParvaGPU's eleven."""
    assert fitted.models("V100") == ["alexnet", "resnet50", "ssd", "vgg19"]
    assert "densenet121" in fitted.models("A100-80GB")
    assert len(fitted.models("A100-80GB")) == 11


def test_vectorised_matches_scalar(fitted: Predictor) -> None:
    """latency_ms_many gives, query by query, what latency_ms gives."""
    models = ["resnet50", "vgg19", "alexnet", "resnet50"]
    batches = [1, 7, 32, 13]
    shares = [0.1, 0.5, 1.0, 0.33]
    many = fitted.latency_ms_many(models, batches, shares)
    one = [fitted.latency_ms(m, b, s) for m, b, s in zip(models, batches, shares, strict=True)]
    np.testing.assert_allclose(many, one, rtol=1e-12)


def test_colocated_is_never_faster_than_alone(fitted: Predictor) -> None:
    """A co-runner slows the target down, and no co-runner leaves it alone."""
    target = Workload("resnet50", 8, 0.5)
    alone = fitted.latency_ms("resnet50", 8, 0.5)
    assert fitted.colocated_latency_ms(target, []) == pytest.approx(alone)
    assert fitted.colocated_latency_ms(target, [Workload("vgg19", 32, 0.5)]) > alone


def test_training_iteration_uses_configured_factor(fitted: Predictor) -> None:
    """A training iteration is the inference latency times the configured factor."""
    alone = fitted.latency_ms("vgg19", 16, 0.4)
    assert fitted.training_iteration_ms("vgg19", 16, 0.4) == pytest.approx(3.0 * alone)
    other = Predictor(fitted.curves, fitted.utils, fitted.interference, PredictorConfig(2.5))
    assert other.training_iteration_ms("vgg19", 16, 0.4) == pytest.approx(2.5 * alone)


def test_save_load_round_trip(fitted: Predictor, tmp_path: Path) -> None:
    """A saved predictor loads back and predicts exactly the same numbers."""
    path = tmp_path / "p.json"
    fitted.save(path)
    loaded = Predictor.load(path)
    target, others = Workload("ssd", 4, 0.6), [Workload("alexnet", 16, 0.4)]
    assert loaded.latency_ms("ssd", 4, 0.6) == fitted.latency_ms("ssd", 4, 0.6)
    assert loaded.colocated_latency_ms(target, others) == fitted.colocated_latency_ms(
        target, others
    )
    assert loaded.config == fitted.config


def test_unknown_model_and_bad_queries_raise(fitted: Predictor) -> None:
    """An unprofiled model, a batch below 1 or a share outside (0, 1] is refused."""
    with pytest.raises(UnknownModelError, match="gpt"):
        fitted.latency_ms("gpt", 1, 0.5)
    with pytest.raises(ValueError, match="share"):
        fitted.latency_ms("resnet50", 1, 1.5)
    with pytest.raises(ValueError, match="batch"):
        Workload("resnet50", 0, 0.5)


def test_pairs_of_unprofiled_models_are_left_out_of_level2(fitted: Predictor) -> None:
    """A pair whose model has no solo profile cannot be fitted; the rest still are."""
    from arkgpu.traces.profiles import (  # noqa: PLC0415
        PairRecord,
        default_profile_dir,
        load_pair_profiles,
        load_solo_profiles,
    )

    directory = default_profile_dir()
    solo = [r for r in load_solo_profiles(directory) if r.gpu == "V100"]
    stranger = PairRecord("V100", "gpt", 1, 0.5, "resnet50", 4, 0.5, 50.0, 5.0)
    refit = Predictor.fit(solo, [*load_pair_profiles(directory), stranger])
    assert refit.interference[("V100", "memory")] == fitted.interference[("V100", "memory")]
    assert not refit.knows("gpt")


def test_other_gpus_are_predicted_by_speed_ratio(fitted: Predictor) -> None:
    """A model never profiled on a GPU is predicted from another GPU's curve with the share
    scaled by the speed ratio: a faster GPU is never predicted slower; unknown GPUs raise."""
    v100 = fitted.latency_ms("alexnet", 8, 0.5, "V100")
    h100 = fitted.latency_ms("alexnet", 8, 0.5, "H100")
    curve, _ = fitted.curve("alexnet", "V100")
    ratio = fitted.config.gpu_speed["H100"] / fitted.config.gpu_speed["V100"]
    assert h100 == pytest.approx(curve.latency_ms(8, 0.5 * ratio))
    assert h100 <= v100
    with pytest.raises(ValueError, match="unknown GPU model"):
        fitted.latency_ms("alexnet", 8, 0.5, "Voodoo2")


def test_pair_scales_fit_measured_combinations_only(fitted: Predictor) -> None:
    """Each measured (target, co-runner) model combination gets a scale >= 0 that brings the
    fit closer to its pairs; an infinite prior turns scales off; unmeasured ones use 1."""
    from arkgpu.predictor.groups import as_groups, group_targets  # noqa: PLC0415
    from arkgpu.traces.profiles import (  # noqa: PLC0415
        default_profile_dir,
        load_pair_profiles,
        load_solo_profiles,
    )

    directory = default_profile_dir()
    solo = [r for r in load_solo_profiles(directory) if r.gpu == "V100"]
    pairs = load_pair_profiles(directory)
    plain = Predictor.fit(solo, pairs, PredictorConfig(pair_prior=float("inf")))
    assert plain.pair_scales == {}
    assert len(fitted.pair_scales) == 12
    assert all(scale >= 0 for scale in fitted.pair_scales.values())

    def error(predictor: Predictor) -> float:
        targets = group_targets(as_groups(pairs))
        return sum(
            abs(predictor.colocated_latency_ms(t.target, t.corunners) / t.latency_ms - 1)
            for t in targets
        ) / len(targets)

    assert error(fitted) < error(plain)
    alone = fitted.latency_ms("alexnet", 4, 0.5, "A100-80GB")
    other = fitted.colocated_latency_ms(
        Workload("alexnet", 4, 0.5), [Workload("vgg19", 8, 0.5)], "A100-80GB"
    )
    assert other >= alone


def test_a_new_model_is_predicted_from_one_point(fitted: Predictor) -> None:
    """with_model adds a curve through the measured point, shaped like the GPU's other models,
    monotone, and leaves the original predictor unchanged."""
    grown = fitted.with_model("newnet", 8, 0.5, 12.0, "V100")
    assert grown.latency_ms("newnet", 8, 0.5) == pytest.approx(12.0, rel=0.03)
    assert grown.latency_ms("newnet", 32, 0.5) > grown.latency_ms("newnet", 8, 0.5)
    assert grown.latency_ms("newnet", 8, 0.2) > grown.latency_ms("newnet", 8, 0.5)
    assert not fitted.knows("newnet")
    assert grown.latency_ms("vgg19", 4, 0.3) == fitted.latency_ms("vgg19", 4, 0.3)
