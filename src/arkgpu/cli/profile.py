"""``arkgpu profile run``: measure canonical GPU profiles on this node's GPU, under the limiter.

Every model alone at every batch and compute share, then pairs at chosen
share splits; writes ``DIR/<gpu>_solo.csv`` and ``DIR/<gpu>_pairs.csv``
(readable by ``arkgpu predictor fit --profiles DIR``), resumes where an
interrupted run stopped. docs/PROFILING.md.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from dataclasses import replace
from pathlib import Path
from types import FrameType
from typing import Any

from arkgpu.cli.argtypes import ArgType, CliError, integer, number
from arkgpu.cli.options import input_file, output_dir

BACKENDS = ("torch", "fake")


def _list(kind: str, convert: Any, ok: Any, bad: tuple[str, ...]) -> ArgType[tuple[Any, ...]]:
    def parse(text: str) -> tuple[Any, ...]:
        try:
            values = tuple(convert(v) for v in text.split(","))
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected a comma list of {kind}, got {text!r}"
            ) from None
        if not all(ok(v) for v in values):
            raise argparse.ArgumentTypeError(f"expected a comma list of {kind}, got {text!r}")
        return values

    return ArgType(parse, bad, kind)


BATCHES = _list("integers 1 to 4096", int, lambda v: 1 <= v <= 4096, ("0", "a", "", "1.5"))
SHARES = _list("shares in (0, 1]", float, lambda v: 0 < v <= 1, ("0", "1.5", "nan", "x", ""))
SHAPE = _list("integers 1 to 4096", int, lambda v: 1 <= v <= 4096, ("0", "3,x", ""))


def _split(text: str) -> tuple[float, float]:
    a, colon, b = text.partition(":")
    if not colon:
        raise ValueError(text)
    return float(a), float(b)


PAIR_SHARES = _list(
    "A:B share splits (each in (0, 1], A + B <= 1)",
    _split,
    lambda v: 0 < v[0] <= 1 and 0 < v[1] <= 1 and v[0] + v[1] <= 1 + 1e-9,
    ("0.5", "0.7:0.7", "a:b", ""),
)


def _models(text: str) -> tuple[str, ...]:
    models = tuple(m.strip() for m in text.split(",") if m.strip())
    if not models:
        raise argparse.ArgumentTypeError(f"expected a comma list of models, got {text!r}")
    return models


MODELS = ArgType(_models, ("", ","), "models")


def register(subparsers: Any) -> None:
    """Add ``profile run``."""
    parser = subparsers.add_parser("profile", help="measure GPU profiles on this node's GPU")
    sub = parser.add_subparsers(dest="profile_command", required=True, metavar="COMMAND")
    run = sub.add_parser("run", help="profile models alone and in pairs under the limiter")
    run.add_argument(
        "--backend",
        metavar="NAME",
        choices=BACKENDS,
        default="torch",
        help="torch (PyTorch on the real GPU) or fake (kernels on the fake driver); default torch",
    )
    run.add_argument(
        "--plan",
        metavar="FILE",
        type=input_file,
        help="a plan in TOML (docs/PROFILING.md); options given override it (default: none)",
    )
    run.add_argument(
        "--models",
        metavar="LIST",
        type=MODELS,
        help="comma list: torchvision names or TorchScript files (NAME=PATH) for torch; "
        "fake-tiny, fake-small, fake-mid, fake-large or NAME:BASE_US:PER_US for fake "
        "(default: the backend's default plan, docs/PROFILING.md)",
    )
    run.add_argument(
        "--batches", metavar="LIST", type=BATCHES, help="batch sizes (default: the plan's)"
    )
    run.add_argument(
        "--shares", metavar="LIST", type=SHARES, help="compute shares (default: the plan's)"
    )
    _pair_options(run)
    _timing_options(run)
    run.add_argument(
        "--device",
        metavar="N",
        type=integer(0, 63),
        default=0,
        help="NVML index of the GPU (default 0)",
    )
    run.add_argument(
        "--gpu", metavar="NAME", help="the profiles' gpu column (default: from NVML's name)"
    )
    run.add_argument(
        "--input-shape",
        metavar="C,H,W",
        type=SHAPE,
        default=(3, 224, 224),
        help="one request's input tensor shape, torch backend (default 3,224,224)",
    )
    run.add_argument(
        "--out", metavar="DIR", type=output_dir, required=True, help="output folder (required)"
    )
    run.add_argument(
        "--dry-run", action="store_true", help="print the plan and its expected time only"
    )
    run.set_defaults(handler=run_command)


def _pair_options(run: argparse.ArgumentParser) -> None:
    run.add_argument(
        "--pairs",
        metavar="SPEC",
        help="all (every two models), none, or A+B,C+D (default: the plan's; all when "
        "--models is given)",
    )
    run.add_argument(
        "--pair-batches",
        metavar="LIST",
        type=BATCHES,
        help="batch sizes of the pairs (default: the plan's)",
    )
    run.add_argument(
        "--pair-shares",
        metavar="A:B,...",
        type=PAIR_SHARES,
        help="share splits of the pairs (default: the plan's)",
    )


def _timing_options(run: argparse.ArgumentParser) -> None:
    run.add_argument(
        "--warmup-s",
        metavar="S",
        type=number(0.0, 600.0),
        help="warm-up per point, s (default: the plan's)",
    )
    run.add_argument(
        "--measure-s",
        metavar="S",
        type=number(0.0, 3600.0, low_open=True),
        help="measuring window per point, s (default: the plan's)",
    )
    run.add_argument(
        "--min-iterations",
        metavar="N",
        type=integer(1, 100_000),
        help="fewest batches per point (default: the plan's)",
    )


def build_plan(args: argparse.Namespace) -> Any:
    """The plan: the backend's default, then ``--plan``'s fields, then the options given."""
    from arkgpu.profiling.plan_files import pairs_from, plan_from_file  # noqa: PLC0415
    from arkgpu.profiling.plans import default_plan  # noqa: PLC0415

    base = default_plan(args.backend)
    if args.plan is not None:
        base = plan_from_file(args.plan, base)
    models = args.models or base.models
    timing = base.timing
    for field in ("warmup_s", "measure_s", "min_iterations"):
        if getattr(args, field) is not None:
            timing = replace(timing, **{field: getattr(args, field)})
    pairs = base.pairs if args.models is None else pairs_from("all", models)
    if args.pairs is not None:
        try:
            pairs = pairs_from(args.pairs, models)
        except ValueError as exc:
            raise CliError(f"--pairs: {exc}") from None
    return replace(
        base,
        models=models,
        batches=args.batches or base.batches,
        shares=args.shares or base.shares,
        pairs=pairs,
        pair_batches=args.pair_batches or base.pair_batches,
        pair_shares=args.pair_shares or base.pair_shares,
        timing=timing,
    )


def _backend(args: argparse.Namespace) -> Any:
    if args.backend == "fake":
        from arkgpu.profiling.workers import FakeBackend  # noqa: PLC0415

        state = os.environ.get("FAKEGPU_STATE") or "/dev/shm/arkgpu-fakegpu"
        return FakeBackend(Path(state))
    from arkgpu.profiling.torch_backend import TorchBackend  # noqa: PLC0415

    return TorchBackend(args.device, tuple(args.input_shape))


def _plan_text(plan: Any, startup_s: float) -> str:
    from arkgpu.profiling.plans import estimate_s, point_s  # noqa: PLC0415
    from arkgpu.profiling.progress import duration  # noqa: PLC0415

    solo, pairs = len(plan.solo_points()), len(plan.pair_points())
    expected = estimate_s(plan, startup_s)
    return (
        f"{len(plan.models)} models ({', '.join(plan.models)}): {solo} solo + {pairs} pair "
        f"points x {point_s(plan.timing):g} s + {len(plan.models)} workers x {startup_s:g} s "
        f"= expected {duration(expected)} ({expected:.0f} s)"
    )


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def run_command(args: argparse.Namespace) -> int:
    """Check the plan, then measure it (or print it with ``--dry-run``)."""
    from arkgpu.profiling.nvml import Nvml  # noqa: PLC0415
    from arkgpu.profiling.progress import display_for, duration  # noqa: PLC0415
    from arkgpu.profiling.running import Profiler, run_plan  # noqa: PLC0415

    if args.gpu is not None and not args.gpu.strip():
        raise CliError("--gpu: empty name")
    try:
        plan = build_plan(args)
    except ValueError as exc:
        where = "--plan " if args.plan is not None and str(args.plan) in str(exc) else ""
        raise CliError(f"{where or '--models/--batches/--shares/--pairs: '}{exc}") from None
    backend = _backend(args)
    for model in plan.models:
        try:
            backend.check_model(model)
        except ValueError as exc:
            raise CliError(f"--models: {exc}") from None
    if args.dry_run:
        print(_plan_text(plan, backend.startup_s))
        return 0
    signal.signal(signal.SIGTERM, _interrupt)
    nvml = Nvml(backend.nvml_library(), args.device)
    try:
        identity = nvml.identity(args.gpu)
        profiler = Profiler(plan, backend, nvml, identity)
        summary = run_plan(profiler, args.out.path, display_for(sys.stderr))
    finally:
        nvml.close()
    print(
        f"{args.out.path}: {summary.points} points ({summary.skipped} done before, "
        f"{summary.measured} measured in {duration(summary.seconds)}) on {identity.nvml_name} "
        f"(driver {identity.driver}) -> {summary.solo_file}, {summary.pair_file}"
    )
    return 0
