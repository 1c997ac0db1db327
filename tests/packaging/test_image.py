"""ArkGPU's image, built as ``make image`` builds it, unpacked and run the way the
chart runs it: read-only root file system, every capability dropped, as the
extender's and webhook's user (65532) or as the node containers' root.

The archive is the file ``ctr -n k8s.io images import`` and ``docker load`` read:
its index names the chart's image, every blob matches its digest, the config's
diff_ids match the layers. Inside: ``arkgpu --help``, ``arkgpu limiter bench
--quick`` (with a writable /tmp, as a pod's emptyDir), the node DaemonSet's
init container script, every module the node and the Kubernetes daemons import;
no compiler, test tool or plotting library; every installed package's
requirements satisfied.

Needs root (mmdebstrap, chroot, mount namespaces), mmdebstrap, and PyPI or
pip's cache; the Debian base is cached in ~/.cache/arkgpu/image (minutes cold).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

import pytest
from imagebuild.oci import read_image, unpack
from imagebuild.spec import ImageSpec, load
from packaging.markers import Marker
from packaging.requirements import Requirement

pytestmark = [pytest.mark.image, pytest.mark.timeout(1800)]

REPO = Path(__file__).resolve().parents[2]
SITE = "usr/local/lib/python3.11/dist-packages"
#: The chart's non-root user (extender, webhook).
NONROOT = 65532
#: PATH of the image's configuration (deploy/image/image.toml), for the host's
#: unshare and chroot too.
IMAGE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

#: Mounts a read-only view of the image's root ($1) in a private mount
#: namespace, the kernel's /proc and /dev, a tmpfs /tmp when $2 is "tmp", the
#: host folder $3 at $4 when given; then runs the rest of the arguments in it,
#: all capabilities dropped, no new privileges, as the user $5.
IN_IMAGE = """
set -eu
root=$1 tmp=$2 host=$3 at=$4 user=$5
shift 5
mount --make-rprivate /
mount --bind "$root" "$root"
mount -o remount,bind,ro "$root"
mount -t proc proc "$root/proc"
mount --rbind /dev "$root/dev"
[ "$tmp" = tmp ] && mount -t tmpfs -o mode=1777 tmpfs "$root/tmp"
[ -n "$host" ] && mount --bind "$host" "$root$at"
exec chroot "$root" /usr/bin/setpriv --reuid "$user" --regid "$user" --clear-groups \
    --bounding-set -all --inh-caps -all --no-new-privs "$@"
"""


def in_image(
    root: Path,
    argv: list[str],
    *,
    user: int = NONROOT,
    tmp: bool = False,
    bind: tuple[Path, str] | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 300,
) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` in the image as the chart's security context would."""
    host, at = (str(bind[0]), bind[1]) if bind else ("", "")
    flag = "tmp" if tmp else "-"
    inside = ["/usr/bin/env", *(f"{k}={v}" for k, v in (env or {}).items()), *argv]
    return subprocess.run(
        [
            "unshare",
            "--mount",
            "--fork",
            "sh",
            "-c",
            IN_IMAGE,
            "in-image",
            str(root),
            flag,
            host,
            at,
            str(user),
            *inside,
        ],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={"PATH": IMAGE_PATH, "LANG": "C.UTF-8"},
    )


@pytest.fixture(scope="module")
def spec() -> ImageSpec:
    return load(REPO)


@pytest.fixture(scope="module")
def built() -> Iterator[tuple[Path, Path]]:
    """The archive, built by the image builder from this checkout, and its
    layers unpacked into a folder every user can traverse."""
    if os.geteuid() != 0:
        pytest.fail("the image tests build and run the image as make image does: run them as root")
    scratch = Path(tempfile.mkdtemp(prefix="arkgpu-image-"))
    scratch.chmod(0o755)
    archive = scratch / "arkgpu-image.tar"
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "imagebuild"), "--out", str(archive)],
        capture_output=True,
        text=True,
        timeout=1500,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert done.stdout.strip().splitlines()[-1] == str(archive)
    root = scratch / "root"
    root.mkdir()
    unpack(archive, root)
    yield archive, root
    shutil.rmtree(scratch, ignore_errors=True)


@pytest.fixture(scope="module")
def cuda_built(built: tuple[Path, Path]) -> tuple[Path, Path]:
    """The plain image of the CUDA program (make cuda-image), unpacked beside."""
    scratch = built[0].parent
    archive = scratch / "cuda-program.tar"
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts/imagebuild"), "--cuda-program", "--out", str(archive)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    root = scratch / "cuda-root"
    root.mkdir()
    unpack(archive, root)
    return archive, root


def test_the_archive_names_the_chart_image_and_its_digests_hold(
    built: tuple[Path, Path], spec: ImageSpec
) -> None:
    """containerd's name annotation and Docker's RepoTags name the chart's image;
    each blob's sha256 is its name; each layer's uncompressed sha256 is its diff_id."""
    archive, _ = built
    index, manifest, config = read_image(archive)
    (entry,) = index["manifests"]
    assert entry["annotations"]["io.containerd.image.name"] == spec.name
    assert entry["annotations"]["org.opencontainers.image.ref.name"] == spec.tag
    with tarfile.open(archive) as outer:
        docker = json.load(outer.extractfile("manifest.json"))  # type: ignore[arg-type]
        assert docker[0]["RepoTags"] == [spec.name.removeprefix("docker.io/")]
        for member in outer.getmembers():
            if member.name.startswith("blobs/sha256/"):
                data = outer.extractfile(member).read()  # type: ignore[union-attr]
                assert hashlib.sha256(data).hexdigest() == member.name.rsplit("/", 1)[1]
        diff_ids = []
        for layer in manifest["layers"]:
            data = outer.extractfile("blobs/sha256/" + layer["digest"][7:]).read()  # type: ignore[union-attr]
            diff_ids.append("sha256:" + hashlib.sha256(gzip.decompress(data)).hexdigest())
    assert config["rootfs"]["diff_ids"] == diff_ids
    assert config["config"]["Entrypoint"] == spec.config.entrypoint
    assert "User" not in config["config"]


def test_help_runs_read_only_as_the_nonroot_user_without_capabilities(
    built: tuple[Path, Path],
) -> None:
    """``arkgpu --help`` (the image's default command) on a read-only root, no
    /tmp, as 65532 with no capabilities: what the extender and webhook get."""
    _, root = built
    done = in_image(root, ["arkgpu", "--help"])
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: arkgpu")
    assert done.stderr == ""


def test_limiter_bench_runs_in_the_image(built: tuple[Path, Path]) -> None:
    """``arkgpu limiter bench --quick`` finds the native parts in the image's
    site-packages and reports finite figures (a tmpfs /tmp, as an emptyDir)."""
    _, root = built
    bench = "arkgpu limiter bench --quick --json /tmp/b.json >&2 && cat /tmp/b.json"
    done = in_image(root, ["sh", "-c", bench], tmp=True)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    for key in ("launch_overhead_ns", "share_error_pts_max", "share_change_latency_ms"):
        assert math.isfinite(report[key]), key


def _install_library_script() -> str:
    """The node DaemonSet's init container script (deploy/helm/arkgpu/templates/_dra.tpl)."""
    template = (REPO / "deploy/helm/arkgpu/templates/_dra.tpl").read_text()
    block = re.search(r"- -c\n\s*- \|\n((?:\s{6}.*\n)+)", template)
    assert block is not None, "the install-library command moved in _dra.tpl"
    return "\n".join(line[6:] for line in block[1].splitlines())


def test_the_node_init_container_copies_the_libraries_as_root_without_capabilities(
    built: tuple[Path, Path], tmp_path: Path
) -> None:
    """The chart's install-library script, run as root with every capability
    dropped on the read-only root, writes both native libraries to the host
    folder, executable, identical to the image's."""
    _, root = built
    host = tmp_path / "lib"
    host.mkdir()
    script = _install_library_script()
    done = in_image(root, ["python3", "-c", script, "/usr/local/lib"], user=0, bind=(host, "/mnt"))
    assert "Read-only file system" in done.stderr  # root owns it: only the mount stops it
    done = in_image(root, ["python3", "-c", script, "/mnt"], user=0, bind=(host, "/mnt"))
    assert done.returncode == 0, done.stderr
    native = root / SITE / "arkgpu/limiter/native/build"
    copied = sorted(p.name for p in host.iterdir())
    assert copied == ["libarkgpu_client.so", "libarkgpu_limiter.so"]
    for name in copied:
        assert (host / name).read_bytes() == (native / name).read_bytes()
        assert (host / name).stat().st_mode & 0o777 == 0o755


#: Imports every arkgpu module but those under the prefixes given as arguments;
#: prints the ones that failed as JSON.
IMPORT_ALL = """
import importlib, json, pkgutil, sys
import arkgpu
skip = tuple(sys.argv[1:])
failed = {}
for info in pkgutil.walk_packages(arkgpu.__path__, "arkgpu."):
    if not info.name.startswith(skip):
        try:
            importlib.import_module(info.name)
        except Exception as exc:
            failed[info.name] = repr(exc)
print(json.dumps(failed))
"""

#: Modules that need the plots or bench extras, which the image leaves out:
#: the benchmarks, plotting, the predictor's learned baselines and the command
#: groups that draw (tests/packaging/test_wheel.py lists the same for the core).
NEEDS_BENCH = (
    "arkgpu.bench",
    "arkgpu.cli.placement",
    "arkgpu.cli.predictor",
    "arkgpu.cli.demo",
    "arkgpu.cli.figures",
    "arkgpu.cli.colocate",
    "arkgpu.predictor.baselines",
    "arkgpu.predictor.evaluating",
    "arkgpu.predictor.plotting",
)


def test_every_module_of_the_node_and_kubernetes_daemons_imports(
    built: tuple[Path, Path],
) -> None:
    """In the image every arkgpu module imports but the benchmarks' and
    plotting's: the node runtime, device plugin, DRA driver, extender and
    webhook have their libraries (the node and k8s extras)."""
    _, root = built
    done = in_image(root, ["python3", "-c", IMPORT_ALL, *NEEDS_BENCH])
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {}


def test_the_image_is_lean(built: tuple[Path, Path]) -> None:
    """No compiler, no pip, no test tools, no plotting or learned-baseline libraries."""
    _, root = built
    for tool in ("gcc", "cc", "c++", "make", "ld", "pip", "pip3", "pytest"):
        for folder in ("usr/bin", "usr/local/bin"):
            assert not (root / folder / tool).exists(), f"{folder}/{tool}"
    installed = {
        _normal(d.metadata["Name"]) for d in metadata.distributions(path=[str(root / SITE)])
    }
    never = {"matplotlib", "scikit-learn", "pytest", "hypothesis", "mypy", "ruff", "pip"}
    assert not installed & never
    assert "arkgpu" in installed


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_every_installed_requirement_is_satisfied(built: tuple[Path, Path]) -> None:
    """Each installed distribution's requirements (arkgpu's with the node and k8s
    extras, the others' without extras) are installed at a matching version:
    requirements.txt is complete, though pip installed it with --no-deps."""
    _, root = built
    dists = {
        _normal(d.metadata["Name"]): d for d in metadata.distributions(path=[str(root / SITE)])
    }
    for name, dist in dists.items():
        extras = ("node", "k8s") if name == "arkgpu" else ()
        for line in dist.requires or []:
            requirement = Requirement(line)
            marker = requirement.marker or Marker("python_version >= '0'")
            if not any(
                marker.evaluate({"extra": e}) for e in (*extras, "")
            ):  # this host: linux, 3.11
                continue
            found = dists.get(_normal(requirement.name))
            assert found is not None, f"{name} needs {requirement}"
            assert requirement.specifier.contains(found.version, prereleases=True), (name, line)


@pytest.fixture
def node_driver(tmp_path: Path) -> tuple[Path, int, dict[str, str]]:
    """The node's side of a GPU container: the fake driver and the limiter (the
    node's native build) and a region of 3,000 MiB and 30 % in one folder, to be
    mounted at /mnt, and the environment a CDI spec would give; the container's
    user (the region's owner)."""
    from arkgpu.limiter import Limits, native  # noqa: PLC0415
    from arkgpu.limiter.containers import FakeContainer, make_world_readable  # noqa: PLC0415

    node = tmp_path / "node"
    node.mkdir()
    make_world_readable(tmp_path)
    make_world_readable(node)
    assert (native.stage(node / "driver") / "fake" / "libcuda.so.1").exists()
    limits = Limits((3000 << 20,), share_bp=3000)
    box = FakeContainer.create(node / "region", node / "fakegpu", limits)
    env = {
        "LD_LIBRARY_PATH": "/mnt/driver/fake",
        "LD_PRELOAD": "/mnt/driver/libarkgpu_limiter.so",
        "ARKGPU_REGION_DIR": "/mnt/region",
        "FAKEGPU_STATE": "/mnt/fakegpu",
    }
    return node, box.user if box.user is not None else os.geteuid(), env


def test_the_cuda_program_image_runs_on_the_node_driver_under_the_limiter(
    built: tuple[Path, Path],
    cuda_built: tuple[Path, Path],
    node_driver: tuple[Path, int, dict[str, str]],
    spec: ImageSpec,
) -> None:
    """The plain image shares the arkgpu image's Debian layer and has no driver of
    its own; given the node's (the fake libcuda and the limiter, mounted and named
    in its environment as a CDI spec does) it sees a 3,000 MiB cap and is refused
    past it, read-only, without capabilities, as the container user."""
    archive, root = cuda_built
    index, manifest, config = read_image(archive)
    assert index["manifests"][0]["annotations"]["io.containerd.image.name"] == (
        f"{spec.cuda_repository}:{spec.tag}"
    )
    assert manifest["layers"][0] == read_image(built[0])[1]["layers"][0]
    assert config["config"]["Entrypoint"] == ["cuda-program"]
    assert not list(root.glob("usr/lib/x86_64-linux-gnu/libcuda*"))
    node, user, env = node_driver
    runs = {}
    for args in (["cuda-program", "info"], ["cuda-program", "alloc", "3001"]):
        done = in_image(root, args, user=user, bind=(node, "/mnt"), env=env)
        runs[args[1]] = (done.returncode, json.loads(done.stdout or "null"), done.stderr)
    assert runs["info"][:2] == (0, {"free_mib": 3000, "total_mib": 3000}), runs
    assert runs["alloc"][:2] == (2, {"mib": 3001, "result": "out_of_memory"}), runs


def test_the_be_workload_runs_in_the_arkgpu_image_at_its_share(
    built: tuple[Path, Path], node_driver: tuple[Path, int, dict[str, str]]
) -> None:
    """``arkgpu workload be`` (the BE workload image is the arkgpu image with these
    arguments) drives the node's GPU through the image's kernel runner under the
    limiter: near its 30 % share."""
    _, root = built
    node, user, env = node_driver
    argv = ["arkgpu", "workload", "be", "--seconds", "3", "--kernel-us", "2000"]
    done = in_image(root, argv, user=user, bind=(node, "/mnt"), env=env)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert 0.2 < report["busy_share"] < 0.4, report
    assert report["iterations"] > 100
