"""``arkgpu colocate``: run the co-location simulator, bench the sharing modes, sensitivity,
and check the ``mps`` mode's fair-split assumption on measured data."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from arkgpu.bench.colocation import ALL_MODES, BenchSpec, json_ready, plot_arkgpu, run_bench
from arkgpu.bench.colocation_sensitivity import CASES, run_sensitivity
from arkgpu.bench.mps_check import mps_fair_split_check
from arkgpu.bench.mps_check import to_json as mps_json
from arkgpu.bench.progress import ProgressReporter
from arkgpu.cli import colocate_tables
from arkgpu.cli.colocate_calibration import register_study
from arkgpu.cli.options import (
    CliError,
    Output,
    jobs_option,
    json_option,
    name_list,
    number,
    plot_option,
    reading,
    seed_option,
    seeds_option,
)
from arkgpu.cli.tables import console
from arkgpu.sim.colocation.running import default_truth
from arkgpu.sim.colocation.scenarios import Scenario, load_scenario, shipped_scenarios
from arkgpu.traces.profiles import default_profile_dir, load_mps_profiles, load_solo_profiles

mode_list = name_list(lambda: ALL_MODES, all_word="all", noun="modes")
"""An argparse type: 'all' or a comma list of sharing modes."""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``colocate run|bench|sensitivity|mps-check``."""
    parser = subparsers.add_parser(
        "colocate", help="co-location simulator (LC + BE on shared GPUs)"
    )
    sub = parser.add_subparsers(dest="colocate_command", required=True, metavar="COMMAND")
    run = sub.add_parser("run", help="one scenario, one mode, one seed")
    _scenario_arg(run)
    run.add_argument(
        "--mode",
        required=True,
        metavar="MODE",
        type=mode_list,
        help=f"sharing mode: one of {', '.join(ALL_MODES)}, or a comma list (required)",
    )
    seed_option(run, 1)
    json_option(run, "the run's document")
    run.set_defaults(handler=_run)
    bench = sub.add_parser("bench", help="every mode over seeds, side by side")
    _bench_args(bench)
    json_option(bench, "the bench document")
    plot_option(bench, "arkgpu's time series (load, LC share, p99 over target)")
    for flag, high, what in (
        ("--peak-factor", 100.0, "scale every LC peak rate by X"),
        ("--predictor-factor", 10.0, "scale every prediction by X (an error test)"),
    ):
        bench.add_argument(
            flag,
            metavar="X",
            type=number(0.0, high, low_open=True),
            default=1.0,
            help=f"{what}, 0 < X <= {high:g} (default: 1.0)",
        )
    bench.set_defaults(handler=_bench)
    sens = sub.add_parser("sensitivity", help="gains at peak 0.5x/1x/1.5x and 10%% predictor error")
    _bench_args(sens)
    json_option(sens, "the five bench documents")
    sens.set_defaults(handler=_sensitivity)
    mps = sub.add_parser(
        "mps-check", help="measured MPS latency vs the fair 1/n split (ParvaGPU A100)"
    )
    json_option(mps, "the summaries and rows")
    mps.set_defaults(handler=_mps_check)
    register_study(sub)  # calibration-study (arkgpu.cli.colocate_calibration)


def _scenario_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--scenario",
        metavar="NAME|TOML",
        default="paper",
        help=f"shipped scenario ({', '.join(shipped_scenarios())}) or a TOML file (default: paper)",
    )


def _bench_args(parser: argparse.ArgumentParser) -> None:
    _scenario_arg(parser)
    parser.add_argument(
        "--modes",
        metavar="MODES",
        type=mode_list,
        default="all",
        help=f"'all' or a comma list of {', '.join(ALL_MODES)} (default: all)",
    )
    seeds_option(parser, "1-5")
    jobs_option(parser, None)


def check_scenario(spec: str) -> Scenario:
    """Load ``--scenario`` and check every service names a model with a measured profile."""
    with reading("--scenario", spec):
        scenario = load_scenario(spec)
    known = default_truth().models()
    services = [(s.name, s.model) for s in scenario.lcs] + [(b.name, b.model) for b in scenario.bes]
    for name, model in services:
        if model not in known:
            raise CliError(
                f"--scenario {spec}: service {name!r} names model {model!r}, "
                f"which has no measured profile (known: {', '.join(known)})"
            )
    return scenario


def _emit(out: Output | None, doc: dict[str, Any]) -> bool:
    """Write ``doc`` as JSON if asked; True when it went to standard output (no table)."""
    if out is None:
        return False
    out.write_json(doc)
    return out.to_stdout


def _run(args: argparse.Namespace) -> int:
    check_scenario(args.scenario)
    spec = BenchSpec(args.scenario, args.mode, (args.seed,))
    doc = json_ready(run_bench(spec, jobs=1))
    if _emit(args.json_out, doc):
        return 0
    out = console()
    out.print(colocate_tables.bench_table(doc))
    out.print(colocate_tables.run_tables(doc))
    return 0


def _bench(args: argparse.Namespace) -> int:
    check_scenario(args.scenario)
    spec = BenchSpec(args.scenario, args.modes, args.seeds, args.peak_factor, args.predictor_factor)
    with ProgressReporter("co-location seeds", len(spec.seeds)) as progress:
        progress.note(f"{len(spec.modes)} modes per seed")
        doc = run_bench(
            spec, args.jobs, keep_series=args.plot is not None, progress=progress.advance
        )
    if not _emit(args.json_out, json_ready(doc)):
        out = console()
        out.print(colocate_tables.bench_table(doc))
        ratios = colocate_tables.ratio_table(doc)
        if ratios is not None:
            out.print(ratios)
    if args.plot is not None and "_arkgpu_run" in doc:
        _plot(doc["_arkgpu_run"], args.plot.path)
    return 0


def _plot(run: Any, path: Path) -> None:
    """Draw arkgpu's time series at ``path``."""
    if plot_arkgpu(run, path) is not None:
        print(f"wrote {path}", file=sys.stderr)


def _sensitivity(args: argparse.Namespace) -> int:
    check_scenario(args.scenario)
    with ProgressReporter("sensitivity cases", len(CASES)) as progress:
        doc = run_sensitivity(args.scenario, args.seeds, args.modes, args.jobs, progress.advance)
    if not _emit(args.json_out, doc):
        console().print(colocate_tables.sensitivity_table(doc))
    return 0


def _mps_check(args: argparse.Namespace) -> int:
    folder = default_profile_dir()
    check = mps_fair_split_check(
        load_solo_profiles(folder / "parvagpu_a100_solo.csv"),
        load_mps_profiles(folder / "parvagpu_a100_mps.csv"),
    )
    doc = mps_json(check)
    if not _emit(args.json_out, doc):
        console().print(colocate_tables.mps_table(doc))
    return 0
