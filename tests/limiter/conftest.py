"""Fixtures: containers on the fake GPU, each a set of real processes that load
the fake driver through the interception library (built by `make native`).

With ARKGPU_LIMITER_BUILD=asan (or tsan) the tests load that sanitizer build
instead (:mod:`arkgpu.limiter.builds`); every sanitizer report is written to
a log directory, and a test after which one appeared fails with its text."""

from __future__ import annotations

import os
import select
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from arkgpu.limiter import Limits, builds, native
from arkgpu.limiter.containers import FakeContainer, container_user, make_world_readable

MiB = 1 << 20


class Probe:
    """A running ``arkgpu-cubench script`` process: one command, one reply line."""

    def __init__(self, container: FakeContainer, extra_env: dict[str, str] | None = None) -> None:
        self.proc = container.popen([str(native.cubench()), "script"], extra_env)
        self._pending = b""

    def send(self, line: str) -> None:
        """Send a command without waiting for its reply."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def reply(self, timeout: float = 10.0) -> str:
        """The next reply line; fails the test when none comes within ``timeout`` s.

        Lines are split here from raw reads of the pipe: a buffered readline
        could take two lines at once (a forked child's beside its parent's),
        and select would then wait in vain for the second."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        while b"\n" not in self._pending:
            ready, _, _ = select.select([fd], [], [], max(deadline - time.monotonic(), 0.0))
            assert ready, f"no reply within {timeout} s"
            chunk = os.read(fd, 4096)
            assert chunk, "the probe closed its output"
            self._pending += chunk
        line, _, self._pending = self._pending.partition(b"\n")
        return line.decode().strip()

    def ask(self, line: str, timeout: float = 10.0) -> str:
        """Send a command and return its reply."""
        self.send(line)
        return self.reply(timeout)

    def close(self) -> str:
        """Quit the process and return what it wrote to stderr."""
        if self.proc.poll() is None:
            self.send("quit")
        _, err = self.proc.communicate(timeout=10)
        return err


@pytest.fixture(scope="session", autouse=True)
def native_build() -> Iterator[Path]:
    """The build the tests load: the plain one, or the sanitizer build that
    ARKGPU_LIMITER_BUILD names. When container processes run as another user
    (nobody, when tests run as root) they load a copy of it in a directory
    every user can traverse: the checkout or the virtual environment may not
    be (a clone under root's home directory, mode 0700)."""
    directory = builds.variant_dir(builds.variant())
    assert (directory / "libarkgpu_limiter.so").exists(), f"{directory}: not built"
    tmp = Path(tempfile.mkdtemp(prefix="arkgpu-native-"))
    with pytest.MonkeyPatch.context() as patch:
        if container_user() is not None:
            make_world_readable(tmp)
            directory = _stage(directory, tmp / "build")
        patch.setenv(native.NATIVE_DIR_ENV, str(directory))
        # The fake driver's context reserve is 0 here: these tests count requested
        # bytes against caps of a few MiB; test_reserve.py sets it per container.
        patch.setenv("FAKEGPU_CTX_RESERVE_MIB", "0")
        yield directory
    shutil.rmtree(tmp, ignore_errors=True)


def _stage(source: Path, dest: Path) -> Path:
    """A copy of the build in ``source`` (its sanitizer runtime note too) at ``dest``."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(native.NATIVE_DIR_ENV, str(source))
        native.stage(dest)
    first = source / builds.PRELOAD_FIRST
    if first.exists():
        shutil.copyfile(first, dest / builds.PRELOAD_FIRST)
        (dest / builds.PRELOAD_FIRST).chmod(0o644)
    return dest


@pytest.fixture(scope="session")
def sanitizer_logs(native_build: Path) -> Iterator[Path | None]:
    """Under a sanitizer build: a directory its reports are logged to (None
    under the plain build)."""
    if builds.variant() == "plain":
        yield None
        return
    patch = pytest.MonkeyPatch()
    logs = Path(tempfile.mkdtemp(prefix="arkgpu-sanitizer-"))
    logs.chmod(0o1777)  # the container processes (nobody) write here
    common = f"log_path={logs}/report:halt_on_error=1"
    patch.setenv("ASAN_OPTIONS", f"{common}:detect_leaks=0:verify_asan_link_order=1")
    patch.setenv("UBSAN_OPTIONS", f"{common}:print_stacktrace=1")
    # die_after_fork=0: a forked child starts its own reaper thread, which TSan
    # refuses by default after a fork of a multi-threaded process.
    patch.setenv("TSAN_OPTIONS", f"{common}:report_signal_unsafe=0:die_after_fork=0")
    yield logs
    patch.undo()
    shutil.rmtree(logs, ignore_errors=True)


@pytest.fixture(autouse=True)
def no_sanitizer_report(sanitizer_logs: Path | None) -> Iterator[None]:
    """Fail the test when a sanitizer wrote a report during it."""
    yield
    if sanitizer_logs is None:
        return
    reports = sorted(sanitizer_logs.iterdir())
    text = "\n".join(r.read_text(errors="replace")[:4000] for r in reports)
    for r in reports:
        r.unlink()
    assert not reports, f"sanitizer report(s):\n{text}"


@pytest.fixture
def workdir() -> Iterator[Path]:
    """A directory the container user (nobody, when tests run as root) can reach."""
    path = Path(tempfile.mkdtemp(prefix="arkgpu-limiter-"))
    make_world_readable(path)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def make_container(workdir: Path) -> Callable[..., FakeContainer]:
    """Factory: a new container with its own region on this test's fake GPU."""
    count = iter(range(1000))

    def make(limits: Limits) -> FakeContainer:
        return FakeContainer.create(workdir / f"c{next(count)}", workdir / "fakegpu", limits)

    return make


@pytest.fixture
def probes() -> Iterator[Callable[..., Probe]]:
    """Factory of probe processes, all stopped at the end of the test."""
    started: list[Probe] = []

    def start(container: FakeContainer, extra_env: dict[str, str] | None = None) -> Probe:
        probe = Probe(container, extra_env)
        started.append(probe)
        return probe

    yield start
    for probe in started:
        if probe.proc.poll() is None:
            probe.proc.kill()
        probe.proc.communicate(timeout=10)
