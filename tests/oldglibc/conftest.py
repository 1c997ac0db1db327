"""A program of an older Debian release runs under the limiter (chroot).

Collected only with ``ARKGPU_E2E=1`` (as tests/e2e): the root file system is
built by ``scripts/build-old-rootfs.sh`` (mmdebstrap from the Debian mirror of
this machine's apt, a minute or two the first time, cached after that), and
chroot needs root. Without the variable these files are not collected at all
(no skips)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SUITE = "bullseye"  # glibc 2.31, Ubuntu 20.04's too

ROOTFS = pytest.StashKey[Path]()

collect_ignore_glob = [] if os.environ.get("ARKGPU_E2E") == "1" else ["test_*.py"]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Builds the root file system once collection is done, outside every test's timeout."""
    here = Path(__file__).parent
    if not any(here in Path(item.path).parents for item in items):
        return
    if os.geteuid() != 0:
        pytest.exit("tests/oldglibc: chroot needs root", returncode=pytest.ExitCode.TESTS_FAILED)
    script = REPO / "scripts" / "build-old-rootfs.sh"
    done = subprocess.run([str(script), SUITE], stdout=subprocess.PIPE, text=True, check=False)
    if done.returncode != 0:
        failed = pytest.ExitCode.TESTS_FAILED
        pytest.exit(f"tests/oldglibc: {script.name} failed", returncode=failed)
    config.stash[ROOTFS] = Path(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="session")
def rootfs(pytestconfig: pytest.Config) -> Path:
    """The old release's root file system."""
    return pytestconfig.stash[ROOTFS]
