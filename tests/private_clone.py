"""What a process started as another user could not open in a clone under a
private directory (tests/conftest.py's guard; tests/test_private_clone.py).

`make test` must pass in a clone under a directory of mode 0700 owned by root (a
clone in /root), where the container user (nobody, when the tests run as root)
reaches neither the checkout nor its virtual environment.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


#: Where a clone's own files lie: the checkout and the virtual environment. Under
#: a directory of mode 0700 owned by root (a clone in /root), another user can
#: reach neither, so a test that starts a process as another user must hand it
#: copies placed where every user can read them.
PRIVATE = tuple({REPO.resolve(), Path(sys.prefix).resolve()})
#: Environment variables whose paths a process of another user opens.
PATH_VARIABLES = ("LD_PRELOAD", "LD_LIBRARY_PATH", "ARKGPU_NATIVE_DIR")


def private(path: str) -> bool:
    """``path`` is under the checkout or the virtual environment."""
    try:
        resolved = Path(path).resolve()
    except (OSError, RuntimeError):
        return False
    return any(resolved.is_relative_to(root) for root in PRIVATE)


def _python_module_unreachable(args: list[str], env: Mapping[str, str]) -> str | None:
    """For ``python -m PACKAGE.module`` where this process finds PACKAGE in a
    private place: no PYTHONPATH entry outside the private places has it (the
    child skips the entries it cannot read)."""
    if "-m" not in args[1:-1]:
        return None
    package = args[args.index("-m") + 1].split(".")[0]
    spec = importlib.util.find_spec(package)
    if spec is None or spec.origin is None or not private(spec.origin):
        return None
    entries = [e for e in env.get("PYTHONPATH", "").split(os.pathsep) if e]
    if any(not private(e) and (Path(e) / package).is_dir() for e in entries):
        return None
    return f"the package {package} only in {spec.origin}"


def privately_started(args: Sequence[str], env: Mapping[str, str] | None) -> str | None:
    """What a process started as another user would fail to open in a clone under a
    private directory: the program, a file argument, a path in its environment."""
    argv = [str(a) for a in args]
    environment = os.environ if env is None else env
    if private(argv[0]):
        return f"the program {argv[0]}"
    for value in argv[1:]:
        if value.startswith("/") and Path(value).exists() and private(value):
            return f"the argument {value}"
    for name in PATH_VARIABLES:
        for value in re.split(r"[:\s]+", environment.get(name, "")):
            if value and private(value):
                return f"{name}={value}"
    return _python_module_unreachable(argv, environment)
