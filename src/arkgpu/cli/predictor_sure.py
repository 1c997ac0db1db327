"""``arkgpu predictor calibrate`` and ``ask``: how sure the predictor is, and how well it knows."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from rich.progress import Progress

from arkgpu.cli import figures
from arkgpu.cli.options import (
    CliError,
    input_file,
    input_path,
    integer,
    json_option,
    number,
    reading,
)
from arkgpu.cli.tables import Column, console, label, make_table
from arkgpu.model.gpus import REFERENCE_GPU
from arkgpu.predictor import Predictor
from arkgpu.predictor.intervals import Calibration, calibrate, held_out_residuals
from arkgpu.predictor.workloads import UnknownModelError, Workload
from arkgpu.traces.profiles import SoloRecord


def register_confidence(commands: Any) -> None:
    """Add ``predictor calibrate`` and ``predictor ask``."""
    cal = commands.add_parser(
        "calibrate", help="level-1 intervals per kind of query, with held-out coverage"
    )
    cal.add_argument(
        "--profiles",
        metavar="PATH",
        type=input_path,
        action="append",
        required=True,
        help="canonical profile folder or solo CSV file; repeatable (required)",
    )
    cal.add_argument(
        "--gpu", metavar="MODEL", help="use only records of this GPU model (default: all)"
    )
    json_option(cal, "the intervals and coverage")
    cal.set_defaults(handler=run_calibrate, no_utilisation=False, no_mps=True)
    ask = commands.add_parser("ask", help="one level-1 prediction with its interval and why")
    ask.add_argument("predictor", type=input_file, help="predictor JSON from 'predictor fit'")
    ask.add_argument("--model", metavar="NAME", required=True, help="DNN model (required)")
    ask.add_argument(
        "--batch",
        metavar="N",
        type=integer(1, 65_536),
        required=True,
        help="batch size, an integer >= 1 (required)",
    )
    ask.add_argument(
        "--share",
        metavar="S",
        type=number(0.0, 1.0, low_open=True),
        default=1.0,
        help="compute share in (0, 1] (default: 1, the whole GPU)",
    )
    ask.add_argument(
        "--gpu",
        metavar="MODEL",
        default=REFERENCE_GPU,
        help=f"GPU model (default: {REFERENCE_GPU})",
    )
    ask.add_argument(
        "--with",
        dest="corunners",
        metavar="MODEL:BATCH:SHARE",
        type=corunner,
        action="append",
        default=[],
        help="a co-runner on the same GPU (repeatable): the answer is level 2's, co-located "
        "latency with its interval (default: none, level 1 alone)",
    )
    json_option(ask, "the answer")
    ask.set_defaults(handler=run_ask)


def corunner(text: str) -> Workload:
    """A ``MODEL:BATCH:SHARE`` argument as a workload."""
    parts = text.split(":")
    if len(parts) != 3:
        raise argparse.ArgumentTypeError(f"{text!r}: expected MODEL:BATCH:SHARE, e.g. vgg19:8:0.5")
    try:
        return Workload(parts[0], int(parts[1]), float(parts[2]))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r}: {exc}") from None


def calibrated(predictor: Predictor, solo: Sequence[SoloRecord]) -> Predictor:
    """``predictor`` with its intervals calibrated on held-out folds of ``solo``."""
    result = calibrate(held_out_residuals(solo), predictor.intervals)
    return predictor.with_intervals(result.intervals)


def run_calibrate(args: argparse.Namespace) -> int:
    """Calibrate and print the intervals with their coverage."""
    from arkgpu.cli.predictor_loading import load_profiles  # noqa: PLC0415 (no cycle)

    profiles = load_profiles(args)
    to_stdout = args.json_out is not None and args.json_out.to_stdout
    with Progress(console=console(stderr=True), transient=True, disable=to_stdout) as progress:
        progress.add_task("held-out folds", total=None)
        result = calibrate(
            held_out_residuals(profiles.solo), Predictor.fit(profiles.solo).intervals
        )
    if args.json_out is not None:
        args.json_out.write_json(result.to_dict())
    if not to_stdout:
        console().print(_calibration_table(result))
    return 0


def _calibration_table(result: Calibration) -> Any:
    table = make_table(
        "level-1 intervals (5th-95th percentile of measured / predicted, held out)",
        (
            label("kind of query"),
            Column("low"),
            Column("high"),
            Column("coverage (nominal 90%)", "higher"),
            Column("points n"),
        ),
        na="too few held-out points of this kind",
    )
    for kind, row in result.to_dict().items():
        assert isinstance(row, dict)
        coverage = row["coverage"]
        table.add_row(
            kind,
            f"{row['low_pct']:+.1f}%",
            f"{row['high_pct']:+.1f}%",
            figures.percent(None if coverage is None else 100.0 * coverage),
            figures.count(row["count"]),
        )
    return table


def run_ask(args: argparse.Namespace) -> int:
    """Print one prediction with its interval, kind and reasons."""
    with reading("predictor file", args.predictor):
        predictor = Predictor.load(args.predictor)
    if args.corunners:
        return _ask_pair(predictor, args)
    try:
        answer = predictor.confidence(args.model, args.batch, args.share, args.gpu)
    except (UnknownModelError, ValueError) as exc:
        reason = exc.args[0] if exc.args else exc
        raise CliError(
            f"--model {args.model} --batch {args.batch} --share {args.share} "
            f"--gpu {args.gpu}: {reason}"
        ) from None
    if args.json_out is not None:
        args.json_out.write_json(answer.to_dict())
        if args.json_out.to_stdout:
            return 0
    sure = "confident" if answer.confident else "NOT confident: " + "; ".join(answer.reasons)
    console().print(
        f"{args.model} batch {args.batch} share {args.share:g} on {args.gpu}: "
        f"{answer.latency_ms:.3f} ms (interval {answer.low_ms:.3f}-{answer.high_ms:.3f} ms, "
        f"{answer.kind}); {sure}"
    )
    return 0


def _ask_pair(predictor: Predictor, args: argparse.Namespace) -> int:
    """Print one level-2 prediction with its interval and kind."""
    others = ", ".join(f"{w.model}:{w.batch}:{w.share:g}" for w in args.corunners)
    try:
        target = Workload(args.model, args.batch, args.share)
        answer = predictor.pair_confidence(target, args.corunners, args.gpu)
    except (UnknownModelError, ValueError) as exc:
        reason = exc.args[0] if exc.args else exc
        raise CliError(f"--model {args.model} --with {others} --gpu {args.gpu}: {reason}") from None
    if args.json_out is not None:
        args.json_out.write_json(answer.to_dict())
        if args.json_out.to_stdout:
            return 0
    sure = "confident" if answer.confident else "NOT confident: never measured next to these"
    console().print(
        f"{args.model} batch {args.batch} share {args.share:g} next to {others} on {args.gpu}: "
        f"{answer.latency_ms:.3f} ms (interval {answer.low_ms:.3f}-{answer.high_ms:.3f} ms, "
        f"{answer.kind}); {sure}"
    )
    return 0
