"""Child processes running PyTorch on the real driver, for tests/gpu.

Each child runs with the interception library in LD_PRELOAD (unless asked
not to) and its container's region; it must not be able to write the limits
file, so when we are root it runs as nobody (the Python interpreter and this
checkout must then be readable by nobody), else the limits file is read-only
for its owner.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from arkgpu.limiter import native
from arkgpu.limiter.containers import FakeContainer, container_user

CHILD = r"""
import ctypes, json, statistics, sys, time, torch
mode = sys.argv[1]
if mode == "oom":
    cap = int(sys.argv[2])
    a = torch.empty(int(cap * 0.6), dtype=torch.uint8, device="cuda")
    try:
        b = torch.empty(int(cap * 0.6), dtype=torch.uint8, device="cuda")
        print(json.dumps({"second": "ok"}))
    except torch.cuda.OutOfMemoryError:
        print(json.dumps({"second": "oom"}))
elif mode == "info":
    free, total = torch.cuda.mem_get_info()
    class Memory(ctypes.Structure):
        _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong),
                    ("used", ctypes.c_ulonglong)]
    nvml = ctypes.CDLL("libnvidia-ml.so.1")
    handle, memory = ctypes.c_void_p(), Memory()
    codes = [nvml.nvmlInit_v2(),
             nvml.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(handle)),
             nvml.nvmlDeviceGetMemoryInfo(handle, ctypes.byref(memory))]
    print(json.dumps({"cuda_free": free, "cuda_total": total, "nvml_codes": codes,
                      "nvml_free": memory.free, "nvml_total": memory.total}))
elif mode == "launch":
    launches = int(sys.argv[2])
    x = torch.zeros(1, device="cuda")
    for _ in range(1000):
        x.add_(1)
    torch.cuda.synchronize()
    runs = []
    for _ in range(7):
        t0 = time.perf_counter_ns()
        for _ in range(launches):
            x.add_(1)
        torch.cuda.synchronize()
        runs.append((time.perf_counter_ns() - t0) / launches)
    print(json.dumps({"ns_per_launch": statistics.median(runs), "runs": runs}))
else:
    seconds = float(sys.argv[2])
    x = torch.randn(2048, 2048, device="cuda")
    torch.cuda.synchronize()
    print(json.dumps({"started": True}), flush=True)
    stamps = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for _ in range(4):
            x = torch.mm(x, x).clamp_(-1, 1)
        torch.cuda.synchronize()
        stamps.append(time.monotonic_ns())
    print(json.dumps({"stamps": stamps}))
"""


def child_python() -> tuple[str, dict[str, str]]:
    """An interpreter the child user can run, and the environment to find torch.

    When we are root the child runs as nobody, who may not reach our
    interpreter (e.g. under /root); then the system python3 gets our sys.path.
    """
    try:
        subprocess.run([sys.executable, "-c", "pass"], user=container_user(), check=True)
    except (PermissionError, subprocess.CalledProcessError):
        return "/usr/bin/python3", {"PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    return sys.executable, {}


def child_env(box: FakeContainer, preload: bool = True) -> dict[str, str]:
    """The child's environment: the region, torch findable, the limiter preloaded
    unless ``preload`` is False (the overhead baseline)."""
    env = dict(os.environ, **child_python()[1])
    env.pop("LD_PRELOAD", None)
    if preload:
        env["LD_PRELOAD"] = str(native.limiter_library())
    env["ARKGPU_REGION_DIR"] = str(box.region)
    return env


def child_command(*args: str) -> list[str]:
    """The command line of a child in mode ``args[0]``."""
    return [child_python()[0], "-c", CHILD, *args]


def last_line(output: str) -> dict[str, Any]:
    """A child's result: its last line of output, parsed."""
    return json.loads(output.strip().splitlines()[-1])  # type: ignore[no-any-return]


def start_child(box: FakeContainer, *args: str) -> subprocess.Popen[str]:
    """Start a child with the limiter preloaded, its output piped; the caller waits."""
    return subprocess.Popen(
        child_command(*args),
        stdout=subprocess.PIPE,
        text=True,
        env=child_env(box),
        user=container_user(),
    )


def run_child(box: FakeContainer, *args: str, preload: bool = True) -> dict[str, Any]:
    """Run the child on the real driver and return its result."""
    out = subprocess.run(
        child_command(*args),
        capture_output=True,
        text=True,
        env=child_env(box, preload),
        user=container_user(),
        timeout=300,
        check=True,
    )
    return last_line(out.stdout)


def rate_over(stamps: list[int]) -> float:
    """Iterations per second between the first and last of these stamps (ns)."""
    return (len(stamps) - 1) / ((stamps[-1] - stamps[0]) / 1e9)


def rate_of(stamps: list[int]) -> float:
    """Iterations per second over the second half of a rate child's stamps."""
    return rate_over(stamps[len(stamps) // 2 :])


def throughput(box: FakeContainer, seconds: float = 4.0, preload: bool = True) -> float:
    """Matmul iterations per second over the run's second half."""
    stamps = run_child(box, "rate", str(seconds), preload=preload)["stamps"]
    assert isinstance(stamps, list)
    return rate_of(stamps)


def unused(workdir: Path) -> Path:
    """The fake-GPU state path FakeContainer wants; the real driver never reads it."""
    return workdir / "unused"
