"""``arkgpu --version`` and ``--help`` import no numerical or plotting library.

A behaviour test, not a timing test: ``python -X importtime`` lists every module the
process imported, and none of the heavy ones may be among them.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("numpy", "scipy", "sklearn", "matplotlib", "pandas", "rich")
"""Top-level packages that must not load for --version or --help."""


def imported_modules(*args: str) -> set[str]:
    """Top-level package names a ``python -m arkgpu ARGS`` process imported."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "arkgpu", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    names = set()
    for line in done.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            names.add(line.rsplit("|", 1)[1].strip().split(".")[0])
    return names


@pytest.mark.parametrize("args", [("--version",), ("--help",)])
def test_start_up_imports_no_heavy_library(args: tuple[str, ...]) -> None:
    """No heavy import happens before a group runs."""
    names = imported_modules(*args)
    assert "arkgpu" in names, "the probe saw no import at all"
    assert not names & set(HEAVY), sorted(names & set(HEAVY))


def test_a_group_imports_what_it_needs() -> None:
    """The probe can fail: a group that needs numpy imports it once named."""
    assert "numpy" in imported_modules("colocate", "--help")
