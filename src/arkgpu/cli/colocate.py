"""``arkgpu colocate``: run the co-location simulator, bench the sharing modes, sensitivity,
and check the ``mps`` mode's fair-split assumption on measured data."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from arkgpu.bench.colocation import (
    BenchSpec,
    format_table,
    json_ready,
    parse_modes,
    parse_seeds,
    plot_arkgpu,
    run_bench,
)
from arkgpu.bench.colocation_sensitivity import format_sensitivity, run_sensitivity
from arkgpu.bench.mps_check import format_table as format_mps_table
from arkgpu.bench.mps_check import mps_fair_split_check
from arkgpu.bench.mps_check import to_json as mps_json
from arkgpu.traces.profiles import default_profile_dir, load_mps_profiles, load_solo_profiles


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``colocate run|bench|sensitivity|mps-check``."""
    parser = subparsers.add_parser(
        "colocate", help="co-location simulator (LC + BE on shared GPUs)"
    )
    sub = parser.add_subparsers(dest="colocate_command", required=True, metavar="SUBCOMMAND")
    run = sub.add_parser("run", help="one scenario, one mode, one seed")
    run.add_argument("--scenario", default="paper", help="shipped name (paper, large) or TOML path")
    run.add_argument("--mode", required=True, help="sharing mode (k8s-native, mps, arkgpu, ...)")
    run.add_argument("--seed", type=int, default=1)
    run.add_argument("--json", action="store_true", help="print JSON instead of a table")
    run.set_defaults(handler=_run)
    bench = sub.add_parser("bench", help="every mode over seeds, side by side")
    _bench_args(bench)
    bench.add_argument("--json", dest="json_out", type=Path, help="write the JSON document here")
    bench.add_argument("--plot", type=Path, help="write arkgpu's time-series PNG into this folder")
    bench.add_argument("--peak-factor", type=float, default=1.0, help="scale every LC peak rate")
    bench.add_argument(
        "--predictor-factor", type=float, default=1.0, help="scale every prediction (error test)"
    )
    bench.set_defaults(handler=_bench)
    sens = sub.add_parser("sensitivity", help="gains at peak 0.5x/1x/1.5x and 10%% predictor error")
    _bench_args(sens)
    sens.add_argument("--json", dest="json_out", type=Path, help="write the JSON document here")
    sens.set_defaults(handler=_sensitivity)
    mps = sub.add_parser(
        "mps-check", help="measured MPS latency vs the fair 1/n split (ParvaGPU A100)"
    )
    mps.add_argument("--json", action="store_true", help="print JSON instead of a table")
    mps.set_defaults(handler=_mps_check)


def _bench_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scenario", default="paper")
    parser.add_argument("--modes", default="all", help="'all' or a comma list")
    parser.add_argument("--seeds", default="1-5", help="N, N-M or N,M,...")
    parser.add_argument("--jobs", type=int, default=None, help="worker processes (default: CPUs)")


def _progress(message: str) -> None:
    print(f"  {message}", file=sys.stderr, flush=True)


def _run(args: argparse.Namespace) -> int:
    spec = BenchSpec(args.scenario, parse_modes(args.mode), (args.seed,))
    doc = json_ready(run_bench(spec, jobs=1))
    if args.json:
        print(json.dumps(doc, indent=2))
        return 0
    print(format_table(doc))
    for entry in doc["modes"].values():
        for lc in entry["lc"]:
            p99 = "-" if lc["p99_ms"] is None else f"{lc['p99_ms']:.1f}"
            print(
                f"  LC {lc['name']:14s} {lc['state']:8s} SLO {lc['slo_attainment_pct']:6.2f}% "
                f"p99 {p99:>7s} ms (target {lc['target_ms']:.0f})"
            )
        for be in entry["be"]:
            print(
                f"  BE {be['name']:14s} {be['state']:8s} {be['throughput_norm']:.3f} of a whole GPU"
            )
    return 0


def _bench(args: argparse.Namespace) -> int:
    spec = BenchSpec(
        args.scenario,
        parse_modes(args.modes),
        parse_seeds(args.seeds),
        args.peak_factor,
        args.predictor_factor,
    )
    doc = run_bench(spec, args.jobs, keep_series=args.plot is not None, progress=_progress)
    print(format_table(doc))
    if args.json_out:
        args.json_out.write_text(json.dumps(json_ready(doc), indent=2), encoding="utf-8")
    if args.plot and "_arkgpu_run" in doc:
        for path in plot_arkgpu(doc["_arkgpu_run"], args.plot):
            print(f"wrote {path}")
    return 0


def _sensitivity(args: argparse.Namespace) -> int:
    doc = run_sensitivity(
        args.scenario, parse_seeds(args.seeds), parse_modes(args.modes), args.jobs, _progress
    )
    print(format_sensitivity(doc))
    if args.json_out:
        args.json_out.write_text(json.dumps(doc, indent=2), encoding="utf-8")
    return 0


def _mps_check(args: argparse.Namespace) -> int:
    folder = default_profile_dir()
    check = mps_fair_split_check(
        load_solo_profiles(folder / "parvagpu_a100_solo.csv"),
        load_mps_profiles(folder / "parvagpu_a100_mps.csv"),
    )
    print(json.dumps(mps_json(check), indent=2) if args.json else format_mps_table(check))
    return 0
