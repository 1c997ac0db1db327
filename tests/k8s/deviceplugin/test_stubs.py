"""The committed gRPC stubs are grpcio-tools' output for the vendored kubelet proto.

Regenerating from ``api.proto`` must give the committed ``api_pb2.py``,
``api_pb2.pyi`` and ``api_pb2_grpc.py`` (the lines naming the generator's own
version aside), so the stubs never drift from the proto; and the proto is the
kubelet's, byte for byte (its checksum is in the README beside it).
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

from arkgpu.k8s.proto.deviceplugin.v1beta1 import api_pb2

SRC = Path(__file__).resolve().parents[3] / "src"
PACKAGE = Path("arkgpu/k8s/proto/deviceplugin/v1beta1")
GENERATED = ("api_pb2.py", "api_pb2.pyi", "api_pb2_grpc.py")
VERSION_LINE = re.compile(
    r"Protobuf Python Version: .*|^\s+\d+,$|GRPC_GENERATED_VERSION = '.*'", re.MULTILINE
)
"""Lines that name the generator's version rather than anything of the proto."""


def _normalised(text: str) -> str:
    return VERSION_LINE.sub("<version>", text)


def test_regenerating_from_the_vendored_proto_gives_the_committed_stubs(tmp_path: Path) -> None:
    """protoc (grpcio-tools) run as the README says writes the same three files."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            f"-I{SRC}",
            f"--python_out={tmp_path}",
            f"--pyi_out={tmp_path}",
            f"--grpc_python_out={tmp_path}",
            str(SRC / PACKAGE / "api.proto"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    for name in GENERATED:
        fresh = (tmp_path / PACKAGE / name).read_text(encoding="utf-8")
        committed = (SRC / PACKAGE / name).read_text(encoding="utf-8")
        assert _normalised(fresh) == _normalised(committed), f"{name} differs: regenerate it"


def test_vendored_proto_is_the_kubelets_file() -> None:
    """The proto's SHA-256 is the one the README records for k8s.io/kubelet v0.37.2."""
    digest = hashlib.sha256((SRC / PACKAGE / "api.proto").read_bytes()).hexdigest()
    readme = (SRC / "arkgpu/k8s/proto/README.md").read_text(encoding="utf-8")
    assert "k8s.io/kubelet" in readme
    assert "v0.37.2" in readme
    assert digest in readme


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
