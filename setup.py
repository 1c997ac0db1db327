"""Build hook: compile the limiter's native parts (C, gcc and make only).

Everything else about the package is declared in pyproject.toml. This file
adds two things setuptools cannot be told declaratively:

- ``build_py`` also runs the native Makefile's default target. A regular
  build (``pip install .``, ``pip wheel .``) copies the native sources into
  the build's temporary directory without any ``build/`` folder, runs make
  there and copies the outputs into ``arkgpu/limiter/native/build`` inside the
  wheel, where ``arkgpu.limiter.native`` looks for them: binaries already in
  the source tree (``make native``, a sanitizer build, another machine's
  build) never reach a wheel. An editable install (``pip install -e .``) runs
  make in the source tree instead, as ``make native`` does.
- The wheel is tagged ``py3-none-<platform>``: it holds machine code (shared
  libraries and programs loaded through LD_PRELOAD, ctypes and exec) but no
  CPython extension, so any Python 3 on the same platform can use it.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from setuptools import Distribution, setup
from setuptools.command.bdist_wheel import bdist_wheel
from setuptools.command.build_py import build_py

#: The native sources, relative to this file; their Makefile writes to ``build/``.
NATIVE = Path("src") / "arkgpu" / "limiter" / "native"
#: Where the outputs go inside the installed package (``arkgpu.limiter.native``).
INSTALLED = Path("arkgpu") / "limiter" / "native" / "build"


def make_native(source: Path) -> Path:
    """Run the Makefile's default target in ``source``; return its ``build/``."""
    subprocess.run(["make", "-C", str(source), "all"], check=True)
    return source / "build"


def build_out_of_tree(scratch: Path) -> Path:
    """Build a clean copy of the native sources under ``scratch``."""
    shutil.rmtree(scratch, ignore_errors=True)
    shutil.copytree(
        NATIVE, scratch, ignore=shutil.ignore_patterns("build", "build-*", "*.o", "*.so*")
    )
    return make_native(scratch)


class BuildPyWithNative(build_py):
    """``build_py`` that also builds the native parts (see the module docstring)."""

    def run(self) -> None:
        super().run()
        if self.editable_mode:
            make_native(NATIVE)
            return
        build_temp = Path(self.get_finalized_command("build").build_temp)
        built = build_out_of_tree(build_temp / "arkgpu-native")
        target = Path(self.build_lib) / INSTALLED
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(built, target)


class NativeDistribution(Distribution):
    """A distribution with machine code: built and installed per platform."""

    def has_ext_modules(self) -> bool:
        return True


class PlatformWheel(bdist_wheel):
    """A wheel tagged for the platform, not for a Python ABI."""

    def get_tag(self) -> tuple[str, str, str]:
        _, _, platform = super().get_tag()
        return "py3", "none", platform


setup(
    distclass=NativeDistribution,
    cmdclass={"build_py": BuildPyWithNative, "bdist_wheel": PlatformWheel},
)
