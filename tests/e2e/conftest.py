"""End-to-end tests on a real control plane (etcd, kube-apiserver, kube-scheduler 1.37).

Collected only with ``ARKGPU_E2E=1``: the control plane is built from source
(``scripts/build-control-plane.sh``, minutes the first time on a machine).
Without the variable these files are not collected at all (no skips).
"""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from contextlib import nullcontext
from pathlib import Path

import pytest
from kubernetes import client as k8s

from chart.helm import HelmError, build_helm

from .controlplane import (
    ControlPlane,
    ControlPlaneConfig,
    ExtenderPlane,
    build_control_plane,
    enabled,
    free_port,
    running_control_plane,
    write_extender_scheduler_config,
)
from .node_images import old_rootfs
from .processes import ControlPlaneError
from .realnode import RealNode, RealNodeConfig, build_node, node_plane_config, running_node

collect_ignore_glob = [] if enabled() else ["test_*.py"]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Builds the control plane once collection is done, outside every test's timeout.

    A cache hit returns at once; a cold build takes minutes (docs/studies/control-plane.md)
    and shows its progress lines. A failed build ends the session with the script's reason.
    """
    here = Path(__file__).parent
    if not any(here in Path(item.path).parents for item in items):
        return
    capture = config.pluginmanager.getplugin("capturemanager")
    try:
        with capture.global_and_fixture_disabled() if capture else nullcontext():
            build_control_plane()
    except ControlPlaneError as exc:
        pytest.exit(f"end-to-end tests: {exc}", returncode=pytest.ExitCode.TESTS_FAILED)
    _build_helm_for_chart_tests(config, items)
    _build_node_for_real_node_tests(config, items)


def _build_node_for_real_node_tests(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Builds the real node (scripts/build-node.sh) when its tests are collected, as above."""
    if not any(Path(item.path).name.startswith("test_real_node") for item in items):
        return
    capture = config.pluginmanager.getplugin("capturemanager")
    old_glibc = any(Path(item.path).name == "test_real_node_old_glibc.py" for item in items)
    try:
        with capture.global_and_fixture_disabled() if capture else nullcontext():
            build_node()
            if old_glibc:  # its Debian 11 root: a minute or two the first time, then cached
                old_rootfs()
    except ControlPlaneError as exc:
        pytest.exit(f"end-to-end tests: {exc}", returncode=pytest.ExitCode.TESTS_FAILED)
    except subprocess.CalledProcessError as exc:
        failed = pytest.ExitCode.TESTS_FAILED
        pytest.exit(f"end-to-end tests: {exc.cmd[1]} failed (its reason is above)", failed)


def _build_helm_for_chart_tests(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Builds helm (scripts/build-helm.sh) when the chart's tests are collected, as above."""
    if not any(Path(item.path).name.startswith("test_chart") for item in items):
        return
    capture = config.pluginmanager.getplugin("capturemanager")
    try:
        with capture.global_and_fixture_disabled() if capture else nullcontext():
            build_helm()
    except HelmError as exc:
        pytest.exit(f"end-to-end tests: {exc}", returncode=pytest.ExitCode.TESTS_FAILED)


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """etcd, kube-apiserver and kube-scheduler on loopback, for the whole session."""
    config = ControlPlaneConfig(
        bin_dir=build_control_plane(), workdir=tmp_path_factory.mktemp("control-plane")
    )
    with running_control_plane(config) as plane:
        yield plane


@pytest.fixture(scope="session")
def api(control_plane: ControlPlane) -> Iterator[k8s.ApiClient]:
    """An admin client of the official ``kubernetes`` package."""
    with control_plane.api_client() as api_client:
        yield api_client


@pytest.fixture
def namespace(api: k8s.ApiClient) -> str:
    """A fresh namespace with its ``default`` ServiceAccount.

    The ServiceAccount admission plugin rejects pods until that account exists,
    and no controller manager runs here to create it.
    """
    core = k8s.CoreV1Api(api)
    name = f"e2e-{uuid.uuid4().hex[:8]}"
    core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=name)))
    core.create_namespaced_service_account(
        name, k8s.V1ServiceAccount(metadata=k8s.V1ObjectMeta(name="default"))
    )
    return name


# --- The extender's control plane (added for tests/e2e/test_extender*.py) ---------------------


@pytest.fixture(scope="session")
def extender_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ExtenderPlane]:
    """A second control plane whose kube-scheduler has the profile ``arkgpu-scheduler`` with
    the extender at a port chosen up front (the extender process is the tests' to start and
    kill: see :class:`ExtenderPlane`)."""
    workdir = tmp_path_factory.mktemp("extender-plane")
    port = free_port()
    scheduler_config = write_extender_scheduler_config(workdir, port)
    config = ControlPlaneConfig(
        bin_dir=build_control_plane(),
        workdir=workdir,
        scheduler_args=(f"--config={scheduler_config}",),
    )
    with running_control_plane(config) as plane:
        yield ExtenderPlane(plane, port, workdir)


# --- The real node (added for tests/e2e/test_real_node*.py) -----------------------------------


@pytest.fixture(scope="session")
def real_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealNode]:
    """A control plane of its own (kube-controller-manager runs beside it and creates every
    namespace's ServiceAccount, which the ``namespace`` fixture creates by hand) and the real
    node joined to it: containerd, kubelet, the fake GPUs. Torn down at the session's end."""
    config = node_plane_config(tmp_path_factory.mktemp("real-node-plane"))
    with (
        running_control_plane(config) as plane,
        running_node(plane, build_node(), RealNodeConfig()) as node,
    ):
        yield node
