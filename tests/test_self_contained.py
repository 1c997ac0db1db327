"""The repository stands on its own: nothing reads a ``shared`` folder beside or above it.

Every file git knows about (tracked, or new and not ignored) is searched for
a path into a ``shared`` folder outside the repository: ``../shared``,
``shared/data``, an absolute ``/work/shared``, or ``"shared"`` as a path
component in code (``Path(...) / "shared"``). Allowed, and why:

- ``docs/**/*.md``: prose and records of past measurements, which may say
  where the data was read from at the time; no command or test reads them.
- this file, which spells the patterns out.
"""

from __future__ import annotations

import re
import subprocess
from fnmatch import fnmatch
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

PATTERN = re.compile(r"""\.\./shared\b|\bshared/data\b|/work/shared\b|["']shared["']""")
"""A reference to a ``shared`` folder outside the repository."""

ALLOWED = ("docs/*.md", "docs/**/*.md", "tests/test_self_contained.py")
"""Paths (fnmatch patterns) allowed to mention such a folder; see the module docstring."""

TEXT_LIMIT = 2_000_000
"""Files larger than this (bytes) are data, not code; none of ours is that large."""


def repository_files() -> list[str]:
    """Tracked files and new files git does not ignore, relative to the repository root."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.fail(f"cannot list the repository's files with git: {exc}")
    return [line for line in out.splitlines() if line]


def offending_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) of each reference to an outside ``shared`` folder in ``text``."""
    return [
        (number, line.strip())
        for number, line in enumerate(text.splitlines(), start=1)
        if PATTERN.search(line)
    ]


def is_allowed(path: str) -> bool:
    """Whether ``path`` is one of the justified exceptions."""
    return any(fnmatch(path, pattern) for pattern in ALLOWED)


@pytest.mark.parametrize(
    "line",
    [
        'path = REPO.parent / "shared" / "data"',
        "ARKGPU_OPENB_DIR=../shared/data/openb arkgpu placement study",
        "see shared/data/profiles/igniter_v100",
        "cp -r /work/shared/data .",
        "Path('..', 'shared')",
    ],
)
def test_detector_flags_references_to_an_outside_shared_folder(line: str) -> None:
    """Each way the project used to reach ``../shared`` is caught."""
    assert offending_lines(f"x = 1\n{line}\n") == [(2, line)]


@pytest.mark.parametrize(
    "line",
    [
        "def shared_data() -> Path:",
        "SOFLAGS := -shared -fPIC",
        "LC and BE on shared GPUs",
        "a robust, process-shared pthread mutex",
        'path = REPO / "data" / "profiles"',
    ],
)
def test_detector_leaves_other_uses_of_the_word_alone(line: str) -> None:
    """Identifiers, compiler flags and prose that say "shared" are not folder references."""
    assert offending_lines(line) == []


def test_docs_are_the_only_exceptions() -> None:
    """Markdown under docs/ is allowed; code, tests, scripts, Makefile and README are not."""
    assert is_allowed("docs/BENCHMARKS.md")
    assert is_allowed("docs/studies/demo.md")
    for path in ("README.md", "Makefile", ".ci/run", "src/arkgpu/cli/placement.py", "tests/x.py"):
        assert not is_allowed(path), path


def test_no_file_refers_to_a_shared_folder_outside_the_repository() -> None:
    """Code, tests, scripts, the Makefile, CI and README read only what the repository holds."""
    files = repository_files()
    assert "src/arkgpu/traces/catalog.py" in files  # the listing really is this repository
    found = []
    for name in files:
        path = REPO / name
        if is_allowed(name) or not path.is_file() or path.stat().st_size > TEXT_LIMIT:
            continue
        text = path.read_bytes().decode("utf-8", errors="replace")
        found += [f"{name}:{n}: {line}" for n, line in offending_lines(text)]
    assert not found, "references to a shared folder outside the repository:\n" + "\n".join(found)


def test_data_the_tests_read_is_in_the_repository() -> None:
    """The measured sources the converters' tests read, and their notes, are here."""
    for relative in (
        "data/README.md",
        "data/profiles/igniter_v100/igniter_v100_solo_mps.csv",
        "data/profiles/igniter_v100/igniter_v100_pair_interference.csv",
        "data/profiles/parvagpu_a100/prof_data_resnet50.csv",
        "data/profiles/migprofiler_a100_80g/cv_cv_infer.csv",
        "data/fgd_results/analysis_allo_discrete.csv.gz",
        "src/arkgpu/data/openb/SOURCE.md",
    ):
        assert (REPO / relative).is_file(), relative
