"""What the profiler reads from NVML: the GPU's name and driver, and its utilisation.

Through ctypes on ``libnvidia-ml.so.1`` (the real one, or the fake driver's by
path), so the fake backend needs no loader path set before the process starts.

What NVML gives and what the profile's columns take:

- ``nvmlDeviceGetUtilizationRates().gpu``: % of time a kernel ran (recorded
  with each point, ``gpu_util_pct``; not a profile column);
- ``.memory``: % of time device memory was read or written, the nearest NVML
  figure to DRAM bandwidth use: it becomes ``dram_util_pct`` when above 0
  (a time fraction, so an upper bound of the bandwidth fraction); empty when 0
  or unavailable (the fake NVML always says 0);
- L2 cache utilisation: NVML has none (it needs profiling counters: CUPTI,
  Nsight Compute or DCGM's profiling module), so ``l2_util_pct`` stays empty and
  the predictor's level 2 uses its activity features for these GPUs.
"""

from __future__ import annotations

import ctypes
import re
import threading
import time
from dataclasses import dataclass

SAMPLE_PERIOD_S = 0.1
"""Utilisation sampling period, s: NVML averages over 1/6 s to 1 s on real GPUs;
the fake NVML needs >= 10 ms between samples."""


class _Utilization(ctypes.Structure):
    _fields_ = [("gpu", ctypes.c_uint), ("memory", ctypes.c_uint)]


@dataclass(frozen=True, slots=True)
class GpuIdentity:
    """The GPU a profile was measured on."""

    nvml_name: str
    """Product name as NVML gives it (``NVIDIA H200``)."""
    driver: str
    """Driver version (``nvmlSystemGetDriverVersion``)."""
    gpu: str
    """Name in the profile's ``gpu`` column (:func:`profile_gpu_name`)."""


def profile_gpu_name(nvml_name: str) -> str:
    """The ``gpu`` column for an NVML product name: the catalogue's name
    (:mod:`arkgpu.model.gpus`) when the product is one of its models, else the
    product name without ``NVIDIA``/``Tesla`` and with other characters than
    letters, digits and ``-`` made ``-``."""
    text = re.sub(r"^(NVIDIA|Tesla)\s+", "", nvml_name.strip(), flags=re.IGNORECASE)
    upper = text.upper()
    for marker, name in (("H200", "H200"), ("H100", "H100"), ("A10G", "A10G")):
        if marker in upper:
            return name
    if "A100" in upper:
        return "A100-80GB" if "80GB" in upper else "A100-40GB"
    if "V100" in upper:
        return "V100M16" if "16GB" in upper else "V100"
    for name in ("A10", "T4", "P100"):
        if re.fullmatch(rf"{name}\b.*", upper):
            return name
    return re.sub(r"[^A-Za-z0-9-]+", "-", text).strip("-") or "unknown"


class Nvml:
    """One GPU seen through NVML; :meth:`close` shuts NVML down."""

    def __init__(self, library: str, index: int) -> None:
        """Load ``library`` and initialise NVML; OSError in one line when it cannot."""
        try:
            self.lib = ctypes.CDLL(library)
        except OSError:
            raise OSError(f"NVML: cannot load {library}: no NVIDIA driver here?") from None
        self._check(self.lib.nvmlInit_v2(), "nvmlInit_v2")
        self.handle = ctypes.c_void_p()
        code = self.lib.nvmlDeviceGetHandleByIndex_v2(index, ctypes.byref(self.handle))
        self._check(code, f"GPU index {index}")
        self.index = index

    @staticmethod
    def _check(code: int, what: str) -> None:
        if code != 0:
            raise OSError(f"NVML: {what} failed (NVML error {code})")

    def identity(self, override: str | None = None) -> GpuIdentity:
        """Name and driver; ``override`` replaces the profile's GPU name."""
        name = ctypes.create_string_buffer(96)
        self._check(self.lib.nvmlDeviceGetName(self.handle, name, 96), "nvmlDeviceGetName")
        driver = ctypes.create_string_buffer(80)
        self._check(self.lib.nvmlSystemGetDriverVersion(driver, 80), "driver version")
        product = name.value.decode(errors="replace")
        gpu = override or profile_gpu_name(product)
        return GpuIdentity(product, driver.value.decode(errors="replace"), gpu)

    def utilisation(self) -> tuple[int, int] | None:
        """(kernel-time %, memory-time %) now, or None when NVML cannot say."""
        rates = _Utilization()
        if self.lib.nvmlDeviceGetUtilizationRates(self.handle, ctypes.byref(rates)) != 0:
            return None
        return int(rates.gpu), int(rates.memory)

    def close(self) -> None:
        """Shut NVML down."""
        self.lib.nvmlShutdown()


class UtilSampler:
    """Samples a GPU's utilisation in a background thread while a point runs."""

    def __init__(self, nvml: Nvml) -> None:
        self.nvml = nvml
        self.samples: list[tuple[float, int, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.wait(SAMPLE_PERIOD_S):
            value = self.nvml.utilisation()
            if value is not None:
                self.samples.append((time.monotonic(), *value))

    def __enter__(self) -> UtilSampler:
        self.nvml.utilisation()  # starts the sample period of a fake NVML
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def mean_after(self, start: float) -> tuple[float | None, float | None]:
        """Mean (kernel %, memory %) of the samples taken after monotonic time ``start``."""
        kept = [(g, m) for t, g, m in self.samples if t >= start]
        if not kept:
            return None, None
        gpu = sum(g for g, _ in kept) / len(kept)
        memory = sum(m for _, m in kept) / len(kept)
        return gpu, memory
