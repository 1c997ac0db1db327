"""ArkGPU's central claim on a real GPU: an LC inference server beside a training job.

A PyTorch inference server (torchvision ``resnet50`` with random weights, a
dynamic batcher, Poisson load at a peak rate, stepped down to half and back)
runs beside a PyTorch training loop on one GPU, twice:

* ``timeslice``: no limiter, the driver's plain time-slicing of two processes;
* ``arkgpu``: both under the interception library, driven by ``arkgpu node run``
  (regions and ``pod.json`` as the node runtime expects them).

Recorded per mode: every request's arrival and completion, every training
iteration's end, and (arkgpu) the shares the runtime wrote; the figures (LC
p99 against target over time and per phase, SLO attainment, training
iterations/s) are computed by tests/gpu/colocation_load.py. Everything goes
under ``--out``: ``colocation.json`` (figures and raw records), ``summary.txt``
and one folder per mode with the processes' logs.

Run from the repository root (tests/gpu/colocation_run.sh builds the native
parts first)::

    python -m tests.gpu.colocation_torch --out DIR

Exit status: 0 done, 1 a run failed, 2 bad arguments, 77 not run (no PyTorch,
no torchvision, no GPU, or the limiter not built), said in one line.
As root the workloads run as nobody (the limits file must not be writable by
them), so the checkout must be readable by nobody, as for tests/gpu/run.sh.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np

from .colocation_load import (
    LoadConfig,
    RunRecord,
    arrival_times,
    batch_due,
    summarise,
    summary_lines,
    wake_at,
)

REPO = Path(__file__).resolve().parents[2]
MODES = ("timeslice", "arkgpu")
LOAD_OPTIONS = ("peak_rps", "target_ms", "warmup_s", "phase_s", "max_batch", "low_factor")
"""Fields of :class:`LoadConfig` given on the command line."""
READY_TIMEOUT_S = 180.0
"""Longest a workload may take to load its model and warm up, s."""


class NotRunError(Exception):
    """A prerequisite is missing: the check cannot run here."""


def preflight() -> str:
    """The GPU's name; NotRunError naming what is missing."""
    try:
        import torch  # noqa: PLC0415 (only where the check runs)
    except ImportError as exc:
        raise NotRunError(f"PyTorch is not importable by {sys.executable} ({exc})") from None
    try:
        import torchvision  # noqa: F401, PLC0415
    except ImportError as exc:
        raise NotRunError(f"torchvision is not importable by {sys.executable} ({exc})") from None
    if not torch.cuda.is_available():
        raise NotRunError("PyTorch sees no CUDA GPU (torch.cuda.is_available() is false)")
    from arkgpu.limiter import native  # noqa: PLC0415

    try:
        native.limiter_library()
    except FileNotFoundError as exc:
        raise NotRunError(f"the limiter is not built: {exc}") from None
    return str(torch.cuda.get_device_name(0))


def _reporter() -> Any:
    """The latency channel when the workload runs in a region, else None."""
    if not os.environ.get("ARKGPU_REGION_DIR"):
        return None
    from arkgpu.client import LatencyReporter  # noqa: PLC0415

    return LatencyReporter()


def lc_child(spec: dict[str, Any]) -> dict[str, Any]:
    """The inference server: warm up, say ready, serve the load from ``go t0``."""
    import torch  # noqa: PLC0415
    import torchvision  # noqa: PLC0415

    load = LoadConfig(**spec["load"])
    model = getattr(torchvision.models, spec["model"])(weights=None).cuda().eval()
    inputs = torch.randn(load.max_batch, 3, 224, 224, device="cuda")
    with torch.inference_mode():
        for _ in range(2):
            for b in range(1, load.max_batch + 1):
                model(inputs[:b])
        torch.cuda.synchronize()
        solo = []
        for _ in range(10):
            start = time.monotonic()
            model(inputs)
            torch.cuda.synchronize()
            solo.append((time.monotonic() - start) * 1000.0)
        reporter = _reporter()
        print(json.dumps({"ready": True, "solo_batch_ms": float(np.median(solo))}), flush=True)
        t0 = float(sys.stdin.readline().split()[1])
        arrivals = arrival_times(load, np.random.default_rng(load.seed)) + t0

        def run_batch(k: int) -> None:
            model(inputs[:k])
            torch.cuda.synchronize()

        done = serve(run_batch, arrivals, load, reporter)
    return {
        "solo_batch_ms": float(np.median(solo)),
        "arrivals": [a - t0 for a, _ in done],
        "completions": [c - t0 for _, c in done],
    }


def serve(
    run_batch: Callable[[int], None], arrivals: Any, load: LoadConfig, reporter: Any
) -> list[tuple[float, float]]:
    """Serve requests arriving at ``arrivals`` (CLOCK_MONOTONIC s) with a dynamic batcher;
    ``run_batch(k)`` runs one batch of ``k`` to completion. (arrival, completion) per
    request; latencies reported per request when ``reporter`` is given."""
    delay, queue = load.max_queue_delay_ms / 1000.0, deque[float]()
    done: list[tuple[float, float]] = []
    i, n = 0, len(arrivals)
    while i < n or queue:
        now = time.monotonic()
        while i < n and arrivals[i] <= now:
            queue.append(float(arrivals[i]))
            i += 1
        k = batch_due(queue, now, load.max_batch, delay)
        if not k:
            wake = wake_at(queue, float(arrivals[i]) if i < n else math.inf, delay)
            time.sleep(max(0.0, min(wake, now + 0.05) - time.monotonic()))
            continue
        batch = [queue.popleft() for _ in range(k)]
        if reporter is not None:
            reporter.batch_begin()
        run_batch(k)
        end = time.monotonic()
        if reporter is not None:
            reporter.batch_end()
            for arrived in batch:
                reporter.report(end - arrived, 1)
        done += [(arrived, end) for arrived in batch]
    return done


def be_child(spec: dict[str, Any]) -> dict[str, Any]:
    """The training loop: warm up, say ready, train from ``go t0 t_end`` and stamp each step."""
    import torch  # noqa: PLC0415
    import torchvision  # noqa: PLC0415

    model = getattr(torchvision.models, spec["model"])(weights=None).cuda().train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = torch.randn(spec["batch"], 3, 224, 224, device="cuda")
    labels = torch.randint(0, 1000, (spec["batch"],), device="cuda")

    def step() -> None:
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(data), labels).backward()
        opt.step()
        torch.cuda.synchronize()

    for _ in range(3):
        step()
    print(json.dumps({"ready": True}), flush=True)
    _, t0, t_end = sys.stdin.readline().split()
    start, end = float(t0), float(t_end)
    time.sleep(max(0.0, start - time.monotonic()))
    stamps = []
    while time.monotonic() < end:
        step()
        stamps.append(time.monotonic() - start)
    return {"stamps": stamps}


def _child_env(mode: str, regions: Path | None, staged: Path | None) -> dict[str, str]:
    from .torchchild import child_python  # noqa: PLC0415

    env = dict(os.environ, **child_python()[1])
    path = [str(REPO / "src"), str(REPO), env.get("PYTHONPATH", "")]
    env["PYTHONPATH"] = os.pathsep.join(p for p in path if p)
    env.pop("LD_PRELOAD", None)
    env.pop("ARKGPU_REGION_DIR", None)
    if mode == "arkgpu" and regions is not None:
        from arkgpu.limiter import native  # noqa: PLC0415

        native_dir = staged or native.limiter_library().parent
        env["LD_PRELOAD"] = str(native_dir / "libarkgpu_limiter.so")
        if staged is not None:
            env[native.NATIVE_DIR_ENV] = str(staged)
    return env


def _start(role: str, spec: dict[str, Any], env: dict[str, str], log: Path) -> Any:
    from arkgpu.limiter.containers import container_user  # noqa: PLC0415

    from .torchchild import child_python  # noqa: PLC0415

    command = [child_python()[0], "-m", "tests.gpu.colocation_torch", "child", role]
    proc = subprocess.Popen(
        [*command, json.dumps(spec)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=log.open("w"),
        text=True,
        env=env,
        cwd=REPO,
        user=container_user(),
    )
    line = _line_within(proc, READY_TIMEOUT_S)
    if not line.get("ready"):
        raise RuntimeError(f"{role}: did not get ready (see {log})")
    return proc, line


def _line_within(proc: Any, seconds: float) -> dict[str, Any]:
    import selectors  # noqa: PLC0415

    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        if not sel.select(seconds):
            return {}
    text = proc.stdout.readline()
    return json.loads(text) if text.strip() else {}


def _result(proc: Any, role: str, work: Path) -> dict[str, Any]:
    """A workload's last line of output, parsed; RuntimeError naming its log otherwise."""
    out = proc.communicate(timeout=READY_TIMEOUT_S + 600)[0]
    lines = out.strip().splitlines()
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"{role}: exit status {proc.returncode} (see {work / role}.log)")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def _regions(work: Path, args: argparse.Namespace, load: LoadConfig) -> Path:
    from arkgpu.limiter.containers import FakeContainer, make_world_readable  # noqa: PLC0415
    from arkgpu.limiter.region import Limits  # noqa: PLC0415
    from arkgpu.node.pods import PodSpec, write_pod  # noqa: PLC0415

    regions = work / "regions"
    make_world_readable(regions)
    lc = FakeContainer.create(regions / "lc", work / "unused", Limits((None,), 5000))
    spec = PodSpec("lc", "lc", 0, args.model, None, load.target_ms, load.peak_rps)
    write_pod(lc.region, replace(spec, max_batch=load.max_batch))
    be = FakeContainer.create(regions / "be", work / "unused", Limits((None,), 5000))
    write_pod(be.region, PodSpec("be", "be", 0, args.be_model, None, batch=args.be_batch))
    return regions


def _runtime(work: Path, regions: Path, args: argparse.Namespace) -> Any:
    toml = work / "node.toml"
    toml.write_text(
        f'regions_dir = "{regions}"\nnvml = false\ngpus = 1\nperiod_s = 0.1\n'
        f'gpu_model = "{args.gpu_model}"\n'
    )
    log = work / "runtime.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "arkgpu", "node", "run", "--config", str(toml)],
        stderr=log.open("w"),
        env=dict(os.environ, PYTHONPATH=str(REPO / "src")),
    )
    deadline = time.monotonic() + 120.0
    while "arkgpu node:" not in log.read_text() and proc.poll() is None:
        if time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"the node runtime did not start (see {log})")
        time.sleep(0.2)
    if proc.poll() is not None:
        raise RuntimeError(f"the node runtime exited with {proc.returncode} (see {log})")
    return proc


def run_mode(mode: str, out: Path, args: argparse.Namespace, load: LoadConfig) -> dict[str, Any]:
    """One mode's run: the raw record and the LC's solo batch latency."""
    from arkgpu.limiter import native  # noqa: PLC0415
    from arkgpu.limiter.containers import container_user, make_world_readable  # noqa: PLC0415
    from arkgpu.limiter.region import read_limits  # noqa: PLC0415

    work = out / mode
    make_world_readable(work)
    regions = _regions(work, args, load) if mode == "arkgpu" else None
    staged = native.stage(work / "native") if regions and container_user() is not None else None
    runtime = _runtime(work, regions, args) if regions else None
    procs: list[Any] = []
    try:
        env = _child_env(mode, regions, staged)
        lc_env = dict(env, ARKGPU_REGION_DIR=str(regions / "lc")) if regions else env
        be_env = dict(env, ARKGPU_REGION_DIR=str(regions / "be")) if regions else env
        lc, ready = _start(
            "lc", {"model": args.model, "load": asdict(load)}, lc_env, work / "lc.log"
        )
        procs.append(lc)
        be, _ = _start(
            "be", {"model": args.be_model, "batch": args.be_batch}, be_env, work / "be.log"
        )
        procs.append(be)
        t0 = time.monotonic() + 1.0
        for proc in procs:
            proc.stdin.write(f"go {t0} {t0 + load.total_s}\n")
            proc.stdin.flush()
        shares = []
        while lc.poll() is None and regions is not None:
            lc_bp, be_bp = (read_limits(regions / n).share_bp for n in ("lc", "be"))
            shares.append((time.monotonic() - t0, lc_bp, be_bp))
            time.sleep(0.2)
        results = [_result(p, role, work) for p, role in zip(procs, ("lc", "be"), strict=True)]
    finally:
        for proc in procs + ([runtime] if runtime else []):
            if proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=30)
    lc_out, be_out = results
    record = RunRecord(lc_out["arrivals"], lc_out["completions"], be_out["stamps"], shares)
    return {"record": record, "solo_batch_ms": ready["solo_batch_ms"]}


def parse(argv: list[str]) -> tuple[argparse.Namespace, LoadConfig]:
    """The options (exit 2 with one line on a bad one)."""
    p = argparse.ArgumentParser(prog="colocation_torch", description=__doc__.split("\n")[0])
    p.add_argument("--out", type=Path, required=True, help="folder for every output")
    p.add_argument(
        "--modes", default=",".join(MODES), help="comma-separated, of: timeslice, arkgpu"
    )
    p.add_argument("--model", default="resnet50", help="LC model (torchvision name)")
    p.add_argument("--be-model", default="resnet50", help="training model (torchvision name)")
    p.add_argument("--be-batch", type=int, default=32, help="training batch")
    p.add_argument("--gpu-model", default="H200", help="GPU model the runtime's predictor assumes")
    defaults = LoadConfig()
    for name in LOAD_OPTIONS:
        kind = type(getattr(defaults, name))
        p.add_argument("--" + name.replace("_", "-"), type=kind, default=getattr(defaults, name))
    args = p.parse_args(argv)
    modes = [m for m in args.modes.split(",") if m]
    if not modes or any(m not in MODES for m in modes):
        p.error(f"--modes: expected some of {', '.join(MODES)}, got {args.modes!r}")
    if args.be_batch < 1:
        p.error(f"--be-batch: expected a positive integer, got {args.be_batch}")
    args.modes, args.out = modes, args.out.resolve()
    try:
        load = LoadConfig(**{n: getattr(args, n) for n in LOAD_OPTIONS})
    except ValueError as exc:
        p.error(f"--{str(exc).replace('_', '-')}")
    return args, load


def main(argv: list[str]) -> int:
    """Run the check (or, as ``child ROLE SPEC``, one workload)."""
    if argv[:1] == ["child"]:
        result = (lc_child if argv[1] == "lc" else be_child)(json.loads(argv[2]))
        print(json.dumps(result), flush=True)
        return 0
    args, load = parse(argv)
    try:
        gpu = preflight()
    except NotRunError as exc:
        print(f"colocation: NOT RUN - {exc}", file=sys.stderr)
        return 77
    args.out.mkdir(parents=True, exist_ok=True)
    runs: dict[str, RunRecord] = {}
    meta: dict[str, Any] = {"gpu": gpu, "modes": {}}
    status = 0
    for mode in args.modes:
        print(f"colocation: {mode} ({load.total_s:.0f} s of load)", file=sys.stderr, flush=True)
        try:
            done = run_mode(mode, args.out, args, load)
        except (RuntimeError, OSError, ValueError, subprocess.SubprocessError) as exc:
            print(f"colocation: {mode} failed: {exc}", file=sys.stderr)
            meta["modes"][mode] = {"error": str(exc)}
            status = 1
            continue
        runs[mode] = done["record"]
        meta["modes"][mode] = {"solo_batch_ms": done["solo_batch_ms"]}
    report = summarise(load, runs) | {"run": meta, "raw": {m: asdict(r) for m, r in runs.items()}}
    (args.out / "colocation.json").write_text(json.dumps(report, indent=1))
    lines = [f"GPU: {gpu}", *summary_lines(report)]
    (args.out / "summary.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
