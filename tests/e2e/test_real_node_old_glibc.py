"""Issue 32: a container whose image has an older glibc than this machine's runs under the limiter.

The image is Debian 11's (glibc 2.31; this machine has 2.36): its shell, loader and C
libraries from the root ``scripts/build-old-rootfs.sh`` builds, and the project's CUDA
driver client built against that glibc (``node_images.build_old_glibc_image``). It runs
as a pod on the real node through ArkGPU's device plugin (a host process, CDI, the
limiter through ``/etc/ld.so.preload``), whose interception library is the one built on
this machine. Before the library's symbol versions were pinned, the old loader printed
"cannot be preloaded ... ignored" and the program ran with no cap.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from .node_arkgpu import serving_arkgpu_plugin
from .node_gpu_pods import MIB, apply_all, gpu_pod, new_namespace
from .node_images import build_old_glibc_image, old_rootfs
from .node_pods import wait_succeeded
from .realnode import RealNode

IMAGE = "arkgpu.local/e2e-old-glibc:test"
CAP_MIB = 3000
LIBC = "/lib/x86_64-linux-gnu/libc.so.6"
MAPPED = (
    'while read -r line; do case "$line" in *libarkgpu_limiter*) echo "${line##* }";; esac;'
    " done < /proc/self/maps"
)
"""Shell lines printing the path of each mapping of the limiter in the shell itself."""


@pytest.fixture(scope="module")
def node(real_node: RealNode, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealNode]:
    """The node with the old-glibc image and ArkGPU's device plugin serving it."""
    images = tmp_path_factory.mktemp("images")
    real_node.import_image(build_old_glibc_image(images, old_rootfs(), IMAGE))
    with serving_arkgpu_plugin(real_node):
        yield real_node


def test_a_bullseye_image_runs_under_the_pods_memory_cap(node: RealNode, tmp_path: Path) -> None:
    """Inside the container: glibc is 2.31 (older than this machine's 2.36), the shell maps
    the limiter's library, CUDA reports the pod's 3000 MiB cap on a 16 GiB GPU, an
    allocation one MiB past the cap fails and one of 2000 MiB succeeds."""
    namespace = new_namespace(node)
    script = (
        f'{LIBC} | {{ read -r v; echo "$v"; }}; {MAPPED}; echo end-of-maps;'
        f" printf 'info\\nalloc alloc {(CAP_MIB + 1) * MIB}\\nalloc alloc {2000 * MIB}\\n'"
        " | arkgpu-cubench script"
    )
    pod = gpu_pod("oldglibc", node, 0, CAP_MIB, 5000, IMAGE)
    pod["spec"]["containers"][0]["command"][-1] = script
    apply_all(node, namespace, [pod], tmp_path / "pod.json")
    lines = wait_succeeded(node, namespace, "oldglibc").splitlines()
    version = re.search(r"release version (\d+)\.(\d+)", lines[0])
    assert version, lines
    assert (int(version[1]), int(version[2])) == (2, 31), lines[0]
    end = lines.index("end-of-maps")
    assert any(Path(p).name == "libarkgpu_limiter.so" for p in lines[1:end]), lines
    free, total = (int(x) for x in lines[end + 1].split())
    assert total == CAP_MIB * MIB != node.gpu.config.memory_mib * MIB, lines
    assert free <= total
    assert lines[end + 2] == "oom", lines
    assert lines[end + 3].startswith("ok "), lines
    node.kubectl("delete", "namespace", namespace, "--wait=false")
