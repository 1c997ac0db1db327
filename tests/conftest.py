"""Shared fixtures: where the project's measured data lies, small traces, and the guard
that a process started as another user reads nothing from the checkout."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from private_clone import private, privately_started

# Property tests are reproducible: the default profile draws the same examples on every run
# (derandomize), so a run cannot pass by luck, and keeps no local example database that CI
# would not have; a failure found once is replayed with @example in its test. Set
# HYPOTHESIS_PROFILE=explore to search with fresh random examples (and a local database).
settings.register_profile("repeatable", derandomize=True, database=None, print_blob=True)
settings.register_profile("explore", derandomize=False, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))


REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``<repo>/data``: the measured source files, as published (see data/README.md)."""
    path = REPO / "data"
    if not path.is_dir():
        pytest.fail(f"measured source data not found at {path} (it is part of the repository)")
    return path


@pytest.fixture(autouse=True)
def reachable_by_other_users(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail a test that starts a process as another user (nobody, when the tests
    run as root) from the checkout or the virtual environment: in a clone under a
    directory of mode 0700 (as /root) that user can reach neither. The program is
    refused as the kernel would refuse it (PermissionError), so that code falling
    back to another interpreter is tested as it would run there."""
    original = subprocess.Popen.__init__

    def guarded(self: subprocess.Popen[Any], args: Any, *rest: Any, **kwargs: Any) -> None:
        user = kwargs.get("user")
        if user is not None and user != os.geteuid() and not isinstance(args, str | bytes):
            argv = [str(a) for a in args]
            unreachable = privately_started(argv, kwargs.get("env"))
            if unreachable is not None and private(argv[0]):
                raise PermissionError(13, "Permission denied (a clone under /root)", argv[0])
            if unreachable is not None:
                pytest.fail(
                    f"started as user {user} with {unreachable}, which that user cannot read "
                    "in a clone under a directory of mode 0700: copy it to a folder every "
                    "user can read (native.stage, make_world_readable)"
                )
        original(self, args, *rest, **kwargs)

    monkeypatch.setattr(subprocess.Popen, "__init__", guarded)
