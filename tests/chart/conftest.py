"""The chart's render tests: the real helm, no cluster.

Collected when helm is already built (``make helm``) or with ``ARKGPU_E2E=1``
(``make test``), in which case helm is built first (minutes the first time on a
machine, docs/studies/helm.md). Otherwise these files are not collected at all:
no skips. The chart's installation into a real API server is tests/e2e/test_chart.py.
"""

from __future__ import annotations

import os
from contextlib import nullcontext
from pathlib import Path

import pytest

from .helm import HelmError, build_helm, helm_is_built

collect_ignore_glob = (
    [] if os.environ.get("ARKGPU_E2E") == "1" or helm_is_built() else ["test_*.py"]
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Builds helm once collection is done, outside every test's timeout (a cache hit at once)."""
    here = Path(__file__).parent
    if not any(here in Path(item.path).parents for item in items):
        return
    capture = config.pluginmanager.getplugin("capturemanager")
    try:
        with capture.global_and_fixture_disabled() if capture else nullcontext():
            build_helm()
    except HelmError as exc:
        pytest.exit(f"chart tests: {exc}", returncode=pytest.ExitCode.TESTS_FAILED)


@pytest.fixture(scope="session")
def helm() -> Path:
    """The helm binary (already built by the collection hook)."""
    return build_helm()
