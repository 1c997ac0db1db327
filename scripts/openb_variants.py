"""Write openb variants used to check the placement policy on unseen traces.

    python scripts/openb_variants.py src/arkgpu/data/openb/openb_pod_list_default.csv OUT_DIR
    python scripts/openb_variants.py SOURCE OUT_DIR --seed 11 --spec-share 0.2 --name gpuspec20-s11
    python scripts/openb_variants.py SOURCE OUT_DIR --cpu-copies 2 --name cpux2

SOURCE may be gzipped (``src/arkgpu/data/openb/openb_pod_list_gpushare40.csv.gz``).

* ``pods_gpuspec33.csv``: the default trace with a ``gpu_spec`` drawn from
  SPECS on a third of the GPU pods (``random.Random(7)``).
* ``pods_cpuheavy.csv``: the default trace with every CPU-only pod three times.
* With ``--seed``/``--spec-share``/``--name``: only ``pods_NAME.csv``, a
  ``gpu_spec`` draw of that share and seed (fresh draws for the policy's
  later changes; docs/studies/placement-own-variants.md says which draw
  judged which change).
* With ``--cpu-copies N`` (and ``--name``): only ``pods_NAME.csv``, every
  CPU-only pod N times.

See docs/studies/placement-own-variants.md for what each file was used for.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import random
from pathlib import Path

SPECS = ("V100M16|V100M32", "G2", "T4", "P100", "G2|G3", "V100M32", "T4|P100")


def with_specs(rows: list[dict[str, str]], seed: int, share: float) -> list[dict[str, str]]:
    """A ``gpu_spec`` from SPECS on about ``share`` of the GPU pods."""
    rng = random.Random(seed)
    spec_rows = []
    for row in rows:
        changed = dict(row)
        if int(row["num_gpu"]) > 0 and rng.random() < share:
            changed["gpu_spec"] = rng.choice(SPECS)
        spec_rows.append(changed)
    return spec_rows


def cpu_heavy(rows: list[dict[str, str]], copies: int = 3) -> list[dict[str, str]]:
    """Every CPU-only pod ``copies`` times."""
    heavy_rows = []
    for row in rows:
        for k in range(copies if int(row["num_gpu"]) == 0 else 1):
            heavy_rows.append({**row, "name": row["name"] if k == 0 else f"{row['name']}-x{k}"})
    return heavy_rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--seed", type=int, default=None, help="draw of a gpu_spec variant")
    parser.add_argument("--spec-share", type=float, default=1 / 3)
    parser.add_argument("--cpu-copies", type=int, default=None, help="CPU-only pods N times")
    parser.add_argument("--name", default=None, help="the variant is written as pods_NAME.csv")
    args = parser.parse_args()
    opener = gzip.open if args.source.suffix == ".gz" else open  # the embedded traces are gzipped
    with opener(args.source, "rt", newline="") as f:
        reader = csv.DictReader(f)
        fields = list(reader.fieldnames or [])
        rows = list(reader)
    if "gpu_spec" not in fields:
        fields.append("gpu_spec")  # the multigpu traces have no such column
    if args.cpu_copies is not None:
        files = {args.name or f"cpux{args.cpu_copies}": cpu_heavy(rows, args.cpu_copies)}
    elif args.seed is None:
        files = {"gpuspec33": with_specs(rows, 7, 1 / 3), "cpuheavy": cpu_heavy(rows)}
    else:
        name = args.name or f"gpuspec-s{args.seed}"
        files = {name: with_specs(rows, args.seed, args.spec_share)}
    args.out.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        with (args.out / f"pods_{name}.csv").open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=fields)
            writer.writeheader()
            writer.writerows(data)


if __name__ == "__main__":
    main()
