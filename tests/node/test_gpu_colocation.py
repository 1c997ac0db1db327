"""The GPU co-location check's parts that run without a GPU (tests/gpu/colocation_*.py).

The load, the batcher, the server loop (with a batch that sleeps instead of a
model), the figures on synthetic records, and the script itself where PyTorch
is missing (a clear "not run", exit 77) or an option is bad (exit 2).
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]


def _module(name: str) -> ModuleType:
    if str(REPO) not in sys.path:
        sys.path.append(str(REPO))
    return importlib.import_module(f"tests.gpu.{name}")


@pytest.fixture(scope="module")
def load() -> ModuleType:
    """tests/gpu/colocation_load.py."""
    return _module("colocation_load")


def test_arrivals_follow_the_step_down_and_up(load: ModuleType) -> None:
    """Poisson arrivals: sorted, inside the load, the low phase at half the rate
    (counts within 5 standard deviations), the same for the same seed."""
    config = load.LoadConfig(peak_rps=400.0, warmup_s=2.0, phase_s=5.0)
    times = load.arrival_times(config, np.random.default_rng(3))
    assert np.all(np.diff(times) >= 0)
    assert times[0] >= 0.0
    assert times[-1] < config.total_s
    for name, start, end, rate in config.segments():
        n = int(((times >= start) & (times < end)).sum())
        mean = rate * (end - start)
        assert abs(n - mean) <= 5 * mean**0.5, (name, n, mean)
    assert {s[0]: s[3] for s in config.segments()}["low"] == 200.0
    again = load.arrival_times(config, np.random.default_rng(3))
    assert np.array_equal(times, again)


def test_the_batcher_fills_a_batch_or_waits_out_its_delay(load: ModuleType) -> None:
    """A full batch goes at once, a partial one once its oldest request waited the delay."""
    assert load.batch_due([], 5.0, 4, 0.002) == 0
    assert load.batch_due([1.0, 1.0005], 1.001, 4, 0.002) == 0
    assert load.batch_due([1.0, 1.0005], 1.002, 4, 0.002) == 2
    assert load.batch_due([1.0] * 6, 1.0, 4, 0.002) == 4
    assert load.wake_at([1.0], 3.0, 0.002) == 1.002
    assert load.wake_at([], 3.0, 0.002) == 3.0


def test_the_server_loop_serves_every_request(load: ModuleType) -> None:
    """The server loop with a 3 ms batch that sleeps: every request served once, no
    batch over the largest, each latency at least a batch's time, the latency channel
    given one report per request between balanced batch begin/end calls."""
    torch_script = _module("colocation_torch")
    config = load.LoadConfig(peak_rps=300.0, warmup_s=0.2, phase_s=0.3, max_batch=4)
    arrivals = load.arrival_times(config, np.random.default_rng(1)) + time.monotonic()
    sizes: list[int] = []

    class Reporter:
        def __init__(self) -> None:
            self.calls: list[str] = []

        def batch_begin(self) -> None:
            self.calls.append("begin")

        def batch_end(self) -> None:
            self.calls.append("end")

        def report(self, latency_s: float, batch: int) -> None:
            assert latency_s >= 0.003
            assert batch == 1
            self.calls.append("report")

    def run_batch(k: int) -> None:
        sizes.append(k)
        time.sleep(0.003)

    reporter = Reporter()
    done = torch_script.serve(run_batch, arrivals, config, reporter)
    assert sorted(a for a, _ in done) == pytest.approx(sorted(arrivals))
    assert max(sizes) <= 4
    assert sum(sizes) == len(arrivals)
    assert all(c - a >= 0.003 for a, c in done)
    assert reporter.calls.count("begin") == reporter.calls.count("end") == len(sizes)
    assert reporter.calls.count("report") == len(arrivals)


def _record(load: ModuleType, c: Any, slow_ms: float, it_per_s: float) -> Any:
    """One request every 10 ms, each ``slow_ms`` long in the high phases and 5 ms in
    the low one; training iterations at ``it_per_s``."""
    arrivals = np.arange(0.0, c.total_s, 0.01)
    low = (arrivals >= c.warmup_s + c.phase_s) & (arrivals < c.warmup_s + 2 * c.phase_s)
    latency = np.where(low, 0.005, slow_ms / 1000.0)
    stamps = np.arange(0.0, c.total_s, 1.0 / it_per_s)
    return load.RunRecord(list(arrivals), list(arrivals + latency), list(stamps))


def test_figures_of_synthetic_runs(load: ModuleType) -> None:
    """Known latencies and iteration rates give the figures exactly: p99 over target
    per phase, SLO attainment, iterations/s, and the comparison of the two modes."""
    config = load.LoadConfig(target_ms=20.0, warmup_s=1.0, phase_s=2.0, window_s=0.5)
    runs = {
        "timeslice": _record(load, config, 40.0, 20.0),
        "arkgpu": _record(load, config, 10.0, 10.0),
    }
    report = load.summarise(config, runs)
    t, a = report["modes"]["timeslice"], report["modes"]["arkgpu"]
    assert t["phases"]["high"]["p99_over_target"] == pytest.approx(2.0)
    assert t["phases"]["low"]["p99_over_target"] == pytest.approx(0.25)
    assert a["phases"]["high_again"]["p99_over_target"] == pytest.approx(0.5)
    assert t["phases"]["high"]["slo_attainment"] == 0.0
    assert a["overall"]["slo_attainment"] == 1.0
    assert t["overall"]["slo_attainment"] == pytest.approx(1 / 3, abs=0.01)
    assert t["overall"]["be_iters_per_s"] == pytest.approx(20.0, abs=0.5)
    assert report["comparison"]["be_iters_per_s_arkgpu_over_timeslice"] == pytest.approx(
        0.5, abs=0.02
    )
    windows = a["windows"]
    assert len(windows) == 14
    assert windows[-1]["t_end"] == pytest.approx(7.0)
    assert all(w["requests"] in (49, 50, 51) for w in windows[:-1])
    lines = load.summary_lines(report)
    assert len(lines) == 1 + 2 * 4
    assert lines[1].startswith("timeslice  high")


def _script(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The script as colocation_run.sh runs it, with a ``torch`` that cannot be imported."""
    shim = tmp_path / "shim" / "torch"
    shim.mkdir(parents=True, exist_ok=True)
    (shim / "__init__.py").write_text("raise ImportError('torch: not on this machine (shim)')\n")
    path = os.pathsep.join([str(tmp_path / "shim"), str(REPO / "src")])
    return subprocess.run(
        [sys.executable, "-m", "tests.gpu.colocation_torch", *args],
        cwd=REPO,
        env=dict(os.environ, PYTHONPATH=path),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_without_pytorch_the_script_says_not_run(tmp_path: Path) -> None:
    """No PyTorch: exit 77 and one line that says the check did not run and why."""
    done = _script(tmp_path, "--out", str(tmp_path / "out"))
    assert done.returncode == 77, done.stderr
    assert done.stderr.strip().splitlines() == [
        f"colocation: NOT RUN - PyTorch is not importable by {sys.executable}"
        " (torch: not on this machine (shim))"
    ]


@pytest.mark.parametrize(
    ("args", "word"),
    [(["--phase-s", "-1"], "--phase-s"), (["--modes", "mps"], "--modes"), ([], "--out")],
)
def test_a_bad_option_is_one_line_naming_it(tmp_path: Path, args: list[str], word: str) -> None:
    """A bad value or a missing --out: exit 2 and a usage error naming the option."""
    if word != "--out":
        args = [*args, "--out", str(tmp_path / "out")]
    done = _script(tmp_path, *args)
    assert done.returncode == 2
    assert word in done.stderr.strip().splitlines()[-1]
