"""The device plugin's TOML settings: defaults, node name from the environment, one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from arkgpu.k8s.deviceplugin.config import (
    DevicePluginConfig,
    config_from_dict,
    field_names,
    load_config,
)


def test_defaults_and_node_name_from_environment() -> None:
    """An empty file: every default, the node from $NODE_NAME."""
    config = config_from_dict({}, "f.toml", {"NODE_NAME": "gpu-7"})
    assert config == DevicePluginConfig(node_name="gpu-7")
    assert config.kubelet_dir == Path("/var/lib/kubelet/device-plugins")
    assert config.regions_dir == Path("/run/arkgpu/regions")
    assert config.library_path == Path("/usr/local/lib/arkgpu/libarkgpu_limiter.so")
    assert config.split_count == 10
    assert (config.listen_address, config.port) == ("0.0.0.0", 9403)
    assert config.socket_path == Path("/var/lib/kubelet/device-plugins/arkgpu.sock")
    assert config.kubelet_socket == Path("/var/lib/kubelet/device-plugins/kubelet.sock")


def test_every_field_is_read(tmp_path: Path) -> None:
    """Each field of the dataclass can be set from the file."""
    file = tmp_path / "p.toml"
    file.write_text(
        'node_name = "n"\nkubeconfig = "/k"\nkubelet_dir = "/d"\nregions_dir = "/r"\n'
        'library_path = "/l.so"\npreload_file = "/p"\npod_resources_socket = "/s"\n'
        'dev_root = "/v"\ndevice_list_strategy = "cdi"\ncdi_kind = "k.io/g"\n'
        "region_grace_s = 5\n"
        "split_count = 4\ninventory_period_s = 2.5\n"
        'kubelet_check_s = 0.5\nlisten_address = "127.0.0.1"\nport = 0\nnvml = false\n'
        "gpus = 2\ngpu_memory_mib = 1024\n",
        encoding="utf-8",
    )
    config = load_config(file, {})
    assert [getattr(config, name) for name in field_names()] == [
        "n",
        Path("/k"),
        Path("/d"),
        Path("/r"),
        Path("/l.so"),
        Path("/p"),
        Path("/s"),
        Path("/v"),
        "cdi",
        "k.io/g",
        5.0,
        4,
        2.5,
        0.5,
        "127.0.0.1",
        0,
        False,
        2,
        1024,
    ]


@pytest.mark.parametrize(
    ("table", "expect"),
    [
        ({}, "f.toml: field node_name: not set and $NODE_NAME is empty"),
        (
            {"node_name": "n", "split_count": 0},
            "f.toml: field split_count: expected an integer",
        ),
        ({"node_name": "n", "inventory_period_s": 0}, "f.toml: field inventory_period_s"),
        ({"node_name": "n", "nvml": "yes"}, "f.toml: field nvml: expected true or false"),
        ({"node_name": "n", "port": 70000}, "f.toml: field port: expected an integer <= 65535"),
        ({"node_name": "n", "socket": "x"}, "f.toml: unknown field 'socket'"),
        (
            {"node_name": "n", "device_list_strategy": "volume-mounts"},
            "f.toml: field device_list_strategy: expected one of device-nodes, cdi",
        ),
        ({"node_name": "n", "kubelet_dir": "/" + "d" * 120}, "f.toml: field kubelet_dir: too long"),
    ],
)
def test_bad_values_name_the_file_and_field(table: dict[str, object], expect: str) -> None:
    """One line naming the file and the field."""
    with pytest.raises(ValueError, match="^" + expect.replace("$", r"\$")) as error:
        config_from_dict(table, "f.toml", {})
    assert "\n" not in str(error.value)
