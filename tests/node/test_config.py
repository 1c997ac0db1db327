"""The runtime's configuration: defaults, TOML, and one-line errors naming the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from arkgpu.node.config import LOCK_NAME, NodeConfig, config_from_dict, field_names, load_config


def test_defaults_and_lock_path() -> None:
    """An empty file gives the documented defaults; the lock sits in the regions folder."""
    config = config_from_dict({})
    assert config == NodeConfig()
    assert config.period_s == pytest.approx(0.1)
    assert config.lock_path == Path("/run/arkgpu/regions") / LOCK_NAME


def test_every_field_is_documented_in_node_md() -> None:
    """docs/NODE.md lists every field of the configuration."""
    text = (Path(__file__).parents[2] / "docs/NODE.md").read_text()
    for name in field_names():
        assert f"`{name}`" in text, name


def test_a_file_sets_fields_and_the_control_law(tmp_path: Path) -> None:
    """Top-level fields and the [adjustment] table are read with their types."""
    path = tmp_path / "node.toml"
    path.write_text(
        'regions_dir = "/tmp/r"\nperiod_s = 0.05\nnvml = false\ngpus = 2\n'
        "[adjustment]\nraise_step = 0.2\nmin_lc_bp = 300\n"
    )
    config = load_config(path)
    assert config.regions_dir == Path("/tmp/r")
    assert config.period_s == pytest.approx(0.05)
    assert (config.nvml, config.gpus) == (False, 2)
    assert config.adjustment.raise_step == pytest.approx(0.2)
    assert config.adjustment.min_lc_bp == 300


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("period_s = 0\n", "period_s"),
        ('period_s = "fast"\n', "period_s"),
        ("nosuch = 1\n", "nosuch"),
        ("nvml = 1\n", "nvml"),
        ("gpus = 0\n", "gpus"),
        ("[adjustment]\nraise_step = 2\n", "raise_step"),
        ("[adjustment]\nnosuch = 2\n", "nosuch"),
        ("adjustment = 3\n", "adjustment"),
        ("this is = = not toml\n", "not valid TOML"),
        ('backstop = "explode"\n', "backstop"),
        ('backstop = "kill"\nnvml = false\n', "backstop"),
        ("metrics_port = 70000\n", "metrics_port"),
    ],
)
def test_bad_values_name_the_file_and_field(tmp_path: Path, text: str, named: str) -> None:
    """Each bad file stops the load with one line naming the file and the field."""
    path = tmp_path / "node.toml"
    path.write_text(text)
    with pytest.raises(ValueError, match=named) as info:
        load_config(path)
    message = str(info.value)
    assert str(path) in message
    assert "\n" not in message
