"""``arkgpu predictor``: fit, evaluate and show the two-level performance predictor."""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from arkgpu.model.gpus import REFERENCE_GPU
from arkgpu.predictor import Predictor, default_predictor
from arkgpu.predictor.evaluating import ErrorSummary, Evaluation, evaluate
from arkgpu.predictor.plotting import plot_evaluation, plot_latency_vs_share, share_table
from arkgpu.predictor.splitting import SPLITS
from arkgpu.predictor.timing import time_predictor
from arkgpu.traces.profiles import load_pair_profiles, load_solo_profiles
from arkgpu.traces.profiles_importing import load_igniter_l2_slopes

SHOW_SHARES = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)


def register(subparsers: Any) -> None:
    """Add ``predictor fit``, ``predictor eval`` and ``predictor show``."""
    parser = subparsers.add_parser("predictor", help="the two-level performance predictor")
    commands = parser.add_subparsers(dest="predictor_command", required=True, metavar="COMMAND")
    fit = commands.add_parser("fit", help="fit on canonical profiles and save as JSON")
    _profiles_arguments(fit)
    fit.add_argument("--out", type=Path, required=True, help="predictor JSON to write")
    fit.set_defaults(handler=run_fit)
    ev = commands.add_parser("eval", help="held-out error of the predictor and its baselines")
    _profiles_arguments(ev)
    ev.add_argument("--split", choices=sorted(SPLITS), default="random")
    ev.add_argument("--seed", type=int, default=0, help="seed of the random split")
    ev.add_argument("--json", action="store_true", help="print the report as JSON")
    ev.add_argument("--plot", type=Path, help="also draw the errors as a bar chart (PNG)")
    ev.add_argument(
        "--igniter-config",
        type=Path,
        help="iGniter's Algorithm_config_v100.jsonl: adds the igniter-published baseline",
    )
    ev.set_defaults(handler=run_eval)
    bench = commands.add_parser("bench", help="time predictions (cost figures of the issue)")
    bench.add_argument("--queries", type=int, default=10_000, help="vectorised call size")
    bench.add_argument("--samples", type=int, default=21, help="samples per median")
    bench.add_argument("--seed", type=int, default=0, help="seed of the random queries")
    bench.add_argument("--json", action="store_true", help="print the figures as JSON")
    bench.set_defaults(handler=run_bench)
    show = commands.add_parser("show", help="table and PNG of latency against share")
    show.add_argument("predictor", type=Path, help="predictor JSON from 'predictor fit'")
    show.add_argument("--model", required=True)
    show.add_argument("--batch", type=int, required=True)
    show.add_argument("--gpu", default=REFERENCE_GPU)
    show.add_argument("--png", type=Path, help="figure path (default MODEL-bBATCH.png)")
    show.add_argument("--profiles", type=Path, help="canonical profiles to overlay as points")
    show.set_defaults(handler=run_show)


def _profiles_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--profiles", type=Path, required=True, help="canonical profile dir/file")
    parser.add_argument("--gpu", help="use only records of this GPU model")
    parser.add_argument(
        "--no-utilisation",
        action="store_true",
        help="drop measured L2/DRAM utilisation, as on a GPU where it was never measured",
    )


def _load(args: argparse.Namespace) -> tuple[list[Any], list[Any]]:
    solo = load_solo_profiles(args.profiles)
    pairs = load_pair_profiles(args.profiles) if args.profiles.is_dir() else []
    if args.gpu:
        solo = [r for r in solo if r.gpu == args.gpu]
        pairs = [p for p in pairs if p.gpu == args.gpu]
    if args.no_utilisation:
        solo = [dataclasses.replace(r, l2_util_pct=None, dram_util_pct=None) for r in solo]
    if not solo:
        raise ValueError(f"no solo profile records in {args.profiles}")
    return solo, pairs


def run_fit(args: argparse.Namespace) -> int:
    """Fit and save."""
    solo, pairs = _load(args)
    predictor = Predictor.fit(solo, pairs)
    predictor.save(args.out)
    print(f"{args.out}: {len(predictor.curves)} level-1 curves, {len(pairs)} pairs at level 2")
    return 0


def run_eval(args: argparse.Namespace) -> int:
    """Evaluate on the chosen split and print a table or JSON."""
    solo, pairs = _load(args)
    console = Console(stderr=True)
    with Progress(console=console, transient=True, disable=args.json) as progress:
        task = progress.add_task(f"{args.split} folds", total=None)

        def step(done: int, total: int) -> None:
            progress.update(task, completed=done, total=total)

        slopes = load_igniter_l2_slopes(args.igniter_config) if args.igniter_config else None
        result = evaluate(
            solo, pairs, args.split, seed=args.seed, on_fold=step, published_l2_slopes=slopes
        )
    if args.json:
        print(json.dumps(result.to_dict(), indent=1))
    else:
        Console().print(_eval_table(result))
    if args.plot:
        plot_evaluation(result.to_dict(), args.plot)
    return 0


def _cell(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def _eval_table(result: Evaluation) -> Table:
    table = Table(title=f"held-out error, split {result.split} (seed {result.seed})")
    for column in ("level", "predictor", "MAPE %", "p90 APE %", "n"):
        table.add_column(column)
    rows: list[tuple[str, str, ErrorSummary]] = [
        ("1", "arkgpu formula", result.level1),
        *[("1", name, s) for name, s in result.baselines["level1"].items()],
        ("2", "arkgpu contention", result.level2),
        *[("2", name, s) for name, s in result.baselines["level2"].items()],
    ]
    for level, name, summary in rows:
        table.add_row(
            level, name, _cell(summary.mape_pct), _cell(summary.p90_ape_pct), str(summary.count)
        )
    return table


def run_bench(args: argparse.Namespace) -> int:
    """Time the default predictor and print the medians."""
    timings = time_predictor(
        default_predictor, np.random.default_rng(args.seed), args.queries, args.samples
    )
    if args.json:
        print(json.dumps(timings.to_dict(), indent=1))
        return 0
    table = Table(title=f"predictor cost, medians of {timings.samples} samples (wall clock)")
    table.add_column("what")
    table.add_column("median", justify="right")
    table.add_row("fit default predictor (shipped profiles)", f"{timings.fit_s:.3f} s")
    table.add_row("one latency_ms", f"{timings.one_latency_us:.2f} µs")
    table.add_row("one colocated_latency_ms (1 co-runner)", f"{timings.one_colocated_us:.2f} µs")
    table.add_row(
        f"latency_ms_many, {timings.queries} queries", f"{timings.many_latency_ms:.2f} ms"
    )
    Console().print(table)
    return 0


def run_show(args: argparse.Namespace) -> int:
    """Print latency against share and draw it."""
    predictor = Predictor.load(args.predictor)
    table = Table(title=f"{args.model}, batch {args.batch}, on {args.gpu} (predicted)")
    for column in ("share %", "latency ms", "throughput /s", "training iteration ms*"):
        table.add_column(column, justify="right")
    for share, latency, throughput, training in share_table(
        predictor, args.model, args.batch, args.gpu, SHOW_SHARES
    ):
        table.add_row(
            f"{share * 100:.0f}", f"{latency:.2f}", f"{throughput:.1f}", f"{training:.2f}"
        )
    console = Console()
    console.print(table)
    factor = predictor.config.training_factor
    console.print(f"* estimated: inference latency x {factor:g} (forward+backward), not measured")
    png = args.png or Path(f"{args.model}-b{args.batch}.png")
    measured = load_solo_profiles(args.profiles) if args.profiles else []
    plot_latency_vs_share(predictor, args.model, args.batch, args.gpu, png, measured=measured)
    console.print(f"figure: {png}")
    return 0
