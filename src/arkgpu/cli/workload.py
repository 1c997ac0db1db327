"""``arkgpu workload``: test workloads on the fake GPU (a container's processes).

* ``workload lc``: an inference server. Requests arrive as a Poisson stream
  whose rate follows ``--rates`` (steps of RATE:SECONDS); a dynamic batcher
  forms a batch when ``--max-batch`` requests wait or the oldest has waited
  ``--queue-delay-ms``; each batch runs one kernel of ``base + per * batch``
  µs of device time (``--base-us``, ``--per-us``: the profiled duration on the whole GPU)
  through ``arkgpu-cubench script`` on the fake driver, under the limiter.
  The batch is marked in flight and each request's latency is reported
  through :mod:`arkgpu.client`; ``--log`` gets one JSON line per request.
* ``workload be``: a training loop: ``arkgpu-cubench load`` launches
  ``--kernel-us`` kernels back to back for ``--seconds``; prints its
  iterations and busy share as JSON.

Both run where ``ARKGPU_REGION_DIR`` and the fake driver's environment are set
(:meth:`arkgpu.limiter.containers.FakeContainer.env`), or take ``--region``.
Both end early on SIGTERM (the kubelet stopping the pod; PID 1 of a container
ignores a signal it has no handler for, and the pod's deletion would wait out
its grace period), with the summary of what they did and exit status 0.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import IO, Any

from arkgpu.cli.options import CliError, file_output, input_dir, integer, number, seed_option

MAX_SECONDS = 86_400.0
"""Longest run accepted, s."""


def register(subparsers: Any) -> None:
    """Add ``workload lc`` and ``workload be``."""
    parser = subparsers.add_parser("workload", help="test workloads on the fake GPU (LC and BE)")
    sub = parser.add_subparsers(dest="workload_command", required=True, metavar="COMMAND")
    lc = sub.add_parser("lc", help="an inference server: Poisson load, dynamic batching")
    _region(lc)
    lc.add_argument(
        "--rates",
        metavar="STEPS",
        required=True,
        type=_steps,
        help="load curve: comma list of RATE:SECONDS (requests/s > 0, seconds > 0)",
    )
    lc.add_argument(
        "--base-us",
        metavar="US",
        type=number(0.0, 1e6),
        default=2000.0,
        help="device time of a batch, fixed part, µs on the whole GPU, 0 to 1e6 (default 2000)",
    )
    lc.add_argument(
        "--per-us",
        metavar="US",
        type=number(0.0, 1e6),
        default=500.0,
        help="device time of a batch, per request, µs on the whole GPU, 0 to 1e6 (default 500)",
    )
    lc.add_argument(
        "--model",
        metavar="NAME",
        help="size each batch's kernel from the predictor's latency of NAME at the share in "
        "the region (the profiled duration for its share; overrides --base-us, --per-us); "
        "default: none",
    )
    lc.add_argument(
        "--max-batch",
        metavar="N",
        type=integer(1, 1024),
        default=8,
        help="largest batch (default 8)",
    )
    lc.add_argument(
        "--queue-delay-ms",
        metavar="MS",
        type=number(0.0, 1000.0),
        default=2.0,
        help="batcher's queue delay, ms, 0 to 1000 (default 2)",
    )
    seed_option(lc, 1)
    lc.add_argument(
        "--log", metavar="PATH", type=file_output, help="one JSON line per request (default: none)"
    )
    lc.set_defaults(handler=lc_command)
    be = sub.add_parser("be", help="a training loop: kernels back to back, counting iterations")
    _region(be)
    be.add_argument(
        "--seconds",
        metavar="S",
        type=number(0.0, MAX_SECONDS, low_open=True),
        required=True,
        help=f"how long to run, seconds, 0 < S <= {MAX_SECONDS:g}",
    )
    be.add_argument(
        "--kernel-us",
        metavar="US",
        type=number(1.0, 1e6),
        default=1000.0,
        help="one iteration's kernel, µs, 1 to 1e6 (default 1000)",
    )
    be.set_defaults(handler=be_command)


def _region(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--region",
        metavar="DIR",
        type=input_dir,
        help="the container's region folder (default: $ARKGPU_REGION_DIR)",
    )


def _steps(text: str) -> list[tuple[float, float]]:
    """RATE:SECONDS,... -> [(rate, seconds)]; ArgumentTypeError names the bad step."""
    out = []
    for part in text.split(","):
        try:
            rate, seconds = (float(x) for x in part.split(":"))
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected RATE:SECONDS steps, got {part!r}") from None
        if not (0 < rate <= 1e6 and 0 < seconds <= MAX_SECONDS):
            raise argparse.ArgumentTypeError(f"rate and seconds must be > 0, got {part!r}")
        out.append((rate, seconds))
    return out


def _env(region: Path | None) -> dict[str, str]:
    """The kernel runner's environment: the container's region, the limiter preloaded."""
    from arkgpu.limiter import native  # noqa: PLC0415 (not at start-up)

    env = dict(os.environ)
    if region is not None:
        env["ARKGPU_REGION_DIR"] = str(region)
    if "ARKGPU_REGION_DIR" not in env:
        raise CliError("--region: not given and ARKGPU_REGION_DIR is not set")
    env["LD_PRELOAD"] = str(native.limiter_library())
    return env


def _user(env: dict[str, str]) -> int | None:
    """Run kernels as the owner of the region's usage file when we are root and it is not
    (the container's user: the limiter refuses a process that could write its limits)."""
    owner = (Path(env["ARKGPU_REGION_DIR"]) / "usage").stat().st_uid
    return owner if os.geteuid() == 0 and owner != 0 else None


class Stop:
    """SIGTERM noted (see the module's text) and passed on to the child process, once there
    is one (at once when it came before the child started)."""

    def __init__(self) -> None:
        """Install the handler: from here on SIGTERM no longer ends this process."""
        self.asked = False
        self.child: subprocess.Popen[str] | None = None
        signal.signal(signal.SIGTERM, self._handle)

    def _handle(self, _signum: int, _frame: FrameType | None) -> None:
        self.ask()

    def ask(self) -> None:
        """Note the request and pass it on."""
        self.asked = True
        self._forward()

    def forward_to(self, child: subprocess.Popen[str]) -> None:
        """Pass SIGTERM on to ``child`` (which stops and reports)."""
        self.child = child
        self._forward()

    def _forward(self) -> None:
        if self.asked and self.child is not None and self.child.poll() is None:
            self.child.send_signal(signal.SIGTERM)


def arrivals(steps: list[tuple[float, float]], seed: int) -> list[float]:
    """Poisson arrival times (s from the start) following the stepped rates."""
    import numpy as np  # noqa: PLC0415 (not at start-up)

    rng = np.random.default_rng(seed)
    out: list[float] = []
    start = 0.0
    for rate, seconds in steps:
        t = start
        while True:
            t += float(rng.exponential(1.0 / rate))
            if t >= start + seconds:
                break
            out.append(t)
        start += seconds
    return out


def _profile(model: str) -> Callable[[int, float], float]:
    """Latency (ms) of a batch of ``model`` on a share of the reference GPU, per the predictor."""
    from arkgpu.predictor import default_predictor  # noqa: PLC0415 (slow; only here)

    predictor = default_predictor()
    try:
        predictor.latency_ms(model, 1, 1.0)
    except (KeyError, ValueError):
        raise CliError(f"--model: no profile of {model!r}") from None
    return lambda batch, share: predictor.latency_ms(model, batch, share)


class Server:
    """The LC server's batcher over one cubench process."""

    def __init__(
        self,
        args: argparse.Namespace,
        env: dict[str, str],
        latency: Callable[[int, float], float] | None,
    ) -> None:
        """Start the kernel runner with the container's environment."""
        from arkgpu.client import LatencyReporter  # noqa: PLC0415
        from arkgpu.limiter import native  # noqa: PLC0415

        self.args = args
        self.stop = Stop()  # before the runner: a SIGTERM from here on ends the serving
        self.reporter = LatencyReporter(Path(env["ARKGPU_REGION_DIR"]))
        self.runner = subprocess.Popen(
            [str(native.cubench()), "script"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
            user=_user(env),
        )
        self.log: IO[str] | None = None
        self.latency = latency
        self.region = Path(env["ARKGPU_REGION_DIR"])

    def kernel_us(self, size: int) -> float:
        """Device time of a batch of ``size``: from the profile at the share in force, or
        ``base + per * size``."""
        if self.latency is None:
            return float(self.args.base_us + self.args.per_us * size)
        from arkgpu.limiter.region import read_limits  # noqa: PLC0415

        share = max(read_limits(self.region).share_bp / 10_000, 0.01)
        return self.latency(size, min(share, 1.0)) * share * 1000.0

    def run_batch(self, size: int) -> None:
        """One batch's kernel, synchronously, marked in flight."""
        kernel = self.kernel_us(size)
        assert self.runner.stdin is not None
        assert self.runner.stdout is not None
        self.reporter.batch_begin()
        try:
            self.runner.stdin.write(f"async {max(1, round(kernel))}\n")
            self.runner.stdin.flush()
            if not self.runner.stdout.readline():
                raise OSError("arkgpu-cubench ended (fake driver not reachable?)")
        finally:
            self.reporter.batch_end()

    def serve(self, times: list[float]) -> int:
        """Serve every request of ``times``; returns how many were served."""
        pending = deque(times)
        queue: deque[float] = deque()
        t0 = time.monotonic()
        served = 0
        delay = self.args.queue_delay_ms / 1000.0
        while (pending or queue) and not self.stop.asked:
            now = time.monotonic() - t0
            while pending and pending[0] <= now:
                queue.append(pending.popleft())
            if not queue or (len(queue) < self.args.max_batch and now - queue[0] < delay):
                wake = min([pending[0]] if pending else [now + delay], default=now + delay)
                if queue:
                    wake = min(wake, queue[0] + delay)
                time.sleep(max(0.0, min(wake - now, 0.05)))
                continue
            batch = [queue.popleft() for _ in range(min(len(queue), self.args.max_batch))]
            self.run_batch(len(batch))
            done = time.monotonic() - t0
            for arrived in batch:
                self.reporter.report(done - arrived, 1)
                if self.log is not None:
                    self.log.write(json.dumps({"t": done, "latency_s": done - arrived}) + "\n")
            served += len(batch)
        return served

    def close(self) -> None:
        """Stop the kernel runner."""
        if self.runner.stdin is not None:
            self.runner.stdin.close()
        self.runner.wait(timeout=10)
        self.reporter.close()


def lc_command(args: argparse.Namespace) -> int:
    """Run the inference server over the whole load curve; print a JSON summary."""
    latency = _profile(args.model) if args.model else None
    env = _env(args.region)
    server = Server(args, env, latency)
    log = open(args.log.path, "w", encoding="utf-8", buffering=1) if args.log else None  # noqa: SIM115
    server.log = log
    try:
        served = server.serve(arrivals(args.rates, args.seed))
    finally:
        server.close()
        if log is not None:
            log.close()
    print(json.dumps({"served": served, "stopped": server.stop.asked}))
    return 0


def be_command(args: argparse.Namespace) -> int:
    """Run the training loop; print iterations and busy share as JSON."""
    from arkgpu.limiter import native  # noqa: PLC0415

    env = _env(args.region)
    stop = Stop()
    load = subprocess.Popen(
        [str(native.cubench()), "load", f"{args.seconds:g}", f"{args.kernel_us:g}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        user=_user(env),
    )
    stop.forward_to(load)  # it stops and reports
    stdout, stderr = load.communicate()
    if load.returncode != 0 or not stdout.strip():
        raise OSError(f"arkgpu-cubench load failed: {stderr.strip() or load.returncode}")
    report = json.loads(stdout)
    out = {
        "iterations": len(report["t_ns"]),
        "busy_share": report["share"],
        "stopped": bool(report.get("stopped")),
    }
    print(json.dumps(out))
    sys.stdout.flush()
    return 0
