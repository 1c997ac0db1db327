"""``arkgpu predictor``: fit, evaluate and show the two-level performance predictor."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np
from rich.progress import Progress
from rich.table import Table

from arkgpu.cli import figures
from arkgpu.cli.options import (
    CliError,
    file_output,
    grid_size,
    input_file,
    input_path,
    integer,
    json_option,
    plot_option,
    reading,
    seed_option,
)
from arkgpu.cli.predictor_loading import fit_summary, load_profiles, overlaps
from arkgpu.cli.predictor_sure import calibrated, register_confidence
from arkgpu.cli.tables import Column, console, label, make_table
from arkgpu.model.gpus import REFERENCE_GPU
from arkgpu.predictor import Predictor, default_predictor
from arkgpu.predictor.breakdown import MIN_BIN_TARGETS
from arkgpu.predictor.evaluating import GUARDED, ErrorSummary, Evaluation, evaluate
from arkgpu.predictor.plotting import plot_evaluation, plot_latency_vs_share, share_table
from arkgpu.predictor.splitting import NEW_MODEL_SPLIT, SEEDED_SPLITS, SPLITS, seeds_label
from arkgpu.predictor.timing import time_predictor
from arkgpu.traces.profiles import load_solo_profiles
from arkgpu.traces.profiles_importing import load_igniter_l2_slopes

SHOW_SHARES = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)


def register(subparsers: Any) -> None:
    """Add ``predictor fit``, ``eval``, ``bench`` and ``show``."""
    parser = subparsers.add_parser("predictor", help="the two-level performance predictor")
    commands = parser.add_subparsers(dest="predictor_command", required=True, metavar="COMMAND")
    fit = commands.add_parser("fit", help="fit on canonical profiles and save as JSON")
    _profiles_arguments(fit)
    fit.add_argument(
        "--out",
        metavar="PATH",
        type=file_output,
        required=True,
        help="predictor JSON file to write (folders created; required)",
    )
    fit.add_argument(
        "--calibrate",
        action="store_true",
        help="calibrate the level-1 intervals on held-out folds of these profiles "
        "(tens of seconds; default: the intervals calibrated on the shipped profiles)",
    )
    fit.set_defaults(handler=run_fit)
    ev = commands.add_parser("eval", help="held-out error of the predictor and its baselines")
    _profiles_arguments(ev)
    ev.add_argument(
        "--split",
        metavar="SPLIT",
        choices=sorted(SPLITS),
        default="random",
        help=f"how records are held out: one of {', '.join(sorted(SPLITS))} (default: random)",
    )
    seed_option(ev, 0, "seed of the random split")
    ev.add_argument(
        "--repeats",
        metavar="N",
        type=integer(1),
        default=1,
        help="pool N random splits, seeds N0 .. N0+N-1 where N0 is --seed, and show each "
        "interval bin's lowest and highest coverage among them (random split only; default: 1)",
    )
    ev.add_argument(
        "--new-model-points",
        metavar="BxS",
        type=grid_size,
        help="leave-one-model-out: fit each held-out model on B batches x S shares of its own "
        "points, as if profiled there, instead of one point and the others' shape "
        "(e.g. 3x2; default: one point)",
    )
    json_option(ev, "the report")
    plot_option(ev, "the errors as a bar chart")
    ev.add_argument(
        "--igniter-config",
        metavar="JSONL",
        type=input_file,
        help="iGniter's Algorithm_config_v100.jsonl: adds the igniter-published baseline "
        "(default: without it)",
    )
    ev.set_defaults(handler=run_eval)
    _register_bench(commands)
    _register_show(commands)
    register_confidence(commands)


def _register_bench(commands: Any) -> None:
    bench = commands.add_parser("bench", help="time predictions: fit, one call, a batch")
    bench.add_argument(
        "--queries",
        metavar="N",
        type=integer(1, 10_000_000),
        default=10_000,
        help="queries in one vectorised call, 1 to 10,000,000 (default: 10,000)",
    )
    bench.add_argument(
        "--samples",
        metavar="N",
        type=integer(1, 1001),
        default=21,
        help="timed samples per median, 1 to 1,001 (default: 21)",
    )
    seed_option(bench, 0, "seed of the random queries")
    json_option(bench, "the timings")
    bench.set_defaults(handler=run_bench)


def _register_show(commands: Any) -> None:
    show = commands.add_parser("show", help="table and PNG of latency against share")
    show.add_argument("predictor", type=input_file, help="predictor JSON from 'predictor fit'")
    show.add_argument("--model", metavar="NAME", required=True, help="DNN model (required)")
    show.add_argument(
        "--batch",
        metavar="N",
        type=integer(1, 65_536),
        required=True,
        help="batch size, an integer >= 1 (required)",
    )
    show.add_argument(
        "--gpu",
        metavar="MODEL",
        default=REFERENCE_GPU,
        help=f"GPU model (default: {REFERENCE_GPU})",
    )
    show.add_argument(
        "--plot",
        "--png",
        dest="plot",
        metavar="PATH",
        type=file_output,
        help="figure PNG to write (default: MODEL-bBATCH.png)",
    )
    show.add_argument(
        "--profiles",
        metavar="PATH",
        type=input_path,
        help="canonical profiles to overlay as points (default: none)",
    )
    show.set_defaults(handler=run_show)


def _profiles_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--profiles",
        metavar="PATH",
        type=input_path,
        action="append",
        required=True,
        help="canonical profile folder or solo CSV file; repeat it to fit several profile "
        "sets and GPU models at once (required)",
    )
    parser.add_argument(
        "--gpu", metavar="MODEL", help="use only records of this GPU model (default: all)"
    )
    parser.add_argument(
        "--no-utilisation",
        action="store_true",
        help="drop measured L2/DRAM utilisation, as on a GPU where it was never measured",
    )
    parser.add_argument(
        "--no-mps",
        action="store_true",
        help="leave out *_mps.csv process groups from level 2 (default: use them)",
    )


def run_fit(args: argparse.Namespace) -> int:
    """Fit and save."""
    profiles = load_profiles(args)
    predictor = Predictor.fit(profiles.solo, profiles.groups)
    if args.calibrate:
        predictor = calibrated(predictor, profiles.solo)
    predictor.save(args.out.path)
    for line in overlaps(args.profiles):
        console(stderr=True).print(line)
    print(
        f"{args.out}: {len(predictor.curves)} level-1 curves, {len(profiles.groups)} "
        f"co-located records at level 2, from {len(profiles.sources)} profile set(s)"
    )
    print("\n".join(fit_summary(profiles, predictor)))
    return 0


def run_eval(args: argparse.Namespace) -> int:
    """Evaluate on the chosen split and print a table or JSON."""
    if args.repeats > 1 and args.split not in SEEDED_SPLITS:
        raise CliError(f"--repeats: split {args.split!r} holds out the same records every time")
    if args.new_model_points and args.split != NEW_MODEL_SPLIT:
        raise CliError(f"--new-model-points: applies to leave-one-model-out, not {args.split!r}")
    profiles = load_profiles(args)
    slopes = None
    if args.igniter_config:
        with reading("--igniter-config", args.igniter_config):
            slopes = load_igniter_l2_slopes(args.igniter_config)
    to_stdout = args.json_out is not None and args.json_out.to_stdout
    with Progress(console=console(stderr=True), transient=True, disable=to_stdout) as progress:
        task = progress.add_task(f"{args.split} folds", total=None)

        def step(done: int, total: int) -> None:
            progress.update(task, completed=done, total=total)

        result = evaluate(
            profiles.solo,
            profiles.groups,
            args.split,
            seed=args.seed,
            repeats=args.repeats,
            new_model_points=args.new_model_points,
            on_fold=step,
            published_l2_slopes=slopes,
        )
    if args.json_out is not None:
        args.json_out.write_json(result.to_dict())
    if not to_stdout:
        console().print(_eval_table(result))
        for by, title in (("strength", "co-located / solo latency"), ("corunners", "co-runners")):
            if result.level2.count:
                console().print(_breakdown_table(result, by, title))
        if result.level2.count:
            console().print(_coverage_table(result))
    if args.plot:
        plot_evaluation(result.to_dict(), args.plot.path)
    return 0


def _eval_table(result: Evaluation) -> Table:
    table = make_table(
        f"held-out error, split {result.split} ({_seeds(result)}{_points(result)})",
        (
            label("level"),
            label("predictor"),
            Column("mean abs. % error", "lower"),
            Column("p90 abs. % error", "lower"),
            Column("records n"),
        ),
        na="no held-out record this predictor covers (n = 0)",
    )
    rows: list[tuple[str, str, ErrorSummary]] = [
        ("1", "arkgpu formula", result.level1),
        *[("1", name, s) for name, s in result.baselines["level1"].items()],
        ("2", GUARDED, result.level2),
        *[("2", name, s) for name, s in result.baselines["level2"].items()],
    ]
    for level, name, summary in rows:
        table.add_row(
            level,
            name,
            figures.percent(summary.mape_pct),
            figures.percent(summary.p90_ape_pct),
            figures.count(summary.count),
        )
    return table


def _breakdown_table(result: Evaluation, by: str, title: str) -> Table:
    """Level-2 MAPE (and targets n) of each level-2 predictor, one row per bin."""
    table_of = result.level2_breakdown[by]
    names = list(table_of)
    bins = list(dict.fromkeys(b for name in names for b in table_of[name]))
    table = make_table(
        f"level-2 held-out error by {title}, split {result.split}: MAPE % (targets n)",
        (label(title), *(Column(name, "lower") for name in names)),
        na="no held-out target in this bin this predictor covers",
    )
    for b in bins:
        cells = []
        for name in names:
            summary = table_of[name].get(b, ErrorSummary(None, None, 0))
            cells.append(f"{figures.percent(summary.mape_pct)} ({summary.count})")
        table.add_row(b, *cells)
    return table


def _coverage_table(result: Evaluation) -> Table:
    """Share of held-out targets inside level 2's 90% interval, per strength bin and kind
    (with the lowest and highest of the repeats when several were pooled)."""
    spread = result.repeats > 1
    columns = [label("bin"), Column("inside")]
    if spread:
        columns.append(Column(f"lowest - highest of the {result.repeats} splits"))
    table = make_table(
        f"level-2 90% intervals, split {result.split} ({_seeds(result)}): held-out targets "
        "inside (n)",
        tuple(columns),
        na="no held-out target in this bin"
        + (f"; range: no split with {MIN_BIN_TARGETS} in the bin" if spread else ""),
    )
    for by, bins in result.level2_coverage.items():
        for name, cover in bins.items():
            cells = [f"{figures.percent(_pct(cover.coverage))} ({cover.count})"]
            if spread:
                ends = (figures.percent(_pct(cover.lowest)), figures.percent(_pct(cover.highest)))
                cells.append("n/a" if cover.lowest is None else " - ".join(ends))
            table.add_row(f"{by} {name}", *cells)
    return table


def _points(result: Evaluation) -> str:
    if result.new_model_points is None:
        return ""
    batches, shares = result.new_model_points
    return f"; a held-out model fitted on {batches} batches x {shares} shares of its own points"


def _seeds(result: Evaluation) -> str:
    return seeds_label(result.seed, result.repeats)


def _pct(fraction: float | None) -> float | None:
    return None if fraction is None else 100.0 * fraction


def run_bench(args: argparse.Namespace) -> int:
    """Time the default predictor and print the medians."""
    timings = time_predictor(
        default_predictor, np.random.default_rng(args.seed), args.queries, args.samples
    )
    if args.json_out is not None:
        args.json_out.write_json(timings.to_dict())
        if args.json_out.to_stdout:
            return 0
    table = make_table(
        f"predictor cost, medians of {timings.samples} samples (wall clock)",
        (label("what"), Column("median time", "lower")),
    )
    table.add_row("fit default predictor (shipped profiles)", figures.duration(timings.fit_s))
    table.add_row("one latency_ms", figures.scaled_duration(timings.one_latency_us, figures.US))
    table.add_row(
        "one colocated_latency_ms (1 co-runner)",
        figures.scaled_duration(timings.one_colocated_us, figures.US),
    )
    table.add_row(
        "one colocated_latency_ms, workloads never asked before",
        figures.scaled_duration(timings.fresh_colocated_us, figures.US),
    )
    table.add_row(
        "  the same two, CPU time of this process",
        f"{figures.scaled_duration(timings.one_colocated_cpu_us, figures.US)} / "
        f"{figures.scaled_duration(timings.fresh_colocated_cpu_us, figures.US)}",
    )
    table.add_row(
        f"latency_ms_many, {timings.queries:,} queries",
        figures.scaled_duration(timings.many_latency_ms, figures.MS),
    )
    console().print(table)
    return 0


def run_show(args: argparse.Namespace) -> int:
    """Print latency against share and draw it."""
    with reading("predictor file", args.predictor):
        predictor = Predictor.load(args.predictor)
    measured: list[Any] = []
    if args.profiles:
        with reading("--profiles", args.profiles):
            measured = load_solo_profiles(args.profiles)
    try:
        rows = share_table(predictor, args.model, args.batch, args.gpu, SHOW_SHARES)
    except (KeyError, ValueError) as exc:
        reason = exc.args[0] if exc.args else exc
        raise CliError(
            f"--model {args.model} --batch {args.batch} --gpu {args.gpu}: {reason}"
        ) from None
    table = make_table(
        f"{args.model}, batch {args.batch}, on {args.gpu} (predicted)",
        (
            Column("compute share"),
            Column("latency", "lower"),
            Column("throughput", "higher"),
            Column("training iteration*", "lower"),
        ),
        notes=(
            f"*: estimated as inference latency x {predictor.config.training_factor:g} "
            "(forward+backward), not measured",
        ),
    )
    for share, latency, throughput, training in rows:
        table.add_row(
            f"{share * 100:.0f}%",
            figures.duration(latency / 1e3),
            figures.rate(throughput, "items"),
            figures.duration(training / 1e3),
        )
    out = console()
    out.print(table)
    png = args.plot.path if args.plot else Path(f"{args.model}-b{args.batch}.png")
    plot_latency_vs_share(predictor, args.model, args.batch, args.gpu, png, measured=measured)
    out.print(f"figure: {png}")
    return 0
