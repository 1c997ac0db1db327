"""The committed gRPC stubs are grpcio-tools' output for the vendored kubelet proto.

Regenerating from ``api.proto`` must give the committed ``api_pb2.py``,
``api_pb2.pyi`` and ``api_pb2_grpc.py`` (the lines naming the generator's own
version aside), so the stubs never drift from the proto; and the proto is the
kubelet's, byte for byte (its checksum is in the README beside it).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from arkgpu.k8s.proto.deviceplugin.v1beta1 import api_pb2
from arkgpu.k8s.proto.podresources.v1 import api_pb2 as pr_pb2
from k8s.stubs import drifted, recorded_in_readme, regenerate

PROTO = Path("arkgpu/k8s/proto/deviceplugin/v1beta1/api.proto")
POD_RESOURCES = Path("arkgpu/k8s/proto/podresources/v1/api.proto")


def test_regenerating_from_the_vendored_proto_gives_the_committed_stubs(tmp_path: Path) -> None:
    """protoc (grpcio-tools) run as the README says writes the same three files."""
    done = regenerate([PROTO, POD_RESOURCES], tmp_path)
    assert done.returncode == 0, done.stderr
    assert drifted([PROTO, POD_RESOURCES], tmp_path) == [], "regenerate the stubs (README)"


@pytest.mark.parametrize("proto", [PROTO, POD_RESOURCES])
def test_vendored_proto_is_the_kubelets_file(proto: Path) -> None:
    """The proto's SHA-256 is the one the README records for k8s.io/kubelet."""
    assert recorded_in_readme(proto, Path("arkgpu/k8s/proto/README.md"))


def test_pod_resources_service_has_the_kubelets_full_name() -> None:
    """The kubelet serves /v1.PodResourcesLister/<Method>."""
    found = pr_pb2.DESCRIPTOR.services_by_name["PodResourcesLister"]
    assert found.full_name == "v1.PodResourcesLister"
    assert [m.name for m in found.methods] == ["List", "GetAllocatableResources", "Get"]


@pytest.mark.parametrize(
    ("service", "methods"),
    [
        ("Registration", ["Register"]),
        (
            "DevicePlugin",
            [
                "GetDevicePluginOptions",
                "ListAndWatch",
                "GetPreferredAllocation",
                "Allocate",
                "PreStartContainer",
            ],
        ),
    ],
)
def test_services_have_the_kubelets_full_names(service: str, methods: list[str]) -> None:
    """gRPC paths are /v1beta1.<Service>/<Method>: the package must stay ``v1beta1``."""
    found = api_pb2.DESCRIPTOR.services_by_name[service]
    assert found.full_name == f"v1beta1.{service}"
    assert [m.name for m in found.methods] == methods
