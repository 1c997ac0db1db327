"""Which build of the native parts the tests and tools load: the plain one in
``native/build`` (``make native``), or a sanitizer build beside it
(``make -C src/arkgpu/limiter/native asan`` or ``tsan``), chosen with the
environment variable ``ARKGPU_LIMITER_BUILD``.

A sanitizer build keeps the plain build's file names in its own directory,
plus ``preload-first``: the sanitizer runtime that must precede the library in
``LD_PRELOAD`` of a program not built with it.
"""

from __future__ import annotations

import os
from pathlib import Path

from arkgpu.limiter import native

ENV = "ARKGPU_LIMITER_BUILD"
#: Build name -> its directory beside ``native/build``.
VARIANTS: dict[str, str] = {"plain": "build", "asan": "build-asan", "tsan": "build-tsan"}
PRELOAD_FIRST = "preload-first"


def variant() -> str:
    """The build named by ARKGPU_LIMITER_BUILD (default ``plain``)."""
    name = os.environ.get(ENV, "") or "plain"
    if name not in VARIANTS:
        raise ValueError(f"{ENV}={name!r}: not one of {', '.join(sorted(VARIANTS))}")
    return name


def variant_dir(name: str) -> Path:
    """The directory build ``name`` is made in."""
    return native.build_dir().parent / VARIANTS[name]


def preload(library: Path) -> str:
    """The LD_PRELOAD value that loads ``library``: its build's sanitizer
    runtime first when it has one."""
    first = library.parent / PRELOAD_FIRST
    runtime = first.read_text().strip() if first.exists() else ""
    return f"{runtime} {library}" if runtime else str(library)
