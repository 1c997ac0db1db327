"""``python -m arkgpu.limiter.benchcompare BASELINE_SRC``: ``arkgpu limiter
bench`` of this tree and of a baseline tree side by side, in one run.

The two benches alternate (baseline, this, baseline, this, ...) so that the
machine's load falls on both alike; each bench runs in its own interpreter
with its own ``src`` first on PYTHONPATH, so each loads its own Python code
and its own native build (build both first: ``make -C .../native``). Prints
one table of the headline figures (median over rounds) and writes every
report with ``--json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

#: Headline figures: report key -> label.
FIGURES = {
    "launch_overhead_ns": "launch overhead, ns (median over cases)",
    "memcall_overhead_ns": "memory call overhead, ns",
    "share_error_pts_max": "share error, max points",
    "share_change_latency_ms": "share-change latency, max ms",
}


def run_one(src: Path, quick: bool) -> dict[str, Any]:
    """One ``arkgpu limiter bench`` with ``src`` first on the path."""
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        args = ["limiter", "bench", "--json", out.name, *(["--quick"] if quick else [])]
        code = f"import sys; from arkgpu.cli.main import main; sys.exit(main({args!r}))"
        env = dict(os.environ, PYTHONPATH=str(src))
        subprocess.run([sys.executable, "-c", code], env=env, check=True, stdout=subprocess.DEVNULL)
        report: dict[str, Any] = json.loads(Path(out.name).read_text())
    return report


def table(reports: dict[str, list[dict[str, Any]]]) -> str:
    """The headline figures, median over rounds, one column per tree."""
    names = list(reports)
    lines = [f"{'figure':45}" + "".join(f"{n:>16}" for n in names)]
    for key, label in FIGURES.items():
        cells = []
        for name in names:
            values = [r[key] for r in reports[name] if r.get(key) is not None]
            cells.append(f"{statistics.median(values):16.2f}" if values else f"{'n/a':>16}")
        lines.append(f"{label:45}" + "".join(cells))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the comparison."""
    parser = argparse.ArgumentParser(prog="python -m arkgpu.limiter.benchcompare")
    parser.add_argument("baseline", type=Path, help="the baseline tree's src directory")
    parser.add_argument("--rounds", type=int, default=2, help="benches per tree (alternating)")
    parser.add_argument("--quick", action="store_true", help="the benches' --quick")
    parser.add_argument("--json", type=Path, help="write every report here")
    args = parser.parse_args(argv)
    here = Path(__file__).resolve().parents[2]
    if not (args.baseline / "arkgpu").is_dir():
        parser.error(f"{args.baseline}: not a src directory holding arkgpu/")
    reports: dict[str, list[dict[str, Any]]] = {"baseline": [], "this tree": []}
    for i in range(args.rounds):
        for name, src in (("baseline", args.baseline), ("this tree", here)):
            print(f"... round {i + 1}/{args.rounds}: {name}", file=sys.stderr)
            reports[name].append(run_one(src, args.quick))
    print(table(reports))
    if args.json:
        args.json.write_text(json.dumps(reports, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
