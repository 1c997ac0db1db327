"""The steps of ``make image``: Debian base, wheels, Python layer, archive.

The Debian base (mmdebstrap) is built once per specification into the cache
(``~/.cache/arkgpu/image/base-<key>/``, the key a hash of what goes into it),
with its layer blob. Every build then makes the wheel from the checkout,
downloads the pinned wheels (pip's cache keeps them), installs them into an
empty ``/usr/local`` over a read-only view of the base (so that nothing lands
anywhere else), writes that as the second layer and packs the archive.
Needs root (mmdebstrap's root mode, chroot and bind mounts in a private mount
namespace), as the real-node tests do.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from imagebuild.oci import Layer, write_archive, write_layer
from imagebuild.spec import SPEC_DIR, ImageSpec, base_key

#: What the Debian base leaves out besides dpkg's exclusions: apt's lists and
#: caches, logs, and files that name the machine or the moment of the build.
BASE_PRUNE = (
    "var/lib/apt/lists",
    "var/cache/apt",
    "var/cache/ldconfig/aux-cache",
    "var/cache/debconf/templates.dat-old",
    "var/cache/debconf/config.dat-old",
    "var/log",
    "etc/machine-id",
    "etc/hostname",
    "etc/resolv.conf",
)

#: C flags of the image's wheel: the Makefile's without -g (debug information
#: names the build's temporary folder, so two builds would differ).
WHEEL_CFLAGS = "-O2"


@dataclass(frozen=True)
class Paths:
    """Where the build reads and writes."""

    repo: Path
    """The checkout."""
    cache: Path
    """Cached bases, wheels and blobs (``~/.cache/arkgpu/image``)."""
    out: Path
    """The archive to write."""


def log(message: str) -> None:
    """One progress line on stderr (stdout's last line is the archive's path)."""
    print(f"image: {message}", file=sys.stderr, flush=True)


def run(args: list[str], **kwargs: object) -> None:
    """Run a command; its output goes to stderr; failure ends the build."""
    subprocess.run(args, check=True, stdout=sys.stderr, **kwargs)  # type: ignore[call-overload]


def prune(root: Path, names: tuple[str, ...]) -> None:
    """Empty the named directories and remove the named files under ``root``."""
    for name in names:
        path = root / name
        if path.is_dir() and not path.is_symlink():
            for child in path.iterdir():
                if child.is_dir() and not child.is_symlink():
                    shutil.rmtree(child)
                else:
                    child.unlink()
        elif path.exists() or path.is_symlink():
            path.unlink()
    (root / "etc" / "machine-id").write_text("")  # systemd's "not yet set"; runc needs none


def build_base(paths: Paths, spec: ImageSpec) -> tuple[Path, Layer]:
    """The cached Debian root file system and its layer, built when missing."""
    base = paths.cache / f"base-{base_key(paths.repo, spec)}"
    record = base / "layer.json"
    if record.exists():
        log(f"Debian base: cached in {base}")
        return base / "rootfs", Layer(**json.loads(record.read_text()))
    started = time.monotonic()
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    rootfs = base / "rootfs"
    run(
        [
            "mmdebstrap",
            "--quiet",
            "--mode=root",
            f"--variant={spec.variant}",
            f"--include={','.join(spec.packages)}",
            f"--dpkgopt={paths.repo / SPEC_DIR / 'dpkg-slim.cfg'}",
            spec.suite,
            str(rootfs),
        ],
        env={**os.environ, "SOURCE_DATE_EPOCH": str(spec.epoch)},
    )
    prune(rootfs, BASE_PRUNE)
    comment = f"mmdebstrap --variant={spec.variant} {spec.suite} + {' '.join(spec.packages)}"
    layer = write_layer(rootfs, paths.cache / "blobs", spec.epoch, comment)
    record.write_text(json.dumps(asdict(layer)))
    log(f"Debian base: built in {time.monotonic() - started:.0f} s")
    return rootfs, layer


def gather_wheels(paths: Paths, spec: ImageSpec, work: Path) -> Path:
    """A directory with ArkGPU's wheel (built now), the pinned wheels and pip's."""
    wheels = work / "wheels"
    wheels.mkdir()
    # The wheel's zip entries carry SOURCE_DATE_EPOCH, not the checkout's times:
    # pip records the wheel's hash in the image (direct_url.json).
    env = {**os.environ, "CFLAGS": WHEEL_CFLAGS, "SOURCE_DATE_EPOCH": str(spec.epoch)}
    source = clean_copy(paths.repo, work / "source")
    run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels),
         str(source)], env=env)  # fmt: skip
    download = paths.cache / "wheels"
    download.mkdir(parents=True, exist_ok=True)
    wanted = {*spec.requirements, spec.installer}
    missing = wanted - {_pin(wheel) for wheel in download.glob("*.whl")}
    if missing:  # a warm build needs no index
        run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
             "-d", str(download), *sorted(missing)])  # fmt: skip
    for wheel in download.glob("*.whl"):
        if _pin(wheel) in wanted:
            os.link(wheel, wheels / wheel.name)
    return wheels


def clone_files(repo: Path) -> list[str]:
    """The files a clone of ``repo`` holds: tracked, and new files git does not ignore."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=repo, capture_output=True, check=True,
    )  # fmt: skip
    return [n for n in filter(None, listed.stdout.decode().split("\0")) if (repo / n).is_file()]


def clean_copy(repo: Path, dest: Path) -> Path:
    """The files of a clone of ``repo`` (:func:`clone_files`) copied to ``dest``: the
    wheel is built from them alone, never from an earlier build's leftovers (setuptools'
    build/ keeps files deleted since)."""
    for name in clone_files(repo):
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(repo / name, dest / name)
    return dest


def archive_key(repo: Path, spec: ImageSpec) -> str:
    """Names a built archive in the cache: a hash of the Debian base's key and of every
    file of the clone (names and contents), which hold the wheel's sources, the pinned
    requirements and the image's specification. The build is reproducible (two builds
    give the same bytes), so an archive of the same key is the archive a build would
    write, on this machine's toolchain."""
    digest = hashlib.sha256(base_key(repo, spec).encode())
    for name in clone_files(repo):
        digest.update(name.encode() + b"\0" + (repo / name).read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def _pin(wheel: Path) -> str:
    """``name==version`` of a wheel file (names normalised as in requirements.txt)."""
    name, version = wheel.name.split("-")[:2]
    return f"{name.lower().replace('_', '-')}=={version}"


#: Run by ``unshare --mount`` (mounts vanish with the namespace): the base
#: read-only, an empty /usr/local and /tmp writable, then install-python.sh.
INSTALL_IN_CHROOT = """
set -eu
root=$1 local=$2 wheels=$3 spec=$4
mount --make-rprivate /
mount --bind "$root" "$root"
mount -o remount,bind,ro "$root"
mount --bind "$local" "$root/usr/local"
mount -t tmpfs -o mode=1777 tmpfs "$root/tmp"
mkdir "$root/tmp/wheels" "$root/tmp/spec"
mount --bind -o ro "$wheels" "$root/tmp/wheels"
mount --bind -o ro "$spec" "$root/tmp/spec"
exec chroot "$root" /bin/sh /tmp/spec/install-python.sh /tmp/wheels /tmp/spec/requirements.txt
"""


def build_python_layer(paths: Paths, spec: ImageSpec, rootfs: Path, work: Path) -> Layer:
    """Install the wheels into a copy of the base's /usr/local; its layer."""
    wheels = gather_wheels(paths, spec, work)
    local = work / "usr-local"
    shutil.copytree(rootfs / "usr" / "local", local, symlinks=True)
    spec_dir = paths.repo / SPEC_DIR
    run(["unshare", "--mount", "--fork", "sh", "-c", INSTALL_IN_CHROOT, "install",
         str(rootfs), str(local), str(wheels), str(spec_dir)])  # fmt: skip
    wheel = next(wheels.glob("arkgpu-*.whl")).name
    comment = f"install-python.sh: {wheel} + requirements.txt"
    return write_layer(local, work / "blobs", spec.epoch, comment, prefix="usr/local/")


def build(paths: Paths, spec: ImageSpec) -> Path:
    """Build the image archive (or copy the cached one of the same sources); its path."""
    if os.geteuid() != 0:
        raise PermissionError("make image needs root (mmdebstrap, chroot and bind mounts)")
    started = time.monotonic()
    cached = paths.cache / "archives" / f"{archive_key(paths.repo, spec)}.tar"
    paths.out.parent.mkdir(parents=True, exist_ok=True)
    if cached.exists():
        shutil.copyfile(cached, paths.out)
        log(f"{spec.name}: the archive of these sources, cached in {cached}")
        return paths.out
    rootfs, base = build_base(paths, spec)
    _remove_stale_work(paths.cache)
    work = paths.cache / f"work-{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    try:
        python = build_python_layer(paths, spec, rootfs, work)
        shutil.copy2(paths.cache / "blobs" / base.digest.removeprefix("sha256:"), work / "blobs")
        write_archive(paths.out, work / "blobs", spec.name, spec.config, [base, python], spec.epoch)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    keep_archive(paths.out, cached)
    size = paths.out.stat().st_size / 2**20
    log(f"{spec.name}: {size:.1f} MiB in {time.monotonic() - started:.0f} s")
    return paths.out


#: Built archives the cache keeps (each about 150 MiB), the newest first.
KEPT_ARCHIVES = 2


def keep_archive(archive: Path, cached: Path) -> None:
    """Copy ``archive`` into the cache as ``cached`` (whole or not at all) and drop all
    but the newest :data:`KEPT_ARCHIVES`."""
    cached.parent.mkdir(parents=True, exist_ok=True)
    partial = cached.with_name(f".{cached.name}.{os.getpid()}")
    shutil.copyfile(archive, partial)
    partial.replace(cached)
    kept = sorted(cached.parent.glob("*.tar"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in kept[KEPT_ARCHIVES:]:
        old.unlink(missing_ok=True)


def _remove_stale_work(cache: Path) -> None:
    """Remove the work folders of builds that were killed (their process is gone)."""
    for folder in cache.glob("work-*"):
        pid = folder.name.removeprefix("work-")
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(folder, ignore_errors=True)


#: The CUDA program's source, relative to the repository.
CUDA_PROGRAM = SPEC_DIR / "cuda-program" / "cuda_program.c"


def build_cuda_image(paths: Paths, spec: ImageSpec) -> Path:
    """The plain image of the CUDA program: the Debian base and one layer with
    /usr/local/bin/cuda-program, compiled here without a CUDA toolkit."""
    if os.geteuid() != 0:
        raise PermissionError("make cuda-image needs root (mmdebstrap for the Debian base)")
    _, base = build_base(paths, spec)
    work = paths.cache / f"work-{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    (work / "layer" / "usr" / "local" / "bin").mkdir(parents=True)
    try:
        program = work / "layer" / "usr" / "local" / "bin" / "cuda-program"
        run(["gcc", "-O2", "-Wall", "-Wextra", "-Werror", "-std=gnu11", "-o", str(program),
             str(paths.repo / CUDA_PROGRAM), "-ldl"])  # fmt: skip
        program.chmod(0o755)
        layer = write_layer(work / "layer", work / "blobs", spec.epoch, f"gcc -O2 {CUDA_PROGRAM}")
        shutil.copy2(paths.cache / "blobs" / base.digest.removeprefix("sha256:"), work / "blobs")
        paths.out.parent.mkdir(parents=True, exist_ok=True)
        name = f"{spec.cuda_repository}:{spec.tag}"
        write_archive(paths.out, work / "blobs", name, spec.cuda_config, [base, layer], spec.epoch)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return paths.out
