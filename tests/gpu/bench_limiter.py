"""The limiter's cost on a real GPU, with PyTorch (run by tests/gpu/run.sh --bench).

    python -m tests.gpu.bench_limiter [--json PATH] [--elastic-only [--hard-pair]]

Side by side in one run, each figure the median of its runs: the time per
launch of a one-element kernel (torch ``add_``, launch-bound) and the
throughput of 2048x2048 matmuls (compute-bound), with and without the
interception library, at no cap and a 100% share; then the matmul
throughput at 25/50/75% shares as a fraction of the unlimited one, and of a
best-effort container at 25% lent 50% by an LC container, with a batch in
flight and idle. ``--elastic-only``: instead, an elastic container at 30%
alone and beside a hard 70% container running at the same time
(``--hard-pair``: the 30% container hard too, the control).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from arkgpu.client import LatencyReporter
from arkgpu.limiter import Limits, Mode, link_lender
from arkgpu.limiter.containers import FakeContainer, make_world_readable
from arkgpu.model.shares import share_bp

from .torchchild import (
    last_line,
    rate_of,
    run_child,
    start_child,
    throughput,
    unused,
)

LAUNCHES = 20_000
ROUNDS = 5


def gpu_name() -> str:
    """The GPU and driver as nvidia-smi names them."""
    out = subprocess.run(
        ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip().splitlines()[0]


def measure(workdir: Path) -> dict[str, Any]:
    """Every figure of the module docstring, alternating with and without the library."""
    box = FakeContainer.create(workdir / "full", unused(workdir), Limits((None,)))
    launch: dict[bool, list[float]] = {True: [], False: []}
    rate: dict[bool, list[float]] = {True: [], False: []}
    for _ in range(ROUNDS):
        for preload in (False, True):
            result = run_child(box, "launch", str(LAUNCHES), preload=preload)
            launch[preload].append(float(result["ns_per_launch"]))
            rate[preload].append(throughput(box, 3.0, preload=preload))
    unlimited = statistics.median(rate[False])
    shares = {}
    for share in (25.0, 50.0, 75.0):
        limited = FakeContainer.create(
            workdir / f"s{share:g}", unused(workdir), Limits((None,), share_bp(share / 100))
        )
        shares[f"{share:g}"] = throughput(limited, 3.0) / unlimited
    lc = FakeContainer.create(workdir / "lc", unused(workdir), Limits((None,)))
    be_limits = Limits((None,), 2_500, lent_bp=(5000,), lend_stale_ms=600_000)
    be = FakeContainer.create(workdir / "be", unused(workdir), be_limits)
    link_lender(be.region, 0, lc.region)
    with LatencyReporter(lc.region) as lc_server:
        lc_server.batch_begin()
        lent_in_flight = throughput(be, 3.0) / unlimited
        lc_server.batch_end()
        lent_idle = throughput(be, 3.0) / unlimited
    return {
        "gpu": gpu_name(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "launch_ns_without": statistics.median(launch[False]),
        "launch_ns_with": statistics.median(launch[True]),
        "launch_runs": {"without": launch[False], "with": launch[True]},
        "matmul_per_s_without": statistics.median(rate[False]),
        "matmul_per_s_with": statistics.median(rate[True]),
        "matmul_runs": {"without": rate[False], "with": rate[True]},
        "share_fraction_of_unlimited": shares,
        "be_25_lent_50_fraction": {"lc_in_flight": lent_in_flight, "lc_idle": lent_idle},
    }


def side_by_side(boxes: list[FakeContainer], seconds: float) -> list[float]:
    """Run one matmul child per container at once; each one's rate."""
    procs = [start_child(box, "rate", str(seconds)) for box in boxes]
    outs = [proc.communicate(timeout=300)[0] for proc in procs]
    return [rate_of(last_line(out)["stamps"]) for out in outs]


def elastic(workdir: Path, mode: Mode = Mode.ELASTIC) -> dict[str, Any]:
    """A 30% container (elastic, or hard for the control) alone and beside a hard
    70%, as fractions of the unlimited rate."""
    unlimited = throughput(
        FakeContainer.create(workdir / "full", unused(workdir), Limits((None,))), 3.0, False
    )
    box = FakeContainer.create(workdir / "e30", unused(workdir), Limits((None,), 3_000, mode))
    alone = throughput(box, 3.0) / unlimited
    hard = FakeContainer.create(workdir / "h70", unused(workdir), Limits((None,), 7_000))
    both = side_by_side([box, hard], 5.0)
    return {
        "gpu": gpu_name(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "matmul_per_s_unlimited": unlimited,
        "mode_of_the_30": mode.value,
        "the_30_alone": alone,
        "the_30_beside_hard_70": both[0] / unlimited,
        "hard_70_beside_the_30": both[1] / unlimited,
    }


def main() -> None:
    """Measure and print (and optionally write) the figures as JSON."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--elastic-only", action="store_true", help="only the elastic figures")
    parser.add_argument(
        "--hard-pair", action="store_true", help="with --elastic-only: the 30%% hard too"
    )
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="arkgpu-gpu-bench-"))
    make_world_readable(workdir)
    try:
        mode = Mode.HARD if args.hard_pair else Mode.ELASTIC
        report = elastic(workdir, mode) if args.elastic_only else measure(workdir)
    finally:
        subprocess.run(["rm", "-rf", str(workdir)], check=False)
    text = json.dumps(report, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
