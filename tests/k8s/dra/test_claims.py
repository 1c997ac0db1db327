"""Reading an allocated claim: shares of our GPUs, consumed capacity, QoS config."""

from __future__ import annotations

from typing import Any

import pytest

from arkgpu.k8s.dra.claims import ClaimError, Qos, quantity, shares

from .test_plugin import DRIVER, allocated_claim


def test_a_share_carries_the_consumed_capacity_and_the_lc_config() -> None:
    """6Gi and 30 of gpu-0, LC resnet50 at 40 ms with batch 4."""
    [share] = shares(allocated_claim(), DRIVER)
    assert (share.device, share.gpu_index, share.share_id) == ("gpu-0", 0, "share-abc")
    assert (share.memory_mib, share.cores) == (6144, 30)
    assert share.qos == Qos("lc", "resnet50", target_ms=40.0, max_batch=4)


def test_no_config_means_be_and_other_drivers_results_are_ignored() -> None:
    """Without our opaque config the share is BE; a result of another driver is not ours."""
    claim = allocated_claim(memory="5120Mi")
    devices = claim["status"]["allocation"]["devices"]
    devices["config"] = [{"opaque": {"driver": "other.example.com", "parameters": {}}}]
    devices["results"].append({**devices["results"][0], "driver": "other.example.com"})
    [share] = shares(claim, DRIVER)
    assert share.qos == Qos()
    assert share.memory_mib == 5120


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"qos": "rt"}, "field qos"),
        ({"latencyTargetMs": 0}, "field latencyTargetMs"),
        ({"maxBatch": "8"}, "field maxBatch"),
        ({"kind": "Other"}, "expected apiVersion"),
    ],
)
def test_a_bad_config_is_refused_naming_the_claim_and_field(
    change: dict[str, Any], message: str
) -> None:
    """One line naming the claim and the field."""
    claim = allocated_claim()
    claim["status"]["allocation"]["devices"]["config"][0]["opaque"]["parameters"].update(change)
    with pytest.raises(ClaimError, match=rf"^claim ns/infer: .*{message}"):
        shares(claim, DRIVER)


def test_an_unallocated_claim_is_refused() -> None:
    """Prepare before allocation is an error, not an empty success."""
    claim = allocated_claim()
    del claim["status"]
    with pytest.raises(ClaimError, match="not allocated"):
        shares(claim, DRIVER)


@pytest.mark.parametrize(
    ("text", "value"),
    [("6Gi", 6 << 30), ("5000Mi", 5000 << 20), ("30", 30), ("500m", 0.5), ("2k", 2000)],
)
def test_quantities(text: str, value: float) -> None:
    """Binary and decimal suffixes as Kubernetes writes them."""
    assert quantity(text) == value
