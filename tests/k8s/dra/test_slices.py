"""The ResourceSlice the DRA driver publishes: shareable devices with consumable capacity."""

from __future__ import annotations

from arkgpu import __version__
from arkgpu.k8s.contract import InventoryGpu
from arkgpu.k8s.dra.slices import devices, mig_message, resource_slice

V100 = InventoryGpu(0, "GPU-aaa", "Tesla V100-SXM2-16GB", 16_160, False)


def test_each_healthy_gpu_is_a_shareable_device_with_its_attributes() -> None:
    """allowMultipleAllocations, UUID, model, index, MIG mode and ArkGPU's version."""
    [dev] = devices([V100], 256, 5)
    assert dev["name"] == "gpu-0"
    assert dev["allowMultipleAllocations"] is True
    attrs = dev["attributes"]
    assert attrs["uuid"] == {"string": "GPU-aaa"}
    assert attrs["model"] == {"string": "Tesla V100-SXM2-16GB"}
    assert attrs["mig"] == {"bool": False}
    assert attrs["index"] == {"int": 0}
    assert __version__ in attrs["arkgpuVersion"].values()


def test_memory_and_cores_policies_stay_on_their_steps_and_under_the_capacity() -> None:
    """16160 MiB with 256 MiB steps: requests 256Mi..16128Mi; cores 5..100 by 5; defaults whole."""
    [dev] = devices([V100], 256, 5)
    memory, cores = dev["capacity"]["memory"], dev["capacity"]["cores"]
    assert memory["value"] == "16160Mi"
    assert memory["requestPolicy"] == {
        "default": "16128Mi",
        "validRange": {"min": "256Mi", "max": "16128Mi", "step": "256Mi"},
    }
    assert cores["value"] == "100"
    assert cores["requestPolicy"] == {
        "default": "100",
        "validRange": {"min": "5", "max": "100", "step": "5"},
    }


def test_unhealthy_too_small_and_mig_gpus_are_left_out_and_devices_sorted() -> None:
    """A GPU NVML cannot read, with less memory than one step, or in MIG mode (its
    memory and compute belong to MIG instances) is not offered."""
    gpus = [
        InventoryGpu(2, "GPU-c", "m", 8192, False),
        InventoryGpu(1, "GPU-b", "m", 8192, False, healthy=False),
        InventoryGpu(0, "GPU-a", "m", 100, False),
        InventoryGpu(3, "GPU-d", "m", 8192, True),
    ]
    assert [d["name"] for d in devices(gpus, 256, 5)] == ["gpu-2"]


def test_mig_gpus_are_reported_when_they_change() -> None:
    """One line when GPUs enter MIG mode, nothing while they stay, one when none is left."""
    mig = [InventoryGpu(0, "GPU-a", "m", 8192), InventoryGpu(1, "GPU-b", "m", 8192, True)]
    line, now = mig_message(mig, frozenset())
    assert line == ("GPUs in MIG mode are not published (ArkGPU shares whole GPUs): 1 (GPU-b)")
    assert mig_message(mig, now) == ("", now)
    plain = [InventoryGpu(1, "GPU-b", "m", 8192)]
    assert mig_message(plain, now) == ("no GPU is in MIG mode any more", frozenset())
    assert mig_message(plain, frozenset()) == ("", frozenset())


def test_the_slice_is_one_pool_per_node_with_its_generation() -> None:
    """Driver, node, pool (named after the node, one slice) and the devices."""
    body = resource_slice("node-1", "gpu.arkgpu.io", devices([V100], 256, 5), 7)
    assert body["apiVersion"] == "resource.k8s.io/v1"
    assert body["metadata"]["name"] == "node-1-gpu.arkgpu.io"
    spec = body["spec"]
    assert spec["driver"] == "gpu.arkgpu.io"
    assert spec["nodeName"] == "node-1"
    assert spec["pool"] == {"name": "node-1", "generation": 7, "resourceSliceCount": 1}
    assert len(spec["devices"]) == 1
