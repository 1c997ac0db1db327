"""``arkgpu colocate calibration-study``: online calibration against stronger interference
than profiled, in the co-location simulator (oracle, calibrated, uncalibrated)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from arkgpu.cli.options import integer, json_option, number_list, seeds_option


def register_study(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``calibration-study`` command under ``colocate``."""
    study = sub.add_parser(
        "calibration-study",
        help="online calibration at interference k x profiled: oracle, calibrated, uncalibrated",
    )
    study.add_argument(
        "--scenario",
        metavar="NAME|TOML",
        default="paper",
        help="shipped scenario or a TOML file (default: paper)",
    )
    study.add_argument(
        "--interference-scale",
        dest="scales",
        metavar="K[,K...]",
        type=number_list(0.0, 10.0),
        default=(1.3, 1.6),
        help="co-located latency k times the measured pairs', 0 < k < 10 (default: 1.3,1.6)",
    )
    study.add_argument(
        "--gpus",
        metavar="N",
        type=integer(1, 4096),
        default=None,
        help="GPUs of the scenario (default: as the scenario says)",
    )
    seeds_option(study, "1-2")
    json_option(study, "the study document")
    study.set_defaults(handler=_study)


def _study(args: argparse.Namespace) -> int:
    from arkgpu.cli.colocate import check_scenario  # noqa: PLC0415 (imported by colocate)
    from arkgpu.sim.colocation.calibration_study import StudySpec, run_study, table  # noqa: PLC0415

    check_scenario(args.scenario)
    spec = StudySpec(args.scenario, tuple(args.scales), tuple(args.seeds), args.gpus)
    doc: dict[str, Any] = run_study(spec, lambda line: print(line, file=sys.stderr, flush=True))
    out = args.json_out
    if out is not None:
        out.write_json(doc)
        if out.to_stdout:
            return 0
    print(table(doc))
    return 0
