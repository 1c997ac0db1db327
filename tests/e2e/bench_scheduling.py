"""Pods scheduled per second on the real control plane: kube-scheduler alone vs with the extender.

    python -m tests.e2e.bench_scheduling --nodes 1000 --pods 1000 --rounds 3 --json OUT

Starts etcd and kube-apiserver (``controlplane``; the binaries are built once per
machine), creates the nodes through the API concurrently, as kubelets would
register them (GPU capacity, ArkGPU's inventory annotation, Ready), runs the
rounds (``bench_run``), prints each phase and the medians, and writes the report
as JSON: settings, every phase of every round, medians per phase and the ratios
extender/stock. Not part of ``make test`` (minutes); ``test_bench_scheduling``
runs it small on the end-to-end tests' control plane. docs/studies/k8s-scale.md
has the figures.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shlex
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from kubernetes.client.exceptions import ApiException

from . import bench_config as cfg
from .bench_run import run_benchmark
from .controlplane import ControlPlaneConfig, build_control_plane, running_control_plane
from .processes import ControlPlaneError

PROG = "python -m tests.e2e.bench_scheduling"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        """Bad input: one line, exit status 2."""
        sys.stderr.write(f"{PROG}: error: {message}\n")
        sys.exit(2)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {text!r}")
    return value


def _rate(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 0 < value <= 10_000:
        raise argparse.ArgumentTypeError(f"expected pods per second in (0, 10000], got {text!r}")
    return value


def _choices(allowed: tuple[str, ...]) -> Callable[[str], tuple[str, ...]]:
    def parse(text: str) -> tuple[str, ...]:
        chosen = tuple(part.strip() for part in text.split(",") if part.strip())
        unknown = [c for c in chosen if c not in allowed]
        if unknown or not chosen:
            raise argparse.ArgumentTypeError(
                f"expected a comma-separated list of {', '.join(allowed)}, got {text!r}"
            )
        return tuple(a for a in allowed if a in chosen)

    return parse


def build_parser() -> argparse.ArgumentParser:
    """The command line; every option maps to a ``BenchSettings`` field."""
    d = cfg.BenchSettings()
    parser = _Parser(prog=PROG, description=__doc__.split("\n", 1)[0])
    add = parser.add_argument
    add("--nodes", type=_positive, default=d.nodes, help=f"nodes (default {d.nodes})")
    add("--pods", type=_positive, default=d.pods, help=f"pods per phase (default {d.pods})")
    add("--rounds", type=_positive, default=d.rounds, help=f"rounds (default {d.rounds})")
    add("--workers", type=_positive, default=d.workers, help="client threads (default 16)")
    add("--gpus-per-node", type=_positive, default=d.gpus_per_node, help="default 8")
    add("--split-count", type=_positive, default=d.split_count, help="default 10")
    add("--whole-every", type=_positive, default=d.whole_every, help="every n-th pod whole")
    add("--client-qps", type=_positive, default=d.client_qps, help="kube-scheduler QPS, burst")
    add(
        "--phases",
        type=_choices(cfg.PHASES),
        default=d.phases,
        help="stock,null,extender,hami (default stock,extender)",
    )
    add(
        "--modes",
        type=_choices(cfg.MODES),
        default=d.modes,
        help="live,backlog,steady (default all three)",
    )
    add("--steady-rate", type=_rate, default=d.steady_rate, help="pods/s (default 50)")
    add("--extender-setting", action="append", default=[], metavar="'KEY = VALUE'")
    add("--hami-scheduler", type=Path, metavar="BIN", help="HAMi's scheduler (the hami phase)")
    add("--json", type=Path, metavar="OUT", help="write the report here")
    add("--workdir", type=Path, help="certificates, logs, configs (default: a new temp dir)")
    return parser


def settings_from(args: argparse.Namespace) -> cfg.BenchSettings:
    """The parsed command line as settings."""
    return cfg.BenchSettings(
        nodes=args.nodes,
        pods=args.pods,
        rounds=args.rounds,
        gpus_per_node=args.gpus_per_node,
        split_count=args.split_count,
        whole_every=args.whole_every,
        workers=args.workers,
        modes=args.modes,
        steady_rate=args.steady_rate,
        phases=args.phases,
        client_qps=args.client_qps,
        extender_settings=tuple(args.extender_setting),
        hami_scheduler=str(args.hami_scheduler or ""),
    )


def machine() -> dict[str, Any]:
    """What the figures were measured on (the load matters on a shared VM)."""
    return {"cpus": os.cpu_count(), "load_average": os.getloadavg(), "python": sys.version}


def measure(settings: cfg.BenchSettings, workdir: Path, argv: list[str]) -> dict[str, Any]:
    """Starts the control plane (no scheduler of its own), runs the benchmark; the report."""
    started = dt.datetime.now(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    before = machine()
    bin_dir = build_control_plane()
    config = ControlPlaneConfig(
        bin_dir=bin_dir,
        workdir=workdir,
        start_scheduler=False,
        # Nodes arrive Ready: the not-ready taint this plug-in adds would cost a patch each.
        apiserver_args=("--disable-admission-plugins=TaintNodesByCondition",),
    )
    with running_control_plane(config) as plane:
        report = run_benchmark(plane, bin_dir, settings, _progress)
        report["control_plane_startup_s"] = plane.startup_s
    return {
        "command": shlex.join([PROG, *argv]),
        "date": started,
        "machine_before": before,
        "machine_after": machine(),
        **report,
    }


def _progress(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def print_summary(summary: dict[str, Any]) -> None:
    """Medians per mode and phase, and the ratios."""
    for mode, phases in summary.items():
        for phase, figures in phases.items():
            if "_round_ratios_" in phase:
                print(f"{mode:8} {phase:40} {', '.join(f'{r:.3f}' for r in figures)}")
                continue
            if "ratio_" in phase:
                print(f"{mode:8} {phase:40} {figures:.3f}")
                continue
            cells = ", ".join(f"{name} {value:.1f}" for name, value in figures.items())
            print(f"{mode:8} {phase:40} median: {cells}")


def main(argv: list[str] | None = None) -> int:
    """Runs the benchmark; 0, or 1 with one line when the control plane or a phase fails."""
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser()
    args = parser.parse_args(argv)
    if ("hami" in args.phases) != (args.hami_scheduler is not None):
        parser.error("--phases hami and --hami-scheduler BIN go together")
    if args.hami_scheduler is not None and not os.access(args.hami_scheduler, os.X_OK):
        parser.error(f"--hami-scheduler: {args.hami_scheduler}: not an executable file")
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="arkgpu-bench-"))
    _progress(f"work directory (logs, configs): {workdir}")
    try:
        report = measure(settings_from(args), workdir, argv)
    except (ControlPlaneError, AssertionError, ApiException, OSError) as exc:
        sys.stderr.write(f"{PROG}: error: {str(exc).strip()}\n")
        return 1
    print_summary(report["summary"])
    for key in ("extender_over_alone_backlog", "extender_over_alone_live"):
        if key in report:
            print(f"{key}: {report[key]:.3f}")
    for key in ("extender_steady_p99_ms",):
        if key in report:
            print(f"{key}: {report[key]:.3f}")
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
