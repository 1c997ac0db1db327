"""The limiter holds a memory cap over a program of Debian 11 (glibc 2.31).

The program is the project's driver client built against the old release's
glibc (gcc --sysroot) and run in a chroot of that release, as nobody; the
interception library and the fake driver are the ones built on this machine
(glibc 2.36), as a node hands them to a container. Before glibc_compat.h the
library needed GLIBC_2.34 and ld.so refused to start the program."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from arkgpu.limiter import native
from arkgpu.limiter.containers import NOBODY, FakeContainer, make_world_readable
from arkgpu.limiter.region import Limits, read_usage
from limiter.elfversions import glibc_version, version_needs

MiB = 1 << 20
SOURCE = Path(native.__file__).resolve().parent / "native"


@pytest.fixture
def jail(rootfs: Path) -> Iterator[Path]:
    """A fresh folder under the old root's /tmp (removed after the test)."""
    path = Path(tempfile.mkdtemp(prefix="arkgpu-old-", dir=rootfs / "tmp"))
    make_world_readable(path)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def build_old_program(rootfs: Path, dest: Path) -> Path:
    """arkgpu-cubench built against the old root's glibc."""
    subprocess.run(
        [
            "gcc",
            f"--sysroot={rootfs}",
            f"-B{rootfs}/usr/lib/x86_64-linux-gnu",
            "-O2",
            "-pthread",
            "-o",
            str(dest),
            str(SOURCE / "cubench.c"),
            "-ldl",
        ],
        check=True,
    )
    return dest


def newest_glibc(path: Path) -> tuple[int, ...]:
    names = version_needs(path).get("libc.so.6", set())
    return max(v for n in names if (v := glibc_version(n)) is not None)


STEPS = f"alloc alloc {5 * MiB}\nalloc alloc {4 * MiB}\nquit\n"


def run_in_root(
    rootfs: Path, jail: Path, commands: str, preload: bool
) -> subprocess.CompletedProcess[str]:
    """Run the old program in the chroot as nobody with ``commands`` on its stdin."""
    inside = Path("/") / jail.relative_to(rootfs)
    env = {
        "PATH": "/usr/bin:/bin",
        "LD_LIBRARY_PATH": f"{inside}/lib/fake",
        "FAKEGPU_STATE": f"{inside}/fakegpu",
        "FAKEGPU_CTX_RESERVE_MIB": "0",
        "ARKGPU_REGION_DIR": f"{inside}/region",
    }
    # Through env(1) inside the root: this machine's chroot(1) must not preload it.
    preload_env = [f"LD_PRELOAD={inside}/lib/libarkgpu_limiter.so"] if preload else []
    chroot = shutil.which("chroot") or "/usr/sbin/chroot"
    args = [chroot, f"--userspec={NOBODY}:{NOBODY}", str(rootfs), "/usr/bin/env", *preload_env]
    args += [f"{inside}/cubench", "script"]
    return subprocess.run(
        args, input=commands, capture_output=True, text=True, env=env, timeout=60, check=False
    )


def test_a_bullseye_program_runs_under_the_cap(rootfs: Path, jail: Path) -> None:
    program = build_old_program(rootfs, jail / "cubench")
    assert newest_glibc(program) <= (2, 31) < newest_glibc(Path("/bin/true").resolve())
    native.stage(jail / "lib")
    box = FakeContainer.create(jail / "region", jail / "fakegpu", Limits((8 * MiB,)))
    done = run_in_root(rootfs, jail, STEPS, preload=True)
    assert done.returncode == 0, done.stderr
    first, second = done.stdout.split("\n")[:2]
    assert first.split()[0] == "ok", (done.stdout, done.stderr)
    assert second == "oom", (done.stdout, done.stderr)
    assert "ignored" not in done.stderr
    # The region counts what the limiter let through (a later process of the
    # container would reclaim it: this one is gone).
    assert read_usage(box.region).used_bytes[0] == int(first.split()[2])


def test_without_the_library_the_same_program_is_not_capped(rootfs: Path, jail: Path) -> None:
    """The control: the refusal above is the limiter's, not the fake driver's."""
    build_old_program(rootfs, jail / "cubench")
    native.stage(jail / "lib")
    FakeContainer.create(jail / "region", jail / "fakegpu", Limits((8 * MiB,)))
    done = run_in_root(rootfs, jail, STEPS, preload=False)
    assert done.returncode == 0, done.stderr
    assert [line.split()[0] for line in done.stdout.splitlines()[:2]] == ["ok", "ok"]
