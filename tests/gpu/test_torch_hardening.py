"""Issue 22 on a real GPU (run by tests/gpu/run.sh): the hardened limiter
under PyTorch with many data-loader workers, threads and CUDA streams, under
CUDA graph capture and replay, and NVML's view of a capped process's memory
beside the cap and the library's own count.

Every test writes its raw figures to ``$ARKGPU_GPU_OUT/<test>.json`` (when
set) before it asserts, so a failed run still leaves them behind.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from arkgpu.limiter import Limits, read_usage
from arkgpu.limiter.containers import FakeContainer, container_user, make_world_readable

from .torchchild import child_env, child_python, last_line

GiB = 1 << 30
CHILD = Path(__file__).with_name("hardchild.py")


@pytest.fixture
def workdir() -> Iterator[Path]:
    """A directory the child user can reach."""
    path = Path(tempfile.mkdtemp(prefix="arkgpu-gpu-hard-"))
    make_world_readable(path)
    yield path
    subprocess.run(["rm", "-rf", str(path)], check=False)


def record(name: str, figures: dict[str, Any]) -> None:
    """Write ``figures`` to $ARKGPU_GPU_OUT/<name>.json (and stdout)."""
    print(name, json.dumps(figures))
    out = os.environ.get("ARKGPU_GPU_OUT")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / f"{name}.json").write_text(json.dumps(figures, indent=1) + "\n")


def run_hard(box: FakeContainer, *args: str, timeout: float = 120) -> dict[str, Any]:
    """Run hardchild.py in ``box`` with the limiter; its JSON result and stderr tail."""
    proc = subprocess.run(
        [child_python()[0], str(CHILD), *args],
        capture_output=True,
        text=True,
        env=child_env(box),
        user=container_user(),
        timeout=timeout,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = last_line(proc.stdout)
    if "skipped" in result:
        pytest.fail(f"the child could not use CUDA: {result['skipped']}")
    result["stderr_tail"] = proc.stderr[-1500:]
    return result


def degraded(box: FakeContainer) -> dict[str, int]:
    """The library's degraded-path counters after the run."""
    return dict(read_usage(box.region).degraded)


def test_data_loader_workers_threads_and_streams_are_paced_without_hanging(
    workdir: Path,
) -> None:
    """A DataLoader with 8 workers and pinned memory feeding 16 streams, beside
    8 threads each on its own stream, at a 30% share: the run finishes, no
    thread is left behind, and the matmul rate is 30% of the full-share rate
    within 10 points; the degraded paths taken are reported."""
    args = ("loader", "12", "16", "8")
    full_box = FakeContainer.create(workdir / "full", workdir / "unused", Limits((None,)))
    box = FakeContainer.create(workdir / "s30", workdir / "unused", Limits((None,), 3_000))
    full = run_hard(full_box, *args)
    limited = run_hard(box, *args)
    ratio = limited["mm_per_s"] / full["mm_per_s"] if full["mm_per_s"] else 0.0
    figures: dict[str, Any] = {
        "full": full,
        "share30": limited,
        "ratio": ratio,
        "degraded": degraded(box),
    }
    record("loader_streams", figures)
    assert limited["threads_alive"] == 0
    assert figures["degraded"]["lock_errors"] == 0
    assert abs(ratio - 0.30) < 0.10, figures


def test_a_cuda_graph_captured_and_replayed_under_the_limiter(workdir: Path) -> None:
    """A graph captured under a 30% share (capture is not paced) replays
    correctly, and its replays are paced to 30% of the full-share rate
    within 10 points."""
    full_box = FakeContainer.create(workdir / "full", workdir / "unused", Limits((None,)))
    box = FakeContainer.create(workdir / "s30", workdir / "unused", Limits((None,), 3_000))
    full = run_hard(full_box, "graph", "8")
    limited = run_hard(box, "graph", "8")
    ratio = limited["replays_per_s"] / full["replays_per_s"] if full["replays_per_s"] else 0.0
    figures = {"full": full, "share30": limited, "ratio": ratio, "degraded": degraded(box)}
    record("cuda_graph", figures)
    assert full["correct"]
    assert limited["correct"]
    assert abs(ratio - 0.30) < 0.10, figures


def nvml_process_memory(pid: int) -> dict[str, Any]:
    """NVML's used memory of ``pid`` on every GPU, with all compute processes seen."""
    import pynvml  # type: ignore[import-untyped]  # noqa: PLC0415 (nvidia-ml-py exists only on GPU machines)

    pynvml.nvmlInit()
    try:
        seen = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handle):
                seen.append({"gpu": i, "pid": p.pid, "used": p.usedGpuMemory})
    finally:
        pynvml.nvmlShutdown()
    mine = [s for s in seen if s["pid"] == pid]
    if not mine and len(seen) == 1:  # another pid namespace: the only process is ours
        mine = seen
    return {"seen": seen, "mine": mine}


def start_memory_child(
    box: FakeContainer, nbytes: int
) -> tuple[subprocess.Popen[str], dict[str, Any]]:
    """hardchild.py memory NBYTES in ``box``: the process and its first report."""
    proc = subprocess.Popen(
        [child_python()[0], str(CHILD), "memory", str(nbytes)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=child_env(box),
        user=container_user(),
    )
    assert proc.stdout is not None
    first = proc.stdout.readline()
    if not first.strip():
        _, err = proc.communicate(timeout=60)
        pytest.fail(f"the memory child printed nothing (exit {proc.returncode}): {err[-3000:]}")
    child: dict[str, Any] = json.loads(first)
    if "skipped" in child:
        proc.communicate(timeout=30)
        pytest.fail(f"the child could not use CUDA: {child['skipped']}")
    return proc, child


def ask(proc: subprocess.Popen[str], line: str) -> dict[str, Any]:
    """Send one line to the memory child and read its JSON answer."""
    assert proc.stdin is not None
    assert proc.stdout is not None
    proc.stdin.write(line + "\n")
    proc.stdin.flush()
    answer: dict[str, Any] = json.loads(proc.stdout.readline())
    return answer


def test_nvml_per_process_memory_against_the_cap_and_the_library_count(workdir: Path) -> None:
    """A process allocating 1 GiB under a 4 GiB cap, the driver reserve inside
    the cap (docs/LIMITER.md, Driver reserve): the library counts at least what
    torch reserved and measures the reserve (context, modules, the driver's
    slack) as NVML's per-process figure minus its count (within 64 MiB, after
    a refresh period); NVML's figure for the whole process stays within the
    cap; an allocation that would fit the cap without the reserve is refused
    (torch.cuda.OutOfMemoryError). The measured reserve per process goes into
    nvml_memory.json."""
    cap = 4 * GiB
    box = FakeContainer.create(
        workdir / "c", workdir / "unused", Limits((cap,), reserve_period_ms=200)
    )
    proc, child = start_memory_child(box, GiB)
    try:
        time.sleep(1.5)  # a few refresh periods: modules loaded by the first kernels counted
        nvml = nvml_process_memory(child["pid"])
        usage = read_usage(box.region)
        counted, reserved = usage.used_bytes[0], usage.reserved_bytes[0]
        between = max(cap - counted - reserved // 2, 1)  # fits without the reserve only
        attempt = ask(proc, f"try {between}")
        after = nvml_process_memory(child["pid"])
    finally:
        _, err = proc.communicate("done\n", timeout=60)
    used = nvml["mine"][0]["used"] if nvml["mine"] else None
    peak = after["mine"][0]["used"] if after["mine"] else None
    figures = {
        "cap": cap,
        "library_count": counted,
        "library_reserved": reserved,
        "reserve_per_process": {p.pid: p.reserve_bytes[0] for p in usage.processes},
        "degraded": dict(usage.degraded),
        "child": child,
        "nvml": nvml,
        "nvml_process_used": used,
        "not_counted": None if used is None else used - counted,
        "reserve_error": None if used is None else used - counted - reserved,
        "try_between": attempt,
        "nvml_after_try": after,
        "stderr_tail": err[-1500:],
        "python": sys.version,
    }
    record("nvml_memory", figures)
    assert child["cuda_total"] == cap
    assert child["torch_reserved"] <= counted <= cap
    assert used is not None, f"NVML shows no memory for the child: {nvml}"
    assert used >= counted
    assert usage.degraded["reserve_unlisted"] == usage.degraded["reserve_no_nvml"] == 0
    assert reserved > 0, "no driver reserve measured"
    assert abs(used - counted - reserved) <= 64 << 20, figures
    assert used <= cap, "NVML shows the process past its cap"
    assert counted + reserved <= cap
    assert not attempt["ok"], "an allocation past the cap with the reserve counted went through"
    assert peak is None or peak <= cap
