"""The contract bench with real processes on the fake GPU: HAMi pods keep their caps."""

from __future__ import annotations

import pytest

from arkgpu.node.contract_bench import ContractBenchConfig, run_contract_bench


@pytest.mark.timeout(300)
def test_hami_pods_get_their_share_and_no_more_beside_an_adjusted_lc_and_be() -> None:
    """Each HAMi pod's busy share stays at most its cap (a small margin for the bucket's
    depth) and reaches at least half of it on a loaded machine; the BE job never takes
    more than the HAMi pods and the LC service leave."""
    report = run_contract_bench(ContractBenchConfig(warmup_s=3.0, measure_s=5.0))
    pods = report["pods"]
    hami = [p for name, p in pods.items() if name.startswith("hami")]
    assert len(hami) == 2
    for pod in hami:
        assert pod["share_at_end"] == pod["asked_share"], pod  # never rewritten
        assert pod["busy_share"] <= pod["asked_share"] + 0.03, pod
        assert pod["busy_share"] >= pod["asked_share"] / 2, pod
    left = 1.0 - sum(p["asked_share"] for p in hami) - pods["lc"]["busy_share"]
    assert pods["be"]["busy_share"] <= left + 0.03, report
    assert pods["be"]["share_at_end"] + pods["lc"]["share_at_end"] <= 0.5 + 1e-9, report
