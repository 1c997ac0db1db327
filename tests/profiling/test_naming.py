"""NVML product names become the profiles' GPU names."""

from __future__ import annotations

import pytest

from arkgpu.model.gpus import known_gpu_models
from arkgpu.profiling.nvml import profile_gpu_name


@pytest.mark.parametrize(
    ("nvml", "gpu"),
    [
        ("NVIDIA H200", "H200"),
        ("NVIDIA H100 80GB HBM3", "H100"),
        ("NVIDIA A100-SXM4-80GB", "A100-80GB"),
        ("NVIDIA A100-PCIE-40GB", "A100-40GB"),
        ("Tesla V100-SXM2-32GB", "V100"),
        ("Tesla V100-PCIE-16GB", "V100M16"),
        ("Tesla T4", "T4"),
        ("NVIDIA A10", "A10"),
        ("NVIDIA L40S", "L40S"),
        ("ArkGPU Fake GPU", "ArkGPU-Fake-GPU"),
    ],
)
def test_known_products_take_the_catalogue_name(nvml: str, gpu: str) -> None:
    """Catalogue models keep the catalogue's spelling; others a file-safe product name."""
    assert profile_gpu_name(nvml) == gpu


def test_every_catalogue_name_given_is_known() -> None:
    """The names chosen for catalogue products are the catalogue's own."""
    for nvml in ("NVIDIA H200", "NVIDIA A100-SXM4-80GB", "Tesla V100-SXM2-32GB", "Tesla T4"):
        assert profile_gpu_name(nvml) in known_gpu_models()
