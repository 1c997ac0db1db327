"""The check both stub tests share: regenerate from the vendored protos, compare, and the
kubelet's checksums in the README beside them.

The device plugin's stubs (``arkgpu/k8s/proto``) and the DRA driver's
(``arkgpu/k8s/proto_dra``) are grpcio-tools' output for protos vendored from
``k8s.io/kubelet``. Regenerating must give the committed ``api_pb2.py``,
``api_pb2.pyi`` and ``api_pb2_grpc.py`` (the lines naming the generator's own
version aside), so the stubs never drift from the protos.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"
GENERATED = ("api_pb2.py", "api_pb2.pyi", "api_pb2_grpc.py")
"""What protoc writes beside each proto."""
KUBELET_VERSION = "v0.37.2"
"""The ``k8s.io/kubelet`` module version the protos come from (Kubernetes 1.37.2)."""
VERSION_LINE = re.compile(
    r"Protobuf Python Version: .*|^\s+\d+,$|GRPC_GENERATED_VERSION = '.*'", re.MULTILINE
)
"""Lines that name the generator's version rather than anything of the proto."""


def _normalised(text: str) -> str:
    return VERSION_LINE.sub("<version>", text)


def regenerate(protos: Sequence[Path], out: Path) -> subprocess.CompletedProcess[str]:
    """protoc (grpcio-tools) run as the READMEs say, over ``protos`` (relative to ``SRC``)."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            f"-I{SRC}",
            f"--python_out={out}",
            f"--pyi_out={out}",
            f"--grpc_python_out={out}",
            *(str(SRC / proto) for proto in protos),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def drifted(protos: Sequence[Path], out: Path) -> list[str]:
    """The generated files in ``out`` that differ from the committed ones (empty: none)."""
    return [
        str(proto.parent / name)
        for proto in protos
        for name in GENERATED
        if _normalised((out / proto.parent / name).read_text(encoding="utf-8"))
        != _normalised((SRC / proto.parent / name).read_text(encoding="utf-8"))
    ]


def recorded_in_readme(proto: Path, readme: Path) -> bool:
    """Whether ``readme`` names k8s.io/kubelet, its version and the proto's SHA-256."""
    text = (SRC / readme).read_text(encoding="utf-8")
    digest = hashlib.sha256((SRC / proto).read_bytes()).hexdigest()
    return "k8s.io/kubelet" in text and KUBELET_VERSION in text and f"sha256 `{digest}`" in text
