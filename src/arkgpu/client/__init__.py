"""The LC latency channel: an inference server reports each request's or
batch's latency into its container's region, for the node runtime to read
(:func:`arkgpu.limiter.read_latencies`).

The ring is lock-free and multi-producer; the writer is the C function
``arkgpu_client_report`` in ``libarkgpu_client.so`` (header
``arkgpu_client.h``), which servers in C or C++ call directly.
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path
from types import TracebackType

from arkgpu.limiter import native

DEFAULT_REGION_DIR = Path("/run/arkgpu")


class LatencyReporter:
    """Writes latency samples into a container's usage region."""

    def __init__(self, region_dir: Path | None = None, library: Path | None = None) -> None:
        """Open ``region_dir`` (default: $ARKGPU_REGION_DIR, else /run/arkgpu)."""
        env_dir = os.environ.get("ARKGPU_REGION_DIR")
        self.region_dir = region_dir or (Path(env_dir) if env_dir else DEFAULT_REGION_DIR)
        lib = ctypes.CDLL(str(library or native.client_library()), use_errno=True)
        lib.arkgpu_client_open.restype = ctypes.c_void_p
        lib.arkgpu_client_open.argtypes = [ctypes.c_char_p]
        lib.arkgpu_client_report.restype = ctypes.c_uint64
        lib.arkgpu_client_report.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint64]
        lib.arkgpu_client_close.restype = None
        lib.arkgpu_client_close.argtypes = [ctypes.c_void_p]
        self._lib = lib
        handle = lib.arkgpu_client_open(os.fsencode(self.region_dir))
        if not handle:
            err = ctypes.get_errno()
            raise OSError(
                err, f"{self.region_dir}/usage: cannot open the region ({os.strerror(err)})"
            )
        self._handle: int | None = handle

    def report_ns(self, latency_ns: int, batch: int = 1) -> int:
        """Report one latency in ns for a batch of ``batch`` requests; returns its seq number."""
        if self._handle is None:
            raise ValueError("the reporter is closed")
        if latency_ns < 0 or batch < 0:
            raise ValueError(f"latency and batch must be non-negative, got {latency_ns}, {batch}")
        return int(self._lib.arkgpu_client_report(self._handle, latency_ns, batch))

    def report(self, latency_s: float, batch: int = 1) -> int:
        """Report one latency in seconds."""
        return self.report_ns(round(latency_s * 1e9), batch)

    def close(self) -> None:
        """Unmap the region."""
        if self._handle is not None:
            self._lib.arkgpu_client_close(self._handle)
            self._handle = None

    def __enter__(self) -> LatencyReporter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


__all__ = ["LatencyReporter"]
