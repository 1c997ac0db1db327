"""The guard of tests/conftest.py: a test that starts a process as another user
hands it only files that user can read wherever the checkout lies.

`make test` must pass in a clone under a directory of mode 0700 owned by root
(a clone in /root), where the container user (nobody) can reach neither the
checkout nor its virtual environment. The guard fails such a test in any
checkout, not only in a private one.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from private_clone import REPO, privately_started

NOBODY = 65534
CUBENCH = str(REPO / "src/arkgpu/limiter/native/build/arkgpu-cubench")


def test_a_program_an_argument_or_a_library_in_the_checkout_is_named(tmp_path: Path) -> None:
    """The program, a file argument, LD_PRELOAD, LD_LIBRARY_PATH or ARKGPU_NATIVE_DIR
    under the checkout or the virtual environment are named; copies are not."""
    assert privately_started([CUBENCH, "script"], {}) == f"the program {CUBENCH}"
    assert privately_started(["/bin/cat", str(REPO / "pyproject.toml")], {}) is not None
    library = str(REPO / "src/arkgpu/limiter/native/build/libarkgpu_limiter.so")
    assert privately_started(["/bin/true"], {"LD_PRELOAD": library}) == f"LD_PRELOAD={library}"
    assert privately_started(["/bin/true"], {"ARKGPU_NATIVE_DIR": sys.prefix}) is not None
    copy = tmp_path / "arkgpu-cubench"
    assert privately_started([str(copy), "script"], {"LD_PRELOAD": str(tmp_path / "l.so")}) is None


def test_python_dash_m_needs_the_package_outside_the_checkout(tmp_path: Path) -> None:
    """``python3 -m arkgpu...`` as another user finds arkgpu only on a PYTHONPATH
    entry outside the checkout; one with a copy of the package passes."""
    argv = ["/usr/bin/python3", "-m", "arkgpu.profiling.torch_worker", "{}"]
    assert privately_started(argv, {"PYTHONPATH": str(REPO / "src")}) is not None
    (tmp_path / "arkgpu").mkdir()
    path = os.pathsep.join((str(REPO / "src"), str(tmp_path)))
    assert privately_started(argv, {"PYTHONPATH": path}) is None
    assert privately_started(["/usr/bin/python3", "-m", "json.tool"], {}) is None


def test_starting_a_checkout_program_as_another_user_is_refused_as_in_a_private_clone() -> None:
    """The guard refuses the program as the kernel would in a clone under /root."""
    with pytest.raises(PermissionError, match="a clone under /root"):
        subprocess.Popen([CUBENCH, "script"], user=NOBODY if os.geteuid() == 0 else 0)


def test_a_library_from_the_checkout_fails_the_test(tmp_path: Path) -> None:
    """A reachable program with the checkout's library preloaded fails the test,
    naming what to copy."""
    library = str(REPO / "src/arkgpu/limiter/native/build/libarkgpu_limiter.so")
    with pytest.raises(pytest.fail.Exception, match=r"LD_PRELOAD=.*copy it to a folder"):
        subprocess.Popen(["/bin/true"], env={"LD_PRELOAD": library}, user=NOBODY)
