"""The libraries a container loads need no glibc newer than the baseline.

A library linked on this machine's glibc (2.36) takes the default symbol
versions of that glibc (GLIBC_2.34 for dlopen and pthread_create, GLIBC_2.33
for stat and fstat); ld.so of an older image then refuses to preload it and
the program runs unlimited. glibc_compat.h pins the old versions; these tests
read each library's ELF version needs (.gnu.version_r, through pyelftools) and
fail on any glibc version past GLIBC_2.17 (docs/LIMITER.md, glibc baseline)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from arkgpu.limiter import native

from .elfversions import (
    BASELINE,
    dynamic_entries,
    glibc_version,
    null_plt_relocations,
    too_new,
    version_needs,
)

#: The libraries a container process loads: ours and the fake driver's.
LIBRARIES = (
    "libarkgpu_limiter.so",
    "libarkgpu_client.so",
    "fake/libcuda.so.1",
    "fake/libnvidia-ml.so.1",
)

#: Before glibc 2.34 these lived in libdl and libpthread, not in libc.
OLD_HOMES = {"libdl.so.2": ("dlopen", "dlvsym"), "libpthread.so.0": ("pthread_create",)}


def test_the_version_reader_sees_a_need_past_the_baseline() -> None:
    """The check itself: Python's own interpreter, built on this machine's
    glibc, needs versions past 2.17 (so a reader that found nothing would fail)."""
    assert glibc_version("GLIBC_2.34") == (2, 34)
    assert glibc_version("GLIBC_PRIVATE") is None
    assert too_new(Path(sys.executable).resolve(), BASELINE), "reader found no version need"


@pytest.mark.parametrize("relative", LIBRARIES)
def test_a_library_needs_no_glibc_past_the_baseline(relative: str) -> None:
    path = native.build_dir() / relative
    assert path.exists(), f"{path}: not built"
    assert "libc.so.6" in version_needs(path), "no glibc version need read"
    assert too_new(path, BASELINE) == [], f"{relative} needs glibc past {BASELINE}"


@pytest.mark.parametrize("relative", LIBRARIES)
def test_a_library_names_the_old_homes_of_the_functions_it_calls(relative: str) -> None:
    """Under glibc before 2.34, dlopen is in libdl and pthread_create in
    libpthread: a library that calls them must list them as needed, or the
    call fails under an old glibc when the program did not load them itself."""
    needed, undefined = dynamic_entries(native.build_dir() / relative)
    for home, functions in OLD_HOMES.items():
        if undefined & set(functions):
            assert home in needed, f"{relative} calls {sorted(undefined & set(functions))}"


@pytest.mark.parametrize("relative", LIBRARIES)
def test_a_library_has_no_null_plt_relocation(relative: str) -> None:
    """Pinning a name the sanitizer runtime also defines (__xstat, __fxstat) made
    the linker leave such an entry in the ASan and TSan builds."""
    assert null_plt_relocations(native.build_dir() / relative) == 0
