"""Backends: what runs one model's batches on the GPU, inside a container of the limiter.

A backend starts one *worker* per model, a process that loads the GPU driver
through the project's interception library (``LD_PRELOAD``) with its own
control region, so the compute share the runner writes into the region's
limits is the share its kernels get. The runner never talks to a model
otherwise: every backend goes through the same plan, runner, limiter, writer
and resume.

- :class:`FakeBackend`: a "model" is a kernel of ``base_us + per_us * batch``
  µs of device time on the fake GPU (the fake libcuda), launched by an
  ``arkgpu-cubench script`` process one batch at a time, as ``arkgpu workload
  lc`` does; co-running workers queue on the fake device's timeline.
- :class:`arkgpu.profiling.torch_backend.TorchBackend`: a torchvision model or
  a TorchScript file in a PyTorch process (imported there only).
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from arkgpu.limiter import native
from arkgpu.limiter.containers import FakeContainer
from arkgpu.profiling.looping import Window, measure


class Worker(Protocol):
    """One model's process on the GPU."""

    def run(self, batch: int, window: Window) -> tuple[list[float], float]:
        """Warm up and measure batches of ``batch``: (latencies in ms, window start)."""
        ...

    def close(self) -> None:
        """Stop the process."""
        ...


class Backend(Protocol):
    """Starts workers; names the NVML library that sees their GPU."""

    name: str
    """``torch`` or ``fake``."""
    startup_s: float
    """Expected time to start one worker, s (the plan estimate's ``startup_s``)."""
    fake_state: Path | None
    """The fake GPU's state file, or None on a real GPU."""

    def nvml_library(self) -> str:
        """The NVML library to load in the runner's process."""
        ...

    def check_model(self, model: str) -> None:
        """ValueError in one line when ``model`` is not something this backend runs."""
        ...

    def profile_name(self, model: str) -> str:
        """The profile's ``model`` column for the plan's ``model``."""
        ...

    def start(self, model: str, container: FakeContainer, log: Path) -> Worker:
        """Start ``model``'s worker in ``container`` (its region and user); its
        standard error goes to ``log``."""
        ...


@dataclass(frozen=True, slots=True)
class FakeModel:
    """A fake-driver "model": one kernel per batch."""

    base_us: float
    """Device time of a batch, fixed part, µs on the whole GPU."""
    per_us: float
    """Device time per request of the batch, µs on the whole GPU."""

    def kernel_us(self, batch: int) -> int:
        """Device time of a batch of ``batch`` requests, µs (at least 1)."""
        return max(1, round(self.base_us + self.per_us * batch))


FAKE_MODELS: dict[str, FakeModel] = {
    "fake-tiny": FakeModel(150.0, 15.0),
    "fake-small": FakeModel(300.0, 40.0),
    "fake-mid": FakeModel(600.0, 100.0),
    "fake-large": FakeModel(1200.0, 250.0),
}
"""Built-in fake models, by name (a plan may also name ``NAME:BASE_US:PER_US``)."""

_SPEC = re.compile(r"([A-Za-z0-9._-]+):([0-9.]+):([0-9.]+)")


def fake_model(name: str) -> FakeModel:
    """The fake model ``name``: a built-in one or ``NAME:BASE_US:PER_US``."""
    if name in FAKE_MODELS:
        return FAKE_MODELS[name]
    match = _SPEC.fullmatch(name)
    if match:
        base, per = float(match[2]), float(match[3])
        if base + per > 0 and base <= 1e6 and per <= 1e6:
            return FakeModel(base, per)
    known = ", ".join(FAKE_MODELS)
    raise ValueError(f"unknown fake model {name!r} (known: {known}, or NAME:BASE_US:PER_US)")


def last_line(path: Path) -> str:
    """The last non-empty line of text file ``path`` ("" when none or unreadable)."""
    try:
        lines = [line.strip() for line in path.read_text(errors="replace").splitlines()]
    except OSError:
        return ""
    return next((line for line in reversed(lines) if line), "")


class FakeWorker:
    """An ``arkgpu-cubench script`` process on the fake driver, one kernel per batch."""

    def __init__(self, model: FakeModel, container: FakeContainer, log: Path) -> None:
        self.model = model
        self.log = log
        with log.open("w") as err:
            self.proc = subprocess.Popen(
                [str(native.cubench()), "script"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
                env=container.env(),
                user=container.user,
            )

    def _batch(self, kernel_us: int) -> None:
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        self.proc.stdin.write(f"async {kernel_us}\n")
        self.proc.stdin.flush()
        reply = self.proc.stdout.readline()
        if not reply:
            raise OSError(f"arkgpu-cubench ended: {last_line(self.log) or 'no reply'}")

    def run(self, batch: int, window: Window) -> tuple[list[float], float]:
        """One kernel of the model's duration at ``batch`` per step."""
        kernel = self.model.kernel_us(batch)
        return measure(lambda: self._batch(kernel), window)

    def close(self) -> None:
        """Quit the process."""
        if self.proc.poll() is None and self.proc.stdin is not None:
            self.proc.stdin.write("quit\n")
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


class FakeBackend:
    """Fake-driver models (module docstring); the fake GPU's state file is ``fake_state``."""

    name = "fake"
    startup_s = 0.2

    def __init__(self, fake_state: Path) -> None:
        self.fake_state = fake_state

    def nvml_library(self) -> str:
        """The fake NVML, by path."""
        return str(native.fake_driver_dir() / "libnvidia-ml.so.1")

    def check_model(self, model: str) -> None:
        """ValueError unless ``model`` is a fake model."""
        fake_model(model)

    def profile_name(self, model: str) -> str:
        """The name before ``:`` (``NAME:BASE_US:PER_US``)."""
        return model.split(":", 1)[0]

    def start(self, model: str, container: FakeContainer, log: Path) -> Worker:
        """Start the model's cubench process."""
        return FakeWorker(fake_model(model), container, log)
