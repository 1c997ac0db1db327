"""The real helm (built by ``scripts/build-helm.sh``) and the chart's rendered manifests.

Shared by the chart's render tests (``tests/chart``) and its installation into the
real API server (``tests/e2e/test_chart.py``).
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO / "scripts" / "build-helm.sh"
CHART = REPO / "deploy" / "helm" / "arkgpu"
HELM_TIMEOUT_S = 120.0
"""Bound of one helm command (a render takes well under a second on an idle machine)."""

Manifest = dict[str, Any]


class HelmError(RuntimeError):
    """helm or its build failed; the message holds helm's own reason."""


def build_helm() -> Path:
    """Runs the (idempotent) build script; returns the helm binary."""
    result = subprocess.run(
        ["bash", str(BUILD_SCRIPT)], check=False, stdout=subprocess.PIPE, text=True
    )
    if result.returncode != 0:
        raise HelmError(f"{BUILD_SCRIPT} failed with exit status {result.returncode} (see above)")
    return Path(result.stdout.strip().splitlines()[-1]) / "helm"


def helm_is_built() -> bool:
    """Whether the build script finds helm already built (it builds nothing to answer)."""
    result = subprocess.run(
        ["bash", str(BUILD_SCRIPT), "--check"], check=False, capture_output=True, text=True
    )
    return result.returncode == 0


def run_helm(
    helm: Path, *args: str, kubeconfig: Path | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """``helm args...`` with its output captured; raises HelmError with stderr when ``check``."""
    env = {**os.environ, "NO_COLOR": "1"}
    env.pop("KUBECONFIG", None)
    if kubeconfig is not None:
        env["KUBECONFIG"] = str(kubeconfig)
    with tempfile.TemporaryDirectory(prefix="arkgpu-helm-") as home:
        # helm's caches and settings stay in a temporary home, out of the user's.
        env.update(
            HELM_CACHE_HOME=f"{home}/cache",
            HELM_CONFIG_HOME=f"{home}/config",
            HELM_DATA_HOME=f"{home}/data",
        )
        result = subprocess.run(
            [str(helm), *args],
            check=False,
            capture_output=True,
            text=True,
            env=env,
            timeout=HELM_TIMEOUT_S,
        )
    if check and result.returncode != 0:
        raise HelmError(f"helm {' '.join(args)}: exit {result.returncode}: {result.stderr.strip()}")
    return result


def values_args(values: Mapping[str, Any] | None, directory: Path) -> list[str]:
    """``-f FILE`` for ``values`` (JSON is YAML), written into ``directory``; [] for none."""
    if not values:
        return []
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"values-{len(list(directory.iterdir()))}.json"
    path.write_text(json.dumps(values))
    return ["-f", str(path)]


def render(
    helm: Path,
    workdir: Path,
    values: Mapping[str, Any] | None = None,
    *,
    release: str = "arkgpu",
    namespace: str = "arkgpu-system",
    extra: Sequence[str] = (),
) -> list[Manifest]:
    """``helm template`` of the chart: every rendered object, in helm's order."""
    args = ["template", release, str(CHART), "--namespace", namespace]
    result = run_helm(helm, *args, *values_args(values, workdir), *extra)
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def find(docs: Sequence[Manifest], kind: str, name: str) -> Manifest:
    """The one object of ``kind`` named ``name`` (AssertionError listing what exists)."""
    found = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    names = sorted((d["kind"], d["metadata"]["name"]) for d in docs)
    assert len(found) == 1, f"{kind}/{name}: found {len(found)} among {names}"
    return found[0]


def container(workload: Manifest, name: str, *, init: bool = False) -> dict[str, Any]:
    """One container of a Deployment or DaemonSet."""
    spec = workload["spec"]["template"]["spec"]
    containers = spec["initContainers" if init else "containers"]
    matches = [c for c in containers if c["name"] == name]
    assert len(matches) == 1, f"container {name}: {[c['name'] for c in containers]}"
    return dict(matches[0])


def config_map_file(docs: Sequence[Manifest], name: str, key: str) -> str:
    """A file of a rendered ConfigMap."""
    return str(find(docs, "ConfigMap", name)["data"][key])
