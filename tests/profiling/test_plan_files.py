"""``--plan FILE``: a plan in TOML over the backend's default plan, options over the file."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from arkgpu.cli.main import build_parser
from arkgpu.cli.profile import build_plan
from arkgpu.profiling.plan_files import pairs_from, plan_from_file
from arkgpu.profiling.plans import FAKE_DEFAULT, TORCH_DEFAULT


def test_fields_set_replace_the_default_and_the_rest_stay(tmp_path: Path) -> None:
    """Models, grid, pairs, splits and timing from the file; the unset fields keep the default."""
    path = tmp_path / "plan.toml"
    path.write_text(
        'models = ["resnet50", "vgg19", "alexnet"]\nbatches = [2, 8]\n'
        'pairs = ["resnet50+alexnet"]\npair_shares = [[0.3, 0.7]]\nmeasure_s = 1.5\n'
    )
    plan = plan_from_file(path, TORCH_DEFAULT)
    assert plan.models == ("resnet50", "vgg19", "alexnet")
    assert plan.batches == (2, 8)
    assert plan.shares == TORCH_DEFAULT.shares
    assert plan.pairs == (("resnet50", "alexnet"),)
    assert plan.pair_shares == ((0.3, 0.7),)
    assert plan.timing.measure_s == 1.5
    assert plan.timing.warmup_s == TORCH_DEFAULT.timing.warmup_s


def test_new_models_without_pairs_get_all_their_pairs(tmp_path: Path) -> None:
    """A file that names models and no pairs pairs every two of them."""
    path = tmp_path / "plan.toml"
    path.write_text('models = ["a:10:1", "b:10:1", "c:10:1"]\n')
    assert len(plan_from_file(path, FAKE_DEFAULT).pairs) == 3


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("nosuch = 1\n", "unknown field 'nosuch'"),
        ("shares = [1.5]\n", "field shares"),
        ("batches = []\n", "field batches"),
        ("pair_shares = [[0.7, 0.7]]\n", "field pair_shares"),
        ('pairs = ["fake-tiny+zzz"]\n', r"field pairs: 'fake-tiny\+zzz' is not MODEL\+MODEL"),
        ("warmup_s = -1\n", "field warmup_s"),
        ("models = [\n", "not valid TOML"),
    ],
)
def test_a_bad_file_is_one_error_naming_the_file_and_field(
    tmp_path: Path, text: str, message: str
) -> None:
    """Unknown field, values out of range, unknown pair models, broken TOML."""
    path = tmp_path / "plan.toml"
    path.write_text(text)
    with pytest.raises(ValueError, match=message) as caught:
        plan_from_file(path, FAKE_DEFAULT)
    assert str(path) in str(caught.value)


def test_pair_specs() -> None:
    """all, none, and MODEL+MODEL items."""
    models = ("a", "b", "c")
    assert pairs_from("all", models) == (("a", "b"), ("a", "c"), ("b", "c"))
    assert pairs_from("none", models) == ()
    assert pairs_from("c+a,b+b", models) == (("c", "a"), ("b", "b"))
    with pytest.raises(ValueError, match="'a-b'"):
        pairs_from("a-b", models)


def _args(*words: str) -> argparse.Namespace:
    return build_parser(["profile"]).parse_args(["profile", "run", *words, "--out", "/tmp/x"])


def test_options_override_the_file(tmp_path: Path) -> None:
    """--shares and --measure-s win over the file; --models without --pairs pairs them all."""
    path = tmp_path / "plan.toml"
    path.write_text('shares = [0.5]\nmeasure_s = 2.0\npairs = "none"\n')
    plan = build_plan(_args("--backend", "fake", "--plan", str(path), "--measure-s", "1"))
    assert (plan.shares, plan.timing.measure_s, plan.pairs) == ((0.5,), 1.0, ())
    plan = build_plan(_args("--backend", "fake", "--plan", str(path), "--shares", "1"))
    assert plan.shares == (1.0,)
    plan = build_plan(_args("--backend", "fake", "--plan", str(path), "--models", "p:1:1,q:1:1"))
    assert plan.pairs == (("p:1:1", "q:1:1"),)
