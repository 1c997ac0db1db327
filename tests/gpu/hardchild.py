"""A PyTorch child for tests/gpu/test_torch_hardening.py (issue 22), run on
the real driver with the limiter preloaded (or not, for the baseline):

    hardchild.py loader SECONDS STREAMS THREADS
        a DataLoader (8 workers, pinned memory) feeding batches round-robin
        onto STREAMS CUDA streams, beside THREADS threads each launching
        matmuls on its own stream; prints the matmuls per second after a
        third of the run, and the per-part counts
    hardchild.py graph SECONDS
        a CUDA graph of 8 matmuls captured once, checked against eager
        execution, then replayed for SECONDS; prints replays per second
    hardchild.py memory BYTES
        allocates BYTES with torch, prints what torch and cuMemGetInfo see,
        then waits for a line on stdin (the parent reads NVML meanwhile)

Every mode prints one JSON line last; without CUDA it prints
{"skipped": "..."} and exits 0, so a CPU run only checks that it starts.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from typing import Any


def out(obj: object) -> None:
    """One JSON line on stdout, flushed."""
    print(json.dumps(obj), flush=True)


def loader(torch: Any, seconds: float, nstreams: int, nthreads: int) -> dict[str, object]:
    """Matmuls from a DataLoader's batches on many streams plus busy threads."""
    from torch.utils.data import DataLoader, Dataset  # noqa: PLC0415 (torch is optional here)

    class Synthetic(Dataset):  # type: ignore[misc]
        def __len__(self) -> int:
            return 1 << 30

        def __getitem__(self, i: int) -> Any:
            g = torch.Generator().manual_seed(i)
            return torch.randn(256, 256, generator=g)

    data = DataLoader(
        Synthetic(),
        batch_size=8,
        num_workers=8,
        pin_memory=True,
        persistent_workers=True,
        multiprocessing_context="fork",  # the dataset class is local to this function
    )
    batches = iter(data)  # the workers fork before any thread of ours starts
    w = torch.randn(2048, 2048, device="cuda")
    streams = [torch.cuda.Stream() for _ in range(nstreams)]
    counts = {"loader": 0, "threads": 0}
    lock = threading.Lock()
    stop = threading.Event()

    def busy() -> None:
        s = torch.cuda.Stream()
        x = torch.randn(2048, 2048, device="cuda")
        with torch.cuda.stream(s):
            while not stop.is_set():
                for _ in range(4):
                    x = torch.mm(x, w).clamp_(-1, 1)
                s.synchronize()
                with lock:
                    counts["threads"] += 4

    workers = [threading.Thread(target=busy, daemon=True) for _ in range(nthreads)]
    for t in workers:
        t.start()
    t0 = time.monotonic()
    marks: list[tuple[float, int]] = []
    for i, batch in enumerate(batches):
        s = streams[i % nstreams]
        with torch.cuda.stream(s):
            x = batch.to("cuda", non_blocking=True).reshape(2048, 256) @ w[:256, :]
            for _ in range(3):
                x = torch.mm(x, w).clamp_(-1, 1)
        with lock:
            counts["loader"] += 4
        if i % 16 == 15:
            torch.cuda.synchronize()
            with lock:
                marks.append((time.monotonic(), counts["loader"] + counts["threads"]))
        if time.monotonic() - t0 > seconds:
            break
    stop.set()
    for t in workers:
        t.join(timeout=30)
    torch.cuda.synchronize()
    late = [m for m in marks if m[0] - t0 > seconds / 3]
    rate = (late[-1][1] - late[0][1]) / (late[-1][0] - late[0][0]) if len(late) > 1 else 0.0
    alive = sum(t.is_alive() for t in workers)
    return {"mm_per_s": rate, "counts": counts, "marks": len(marks), "threads_alive": alive}


def graph(torch: Any, seconds: float) -> dict[str, object]:
    """A captured graph of 8 matmuls: correct when replayed, and its replay rate."""
    torch.manual_seed(0)
    w = torch.randn(2048, 2048, device="cuda") / 45.0
    x = torch.randn(2048, 2048, device="cuda")

    def chain(v: Any) -> Any:
        for _ in range(8):
            v = torch.mm(v, w).clamp_(-1, 1)
        return v

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up on a side stream, as capture requires
        for _ in range(3):
            chain(x)
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = chain(x)
    g.replay()
    torch.cuda.synchronize()
    expected = chain(x)
    torch.cuda.synchronize()
    correct = bool(torch.allclose(y, expected, atol=1e-3, rtol=1e-3))
    stamps = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for _ in range(4):
            g.replay()
        torch.cuda.synchronize()
        stamps.append(time.monotonic())
    half = stamps[len(stamps) // 3 :]
    rate = 4 * (len(half) - 1) / (half[-1] - half[0]) if len(half) > 1 else 0.0
    return {"correct": correct, "replays_per_s": rate, "batches": len(stamps)}


def memory(torch: Any, nbytes: int) -> dict[str, object]:
    """Allocate with torch; what torch and cuMemGetInfo report."""
    x = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    x.fill_(1)
    torch.cuda.synchronize()
    free, total = torch.cuda.mem_get_info()
    return {
        "pid": os.getpid(),
        "torch_allocated": torch.cuda.memory_allocated(),
        "torch_reserved": torch.cuda.memory_reserved(),
        "cuda_free": free,
        "cuda_total": total,
    }


def tries(torch: Any) -> None:
    """Until "done" on stdin: for each line "try N", allocate N more bytes with
    torch and answer whether it fitted (the allocation is freed again)."""
    for line in sys.stdin:
        words = line.split()
        if words[:1] != ["try"]:
            return
        try:
            y = torch.empty(int(words[1]), dtype=torch.uint8, device="cuda")
        except torch.cuda.OutOfMemoryError as e:
            out({"try": int(words[1]), "ok": False, "error": str(e)[:300]})
        else:
            del y
            torch.cuda.empty_cache()
            out({"try": int(words[1]), "ok": True})


def main(argv: list[str]) -> int:
    """Run the mode named by argv[1]."""
    mode = argv[1]
    try:
        import torch  # noqa: PLC0415 (a CPU run reports the skip)
    except ImportError as e:
        out({"skipped": f"PyTorch not importable: {e}"})
        return 0
    if not torch.cuda.is_available():
        out({"skipped": "torch.cuda.is_available() is False: no CUDA device"})
        return 0
    if mode == "loader":
        out(loader(torch, float(argv[2]), int(argv[3]), int(argv[4])))
    elif mode == "graph":
        out(graph(torch, float(argv[2])))
    elif mode == "memory":
        out(memory(torch, int(argv[2])))
        tries(torch)
    else:
        out({"error": f"unknown mode {mode!r}"})
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
