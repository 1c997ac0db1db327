"""Kubernetes pods and nodes as the placement layer sees them: HAMi's resources, the type
filters, LC annotations, inventory GPUs offered (healthy, not MIG), readable refusals."""

from __future__ import annotations

from pathlib import Path

import pytest

from arkgpu.k8s.cluster.objects import read_node, read_pod
from arkgpu.k8s.contract import ContractError
from arkgpu.k8s.extender.config import ExtenderConfig, load_config
from arkgpu.k8s.extender.requests import NO_MODEL, gpu_spec, model_pod, shares
from arkgpu.k8s.gpu_requests import GpuRequest, quantity
from arkgpu.model.resources import LcAttributes

from .helpers import MEMORY, node, pod


@pytest.mark.parametrize(
    ("text", "value"),
    [("500m", 0.5), ("2", 2), ("1Gi", 2**30), ("1e3", 1000), ("20k", 20_000), ("1.5", 1.5)],
)
def test_quantities(text: str, value: float) -> None:
    assert float(quantity(text, "x")) == value


def test_bad_quantity_names_the_field() -> None:
    with pytest.raises(ContractError, match="x: not a resource quantity"):
        quantity("12 apples", "x")


@pytest.mark.parametrize(
    ("request_", "expected"),
    [
        (GpuRequest(1), (100, 0)),
        (GpuRequest(1, cores_percent=30), (30, MEMORY * 30 // 100)),
        (GpuRequest(1, memory_mib=20480), (25, 20480)),
        (GpuRequest(1, memory_percent=50), (50, MEMORY // 2)),
        (GpuRequest(1, memory_mib=8192, cores_percent=10), (10, 8192)),
    ],
)
def test_shares_fill_what_is_not_given(request_: GpuRequest, expected: tuple[int, int]) -> None:
    assert shares(request_, MEMORY, 0) == expected


def test_default_cores_when_only_memory_is_given() -> None:
    assert shares(GpuRequest(1, memory_mib=8192), MEMORY, 15) == (15, 8192)


def test_a_canonical_quantity_from_the_api_server_is_read() -> None:
    """The API server writes ``gpumem: 20000`` back as ``20k``."""
    info = read_pod(pod("p", {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "20k"}))
    assert info.error == ""
    assert model_pod(info, MEMORY, 0, []).gpu_memory_mib == 20_000


def test_model_pod_of_a_share_and_of_whole_gpus() -> None:
    share = model_pod(read_pod(pod("s")), MEMORY, 0, [])
    assert (share.num_gpu, share.gpu_milli, share.gpu_memory_mib) == (1, 300, 8192)
    whole = model_pod(read_pod(pod("w", {"nvidia.com/gpu": "4"})), MEMORY, 0, [])
    assert (whole.num_gpu, whole.gpu_milli, whole.gpu_memory_mib) == (4, 1000, 0)
    limits = {"nvidia.com/gpu": "2", "nvidia.com/gpucores": "30", "nvidia.com/gpumem": "1000"}
    parts = model_pod(read_pod(pod("p", limits)), MEMORY, 0, [])  # as HAMi: a part of each
    assert (parts.num_gpu, parts.gpu_milli, parts.gpu_memory_mib) == (2, 300, 1000)


@pytest.mark.parametrize(
    ("limits", "annotations", "reason"),
    [
        ({"nvidia.com/gpu": "1", "nvidia.com/gpucores": "150"}, {}, "must be 1..100"),
        ({"nvidia.com/gpucores": "20"}, {}, "required with GPU memory or cores"),
        ({"nvidia.com/gpu": "1"}, {"arkgpu.io/qos": "gold"}, "expected one of lc, be"),
        ({"nvidia.com/gpu": "1"}, {"arkgpu.io/qos": "lc"}, "arkgpu.io/model: required"),
        (
            {"nvidia.com/gpu": "1"},
            {"arkgpu.io/qos": "lc", "arkgpu.io/model": "resnet50", "arkgpu.io/peak-rps": "9"},
            "latency-target-ms: required",
        ),
    ],
)
def test_refusals_name_the_pod_and_the_field(
    limits: dict[str, str], annotations: dict[str, str], reason: str
) -> None:
    info = read_pod(pod("bad", limits, annotations))
    with pytest.raises(ContractError, match=reason) as caught:
        model_pod(info, MEMORY, 0, [])
    assert "team-a/bad" in str(caught.value)


def test_lc_annotations_become_lc_attributes() -> None:
    notes = {
        "arkgpu.io/qos": "lc",
        "arkgpu.io/model": "resnet50",
        "arkgpu.io/latency-target-ms": "40",
        "arkgpu.io/peak-rps": "120.5",
        "arkgpu.io/max-batch": "8",
    }
    got = model_pod(read_pod(pod("lc", annotations=notes)), MEMORY, 0, [])
    assert got.lc == LcAttributes("resnet50", 40.0, 120.5, 8)


def test_gpu_type_filters_become_gpu_spec() -> None:
    models = ["NVIDIA A100-SXM4-80GB", "NVIDIA H200", "Tesla T4"]
    use = read_pod(pod("u", annotations={"nvidia.com/use-gputype": "A100,H200"}))
    assert model_pod(use, MEMORY, 0, models).gpu_spec == {models[0], models[1]}
    nouse = read_pod(pod("n", annotations={"nvidia.com/nouse-gputype": "T4"}))
    assert model_pod(nouse, MEMORY, 0, models).gpu_spec == {models[0], models[1]}
    none = read_pod(pod("x", annotations={"nvidia.com/use-gputype": "V100"}))
    with pytest.raises(ContractError) as caught:  # a reason no node changes: say it once
        model_pod(none, MEMORY, 0, models)
    assert str(caught.value) == (
        "pod team-a/x: no GPU model of the cluster matches the pod's type annotations "
        "(nvidia.com/use-gputype is 'V100'); the models here: NVIDIA A100-SXM4-80GB, "
        "NVIDIA H200, Tesla T4"
    )
    assert gpu_spec(none, models) == {NO_MODEL}
    cased = read_pod(pod("c", annotations={"nvidia.com/use-gputype": "h200, tesla"}))
    assert model_pod(cased, MEMORY, 0, models).gpu_spec == {models[1], models[2]}  # as HAMi


def test_unhealthy_and_mig_gpus_are_not_offered() -> None:
    info = read_node(node("n", 4, unhealthy=(1,), mig=(2,)))
    assert [g.index for g in info.gpus] == [0, 3]
    assert (info.cpu_milli, info.memory_mib) == (64_000, 512 * 1024)
    bare = read_node(node("bare", None))
    assert bare.gpus == ()
    assert "no ArkGPU GPU inventory" in bare.error
    broken = read_node(
        {**node("b"), "metadata": {"name": "b", "annotations": {"arkgpu.io/gpu-inventory": "{"}}}
    )
    assert "not valid JSON" in broken.error


def test_two_containers_asking_for_gpus_are_refused() -> None:
    p = pod("two")
    p["spec"]["containers"].append({**p["spec"]["containers"][0], "name": "side"})
    assert "only one container may ask for GPUs" in read_pod(p).error


def test_config_file_fields(tmp_path: Path) -> None:
    file = tmp_path / "e.toml"
    file.write_text('policy = "fgd"\nport = 9000\nlc_check = false\nseed = 3\n')
    config = load_config(file)
    assert (config.policy, config.port, config.lc_check, config.seed) == ("fgd", 9000, False, 3)
    assert ExtenderConfig().policy == "arkgpu"
    file.write_text('tls_cert_file = "a.pem"\n')
    with pytest.raises(ValueError, match="tls_cert_file, tls_key_file: give both"):
        load_config(file)
    file.write_text("port = 70000\n")
    with pytest.raises(ValueError, match="field port"):
        load_config(file)
