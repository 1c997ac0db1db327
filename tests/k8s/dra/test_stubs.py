"""The DRA driver's committed gRPC stubs are grpcio-tools' output for the vendored protos.

Regenerating must give the committed ``api_pb2.py``, ``api_pb2.pyi`` and
``api_pb2_grpc.py`` (the lines naming the generator's version aside), and each
proto must be the kubelet's file byte for byte (its SHA-256 is in the README).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from k8s.stubs import drifted, recorded_in_readme, regenerate

ROOT = Path("arkgpu/k8s/proto_dra")
PROTOS = (ROOT / "dra/v1/api.proto", ROOT / "pluginregistration/v1/api.proto")


def test_regenerating_from_the_vendored_protos_gives_the_committed_stubs(tmp_path: Path) -> None:
    """protoc (grpcio-tools) run as the README says writes the same six files."""
    done = regenerate(PROTOS, tmp_path)
    assert done.returncode == 0, done.stderr
    assert drifted(PROTOS, tmp_path) == [], "regenerate the stubs (README)"


@pytest.mark.parametrize("proto", PROTOS, ids=lambda p: str(p.parent))
def test_vendored_proto_is_the_kubelets_file(proto: Path) -> None:
    """The proto's SHA-256 is the one the README records for k8s.io/kubelet v0.37.2."""
    assert recorded_in_readme(proto, ROOT / "README.md")


def test_the_services_have_the_kubelets_method_paths() -> None:
    """The full gRPC names the kubelet dials (package names kept from the protos)."""
    from arkgpu.k8s.proto_dra.dra.v1 import api_pb2 as dra  # noqa: PLC0415
    from arkgpu.k8s.proto_dra.pluginregistration.v1 import api_pb2 as reg  # noqa: PLC0415

    plugin = dra.DESCRIPTOR.services_by_name["DRAPlugin"]
    assert plugin.full_name == "k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin"
    assert [m.name for m in plugin.methods] == ["NodePrepareResources", "NodeUnprepareResources"]
    registration = reg.DESCRIPTOR.services_by_name["Registration"]
    assert registration.full_name == "pluginregistration.Registration"
