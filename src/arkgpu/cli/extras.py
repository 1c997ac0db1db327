"""Optional dependencies: which of the package's extras provides a missing module.

The core install (``pip install arkgpu``, the container image with the node and
k8s extras) lacks some libraries on purpose: plotting, the predictor's learned
baselines, the Kubernetes client. A command that imports one of them ends with
one line naming the extra to install instead of a traceback. The extras and
their packages are read from the installed package's metadata (pyproject.toml's
``optional-dependencies``), so this module only knows how each package's
distribution name maps to the module it installs.
"""

from __future__ import annotations

import argparse
import re
from importlib import metadata, util

#: Import name -> distribution name of every package an extra adds (tests check
#: this against pyproject.toml's optional-dependencies).
OPTIONAL_MODULES: dict[str, str] = {
    "matplotlib": "matplotlib",
    "sklearn": "scikit-learn",
    "threadpoolctl": "threadpoolctl",
    "pynvml": "nvidia-ml-py",
    "prometheus_client": "prometheus-client",
    "kubernetes": "kubernetes",
    "grpc": "grpcio",
    "google.protobuf": "protobuf",
    "orjson": "orjson",
}

_REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*).*extra\s*==\s*['\"]([^'\"]+)['\"]")


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def extras_of(distribution: str, requires: list[str]) -> list[str]:
    """The extras whose requirements (``Requires-Dist`` lines) name ``distribution``."""
    found = []
    for line in requires:
        match = _REQUIREMENT.match(line)
        if match and _normal(match[1]) == _normal(distribution) and match[2] not in found:
            found.append(match[2])
    return found


def distribution_of(module: str) -> str | None:
    """The optional distribution that installs ``module`` (or a parent of it), if any."""
    parts = module.split(".")
    for end in range(len(parts), 0, -1):
        found = OPTIONAL_MODULES.get(".".join(parts[:end]))
        if found is not None:
            return found
    return None


def missing_extra_message(
    error: ModuleNotFoundError, requires: list[str] | None = None
) -> str | None:
    """One line naming the extra that provides the module ``error`` is about;
    None when the module is not an optional one (then it is a bug)."""
    distribution = distribution_of(error.name or "")
    if distribution is None:
        return None
    if requires is None:
        try:
            requires = metadata.requires("arkgpu") or []
        except metadata.PackageNotFoundError:
            requires = []
    extras = [f"'arkgpu[{extra}]'" for extra in extras_of(distribution, requires)]
    how = f"pip install {' or '.join(extras)}" if extras else f"pip install {distribution}"
    return f"this command needs {distribution} (module {error.name}), which is not installed; {how}"


def check_plot(args: argparse.Namespace) -> None:
    """Before a command runs: a ``--plot`` needs matplotlib, which the plots extra
    installs (ModuleNotFoundError now rather than after the work)."""
    if getattr(args, "plot", None) is not None and util.find_spec("matplotlib") is None:
        raise ModuleNotFoundError("No module named 'matplotlib'", name="matplotlib")
