"""The contract's JSON round-trips and rejects bad input with one line naming the field."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from arkgpu.k8s.contract import (
    ANNOTATION_ASSIGNMENT,
    ANNOTATION_INVENTORY,
    AssignedGpu,
    ContractError,
    InventoryGpu,
    NodeInventory,
    PodAssignment,
)
from arkgpu.k8s.gpu_requests import GpuRequest, gpu_request

INVENTORY = NodeInventory(
    (
        InventoryGpu(0, "GPU-aaaa", "NVIDIA H200", 143771),
        InventoryGpu(1, "GPU-bbbb", "NVIDIA H200", 143771, mig=False, healthy=False),
    ),
    updated="2026-12-04T21:00:00Z",
)
ASSIGNMENT = PodAssignment(
    "node-1", (AssignedGpu(1, "GPU-bbbb", 4096, 2500),), qos="lc", container="server"
)


def test_inventory_and_assignment_round_trip() -> None:
    assert NodeInventory.from_json(INVENTORY.to_json()) == INVENTORY
    assert "corrections" not in INVENTORY.to_json()  # written only when there are some
    calibrated = NodeInventory(INVENTORY.gpus, "t", (("resnet50", 1.3), ("vgg19", 0.9)))
    assert NodeInventory.from_json(calibrated.to_json()) == calibrated
    assert PodAssignment.from_json(ASSIGNMENT.to_json()) == ASSIGNMENT
    assert json.loads(ASSIGNMENT.to_json())["version"] == 1


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "not valid JSON"),
        ("[]", "expected a JSON object"),
        ('{"version": 2, "gpus": []}', "version: expected 1, got 2"),
        ('{"version": true, "gpus": []}', "version: expected 1"),
        ('{"version": 1}', "gpus: expected list"),
        (
            '{"version": 1, "gpus": [{"index": 1, "uuid": "u", "model": "m", "memory_mib": 1}]}',
            "indices must be 0..0",
        ),
        (
            '{"version": 1, "gpus": [{"index": 0, "uuid": "", "model": "m", "memory_mib": 1}]}',
            "gpus\\[0\\]: uuid",
        ),
        (
            '{"version": 1, "gpus": [{"index": 0, "uuid": "u", "model": "m", "memory_mib": 0}]}',
            "gpus\\[0\\]: memory_mib: out of range",
        ),
        (
            '{"version": 1, "gpus": [{"index": 0, "uuid": "u", "model": "m", "memory_mib": 1,'
            ' "mig": 1}]}',
            "gpus\\[0\\]: mig: expected bool",
        ),
        ('{"version": 1, "gpus": [], "corrections": []}', "corrections: expected dict"),
        (
            '{"version": 1, "gpus": [], "corrections": {"resnet50": 30}}',
            "corrections: 'resnet50': expected a factor from 0.1 to 10, got 30",
        ),
        ('{"version": 1, "gpus": [], "corrections": {"x": true}}', "corrections: 'x'"),
    ],
)
def test_bad_inventory_names_the_field(text: str, message: str) -> None:
    with pytest.raises(ContractError, match=f"^{ANNOTATION_INVENTORY}: .*{message}"):
        NodeInventory.from_json(text)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"qos": "gold"}, "qos: expected one of lc, be"),
        ({"node": 3}, "node: expected str"),
        (
            {"gpus": [{"index": 0, "uuid": "u", "memory_mib": 0, "share_bp": 10001}]},
            "gpus\\[0\\]: share_bp: at most 10000",
        ),
        (
            {"gpus": [{"index": 0, "uuid": "u", "memory_mib": -1, "share_bp": 1}]},
            "gpus\\[0\\]: memory_mib: out of range",
        ),
    ],
)
def test_bad_assignment_names_the_field(change: dict[str, object], message: str) -> None:
    raw = json.loads(ASSIGNMENT.to_json()) | change
    with pytest.raises(ContractError, match=f"^{ANNOTATION_ASSIGNMENT}: {message}"):
        PodAssignment.from_json(json.dumps(raw))


@pytest.mark.parametrize(
    ("text", "count"), [("3000", 3000), ("3k", 3000), ("2000m", 2), ("1e3", 1000), ("+7", 7)]
)
def test_counts_in_the_api_servers_canonical_form_are_read(text: str, count: int) -> None:
    """The API server writes ``gpumem: 3000`` back as ``3k``: the same request."""
    assert gpu_request({"nvidia.com/gpu": "1", "nvidia.com/gpumem": text}, "c").memory_mib == count


@pytest.mark.parametrize("text", ["1500m", "4Gi", "1e9", "-1", "1.5", "", "k", "0x10"])
def test_counts_that_are_not_whole_numbers_are_refused(text: str) -> None:
    with pytest.raises(ContractError, match=r"^c: nvidia\.com/gpumem: expected a whole number"):
        gpu_request({"nvidia.com/gpu": "1", "nvidia.com/gpumem": text}, "c")


def test_gpu_request_reads_hami_resources() -> None:
    limits = {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "3000", "nvidia.com/gpucores": "30"}
    assert gpu_request(limits, "c") == GpuRequest(1, memory_mib=3000, cores_percent=30)
    assert gpu_request({"cpu": "1"}, "c") == GpuRequest(0)


@pytest.mark.parametrize(
    ("limits", "message"),
    [
        ({"nvidia.com/gpu": "1", "nvidia.com/gpucores": "101"}, "gpucores: must be 1..100"),
        ({"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "0"}, "must be 1..100"),
        ({"nvidia.com/gpu": "1.5"}, "nvidia.com/gpu: expected a whole number"),
        ({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "2Gi"}, "gpumem: expected a whole number"),
        ({"nvidia.com/gpumem": "100"}, "nvidia.com/gpu: required"),
    ],
)
def test_bad_gpu_request_names_the_resource(limits: dict[str, str], message: str) -> None:
    with pytest.raises(ContractError, match=f"^pod a/b container c: .*{message}"):
        gpu_request(limits, "pod a/b container c")


def _rejection(parse: Callable[[str], object], text: str) -> str:
    """The one-line reason ``parse`` refuses ``text`` ("" when it parses); any other error fails."""
    try:
        parse(text)
    except ContractError as exc:
        return str(exc)
    return ""


@given(st.text(max_size=200) | st.binary(max_size=200).map(lambda b: b.decode("latin-1")))
def test_any_text_parses_or_is_rejected_cleanly(text: str) -> None:
    for parse in (NodeInventory.from_json, PodAssignment.from_json):
        assert "\n" not in _rejection(parse, text)


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
        lambda inner: (
            st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
        ),
        max_leaves=12,
    )
)
def test_any_json_value_parses_or_is_rejected_cleanly(value: object) -> None:
    for version in (1, None):
        doc = {"version": version, "gpus": value, "node": value, "qos": "be"}
        for parse in (NodeInventory.from_json, PodAssignment.from_json):
            assert "\n" not in _rejection(parse, json.dumps(doc))
