"""Issue 32: a container given several GPUs of one request sees them all, each capped; a
container that would be given the devices of two requests (two claims, or one claim with
two requests used whole) is refused at Prepare with one line naming it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from arkgpu.k8s.dra.claims import ClaimError, shares
from arkgpu.k8s.dra.grouping import clash, container_groups, groups
from arkgpu.limiter import native, read_limits
from arkgpu.limiter.containers import FakeContainer

from . import kubelet
from .test_plugin import DRIVER, MIB, Claims, container_of, fake_dev, make_preparer, start
from .test_preparing import TWO_GPUS, claim_with, result, spec_of


def pod(*containers: dict[str, Any], init: tuple[dict[str, Any], ...] = ()) -> dict[str, Any]:
    """A pod (ns/p, uid pod-1) whose entry ``gpu`` is claim ``infer`` and entry ``other``
    the claim made from a template, ``other-xyz``."""
    return {
        "metadata": {"namespace": "ns", "name": "p", "uid": "pod-1"},
        "spec": {
            "initContainers": list(init),
            "containers": list(containers),
            "resourceClaims": [
                {"name": "gpu", "resourceClaimName": "infer"},
                {"name": "other", "resourceClaimTemplateName": "t"},
            ],
        },
        "status": {"resourceClaimStatuses": [{"name": "other", "resourceClaimName": "other-xyz"}]},
    }


def uses(name: str, *entries: tuple[str, str]) -> dict[str, Any]:
    """A container using the pod's claim entries (entry, request or "")."""
    claims = [{"name": e, **({"request": r} if r else {})} for e, r in entries]
    return {"name": name, "resources": {"claims": claims}}


REQUESTS = {"infer": ["a", "b"], "other-xyz": ["gpu"]}


def requests_of(claim: str) -> list[str]:
    """This driver's main requests in ``claim`` (REQUESTS)."""
    return REQUESTS.get(claim, [])


def test_one_request_or_a_claim_with_one_request_is_one_group() -> None:
    """A container naming a request (or a subrequest: its main one), or a whole claim of one
    request, gets one group; two containers of one pod may each take one request."""
    names = {"gpu": "infer", "other": "other-xyz"}
    assert container_groups(uses("c", ("gpu", "a")), names, requests_of) == ["infer/a"]
    assert container_groups(uses("c", ("other", "")), names, requests_of) == ["other-xyz/gpu"]
    subrequest = uses("c", ("gpu", "b/large"))
    assert container_groups(subrequest, names, requests_of) == ["infer/b"]
    assert clash(pod(uses("c", ("gpu", "a")), uses("d", ("gpu", "b"))), requests_of, DRIVER) is None


def test_a_claim_of_another_driver_is_no_clash() -> None:
    """A container may use an ArkGPU claim beside a claim with none of this driver's devices."""
    requests = {"infer": ["gpu"], "other-xyz": []}
    found = clash(pod(uses("c", ("gpu", ""), ("other", ""))), lambda c: requests[c], DRIVER)
    assert found is None


@pytest.mark.parametrize(
    ("container", "named"),
    [
        (uses("c", ("gpu", "a"), ("other", "")), "infer/a, other-xyz/gpu"),
        (uses("c", ("gpu", "")), "infer/a, infer/b"),
    ],
    ids=["two-claims", "two-requests-used-whole"],
)
def test_a_container_given_two_groups_is_named_in_one_line(
    container: dict[str, Any], named: str
) -> None:
    """Two claims, or a claim of two requests used whole: found in an init container too."""
    init = {**container, "name": "init"}
    found = clash(pod(uses("main", ("gpu", "a")), init=(init,)), requests_of, DRIVER)
    assert found is not None
    assert "\n" not in found
    assert found.startswith(f"pod ns/p container init would get the {DRIVER} devices of 2 ")
    assert f"({named})" in found


def test_a_group_of_more_gpus_than_a_region_holds_is_refused() -> None:
    """The region format holds 8 GPUs: a request for 9 fails Prepare with the reason."""
    claim = claim_with(*(result("gpu", f"gpu-{i}", f"s{i}") for i in range(9)))
    with pytest.raises(ClaimError, match=r"^claim ns/infer: request gpu has 9 GPUs; .* at most 8"):
        groups(shares(claim, DRIVER), "claim ns/infer")


def test_prepare_refuses_a_claim_a_reserved_pods_container_uses_beside_another(
    workdir: Path,
) -> None:
    """Over the kubelet's gRPC: the claim ``infer`` is reserved for pod p, whose container
    also uses claim ``other-xyz`` of this driver: Prepare answers one line naming the
    container and writes nothing; the pod's second container alone is fine."""
    mine = claim_with(result("gpu", "gpu-0", "s1"))
    mine["status"]["reservedFor"] = [{"resource": "pods", "name": "p", "uid": "pod-1"}]
    other = claim_with(result("gpu", "gpu-0", "s2"))
    other["metadata"] = {"namespace": "ns", "name": "other-xyz", "uid": "uid-2"}
    both = pod(uses("solo", ("gpu", "")), uses("greedy", ("gpu", ""), ("other", "")))
    server, plugin = start(workdir, Claims(mine, other), Claims(both))
    try:
        answer = kubelet.prepare(plugin, [("ns", "infer", "uid-1")]).claims["uid-1"]
        assert answer.error.startswith("claim ns/infer: pod ns/p container greedy would get ")
        assert "(infer/gpu, other-xyz/gpu)" in answer.error
        assert not (workdir / "cdi").exists()
        assert [p.name for p in (workdir / "regions").iterdir()] == []
        both["spec"]["containers"].pop()
        fine = kubelet.prepare(plugin, [("ns", "infer", "uid-1")]).claims["uid-1"]
        assert fine.error == ""
    finally:
        server.stop(None)


def test_a_container_of_a_two_gpu_request_is_capped_on_each_gpu(
    workdir: Path, staged_native: Path
) -> None:
    """Both results' devices name one CDI device; a workload given its edits sees both GPUs
    and the limiter caps each at its own share's memory (GPU 0: 2 GiB, GPU 1: 1 GiB)."""
    fake_dev(workdir / "dev", ("nvidia0", "nvidia1", "nvidiactl"))
    claim = claim_with(result("gpu", "gpu-0", "s1", "2Gi"), result("gpu", "gpu-1", "s2", "1Gi"))
    preparer = make_preparer(workdir, TWO_GPUS)
    server, plugin = start(workdir, Claims(claim), preparer=preparer)
    try:
        answer = kubelet.prepare(plugin, [("ns", "infer", "uid-1")]).claims["uid-1"]
        assert answer.error == ""
        ids = [list(d.cdi_device_ids) for d in answer.devices]
        assert ids == [[f"{DRIVER}/claim=uid-1-gpu"]] * 2
        box, env = container_of(spec_of(workdir), workdir)
        assert env["CUDA_VISIBLE_DEVICES"] == "GPU-fake-0,GPU-fake-1"
        assert read_limits(box.region).share_bp == 2000
        probe = FakeContainer(box.region, box.fake_state, box.user).popen(
            [str(native.cubench()), "script"], env | {"FAKEGPU_DEVICES": "2"}
        )
        script = [f"alloc vmm1 {1024 * MIB + MIB}", f"alloc vmm1 {1024 * MIB - MIB}"]
        script += [f"alloc alloc {2048 * MIB + MIB}", f"alloc alloc {2048 * MIB - MIB}", "quit"]
        out, _ = probe.communicate("\n".join(script) + "\n", timeout=60)
        lines = out.splitlines()
        assert [line.split()[0] for line in lines] == ["oom", "ok", "oom", "ok"], lines
    finally:
        server.stop(None)


class Unreachable:
    """A pod source whose API server does not answer."""

    def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        raise ConnectionRefusedError("connection refused")


def test_a_pod_that_cannot_be_read_fails_prepare_with_one_line(workdir: Path) -> None:
    """The API server away while Prepare checks the reserved pods: the claim's error names
    the pod and the cause (the kubelet shows it and retries); nothing is written."""
    mine = claim_with(result("gpu", "gpu-0", "s1"))
    mine["status"]["reservedFor"] = [{"resource": "pods", "name": "p", "uid": "pod-1"}]
    server, plugin = start(workdir, Claims(mine), Unreachable())
    try:
        answer = kubelet.prepare(plugin, [("ns", "infer", "uid-1")]).claims["uid-1"]
        assert answer.error == (
            "claim ns/infer: reading pod p: ConnectionRefusedError: connection refused"
        )
        assert not (workdir / "cdi").exists()
    finally:
        server.stop(None)
