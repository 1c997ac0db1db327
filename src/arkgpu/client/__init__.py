"""The LC client: an inference server reports each request's or batch's
latency into its container's region, for the node runtime to read
(:func:`arkgpu.limiter.read_latencies`), and marks its batches in flight, so
that best-effort containers on its GPU borrow its compute share only while it
has none (idle-share lending, docs/LIMITER.md).

Both channels are lock-free and multi-producer; the writers are the C
functions ``arkgpu_client_report`` and ``arkgpu_client_batch_begin``/``_end``
in ``libarkgpu_client.so`` (header ``arkgpu_client.h``), which servers in C or
C++ call directly.
"""

from __future__ import annotations

import ctypes
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
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
        for name in ("batch_begin", "batch_end", "batches_in_flight"):
            fn = getattr(lib, f"arkgpu_client_{name}")
            fn.restype = ctypes.c_uint64
            fn.argtypes = [ctypes.c_void_p]
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

    def _open_handle(self) -> int:
        if self._handle is None:
            raise ValueError("the reporter is closed")
        return self._handle

    def report_ns(self, latency_ns: int, batch: int = 1) -> int:
        """Report one latency in ns for a batch of ``batch`` requests; returns its seq number."""
        handle = self._open_handle()
        if latency_ns < 0 or batch < 0:
            raise ValueError(f"latency and batch must be non-negative, got {latency_ns}, {batch}")
        return int(self._lib.arkgpu_client_report(handle, latency_ns, batch))

    def report(self, latency_s: float, batch: int = 1) -> int:
        """Report one latency in seconds."""
        return self.report_ns(round(latency_s * 1e9), batch)

    def batch_begin(self) -> int:
        """A batch starts executing on the GPU; returns the batches now in flight."""
        return int(self._lib.arkgpu_client_batch_begin(self._open_handle()))

    def batch_end(self) -> int:
        """A batch has finished; returns the batches still in flight (never below 0)."""
        return int(self._lib.arkgpu_client_batch_end(self._open_handle()))

    def batches_in_flight(self) -> int:
        """Batches of this container begun and not yet ended."""
        return int(self._lib.arkgpu_client_batches_in_flight(self._open_handle()))

    @contextmanager
    def batch(self, size: int = 1) -> Iterator[None]:
        """Mark a batch of ``size`` requests in flight for the ``with`` body; on
        a normal exit report its measured latency (a failed batch's is not)."""
        if size < 0:
            raise ValueError(f"size must be non-negative, got {size}")
        self.batch_begin()
        start = time.monotonic_ns()
        try:
            yield
        finally:
            elapsed_ns = time.monotonic_ns() - start
            self.batch_end()
        self.report_ns(elapsed_ns, size)

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
