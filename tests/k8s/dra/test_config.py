"""The DRA driver's TOML settings: defaults, NODE_NAME, one-line refusals."""

from __future__ import annotations

from pathlib import Path

import pytest

from arkgpu.k8s.dra.config import DRIVER_NAME, config_from_dict, field_names, load_config


def test_defaults_and_node_name_from_the_environment() -> None:
    """An empty file: every default; the node from $NODE_NAME."""
    config = config_from_dict({}, "c.toml", {"NODE_NAME": "node-7"})
    assert config.node_name == "node-7"
    assert config.driver_name == DRIVER_NAME
    assert config.nvml is True
    assert config.memory_step_mib == 256
    assert config.cores_step == 5
    assert config.device_order == "index"
    assert config.port == 0  # no endpoint unless asked (the chart asks)


def test_a_file_sets_every_field(tmp_path: Path) -> None:
    """Each field read from TOML with its type."""
    file = tmp_path / "dra.toml"
    file.write_text(
        'node_name = "n1"\nkubeconfig = "/k"\nnvml = false\ngpus = 2\n'
        "gpu_memory_mib = 8192\nmemory_step_mib = 512\ncores_step = 10\nresync_s = 2.5\n"
        'driver_name = "gpu.example.com"\ndelete_on_exit = false\ndevice_order = "pack"\n'
        'dev_dir = "/host/dev"\npreload_file = "/run/p/ld.so.preload"\n'
        'host_dev_dir = "/opt/gpu/dev"\nlisten_address = "127.0.0.1"\nport = 9404\n'
    )
    config = load_config(file, {})
    assert (config.node_name, config.kubeconfig, config.gpus) == ("n1", Path("/k"), 2)
    assert (config.memory_step_mib, config.cores_step, config.resync_s) == (512, 10, 2.5)
    assert (config.driver_name, config.delete_on_exit) == ("gpu.example.com", False)
    assert (config.device_order, config.dev_dir) == ("pack", Path("/host/dev"))
    assert config.preload_file == Path("/run/p/ld.so.preload")
    assert config.host_dev_dir == Path("/opt/gpu/dev")
    assert (config.listen_address, config.port) == ("127.0.0.1", 9404)
    assert len(field_names()) == 22


@pytest.mark.parametrize(
    ("table", "field"),
    [
        ({}, "node_name"),
        ({"node_name": "n", "driver_name": "Not_DNS"}, "driver_name"),
        ({"node_name": "n", "cores_step": 0}, "cores_step"),
        ({"node_name": "n", "cores_step": 101}, "cores_step"),
        ({"node_name": "n", "resync_s": 0}, "resync_s"),
        ({"node_name": "n", "nvml": False, "gpu_memory_mib": 100}, "memory_step_mib"),
        ({"node_name": "n", "gpus": "two"}, "gpus"),
        ({"node_name": "n", "device_order": "spread"}, "device_order"),
        ({"node_name": "n", "plugin_dir": "/" + "x" * 120}, "plugin_dir"),
        ({"node_name": "n", "port": 70_000}, "port"),
    ],
)
def test_bad_values_are_refused_naming_the_file_and_field(
    table: dict[str, object], field: str
) -> None:
    """ValueError, one line, with the file and the field."""
    with pytest.raises(ValueError, match=rf"^c\.toml: .*field {field}") as caught:
        config_from_dict(table, "c.toml", {})
    assert "\n" not in str(caught.value)
