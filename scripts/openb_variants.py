"""Write the two openb variants used to check the placement policy on unseen traces.

    python scripts/openb_variants.py ../shared/data/openb/openb_pod_list_default.csv OUT_DIR

* ``pods_gpuspec33.csv``: the default trace with a ``gpu_spec`` drawn from
  SPECS on a third of the GPU pods (``random.Random(7)``).
* ``pods_cpuheavy.csv``: the default trace with every CPU-only pod three times.

Neither file was used to choose anything in the ``arkgpu`` policy; see
docs/BENCHMARKS.md, "Robustness on traces it was never run on".
"""

from __future__ import annotations

import csv
import random
import sys
from pathlib import Path

SPECS = ("V100M16|V100M32", "G2", "T4", "P100", "G2|G3", "V100M32", "T4|P100")


def main(source: Path, out: Path) -> None:
    with source.open(newline="") as f:
        reader = csv.DictReader(f)
        fields = list(reader.fieldnames or [])
        rows = list(reader)
    rng = random.Random(7)
    spec_rows = []
    for row in rows:
        changed = dict(row)
        if int(row["num_gpu"]) > 0 and rng.random() < 1 / 3:
            changed["gpu_spec"] = rng.choice(SPECS)
        spec_rows.append(changed)
    heavy_rows = []
    for row in rows:
        copies = 3 if int(row["num_gpu"]) == 0 else 1
        for k in range(copies):
            heavy_rows.append({**row, "name": row["name"] if k == 0 else f"{row['name']}-x{k}"})
    out.mkdir(parents=True, exist_ok=True)
    for name, data in (("pods_gpuspec33.csv", spec_rows), ("pods_cpuheavy.csv", heavy_rows)):
        with (out / name).open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=fields)
            writer.writeheader()
            writer.writerows(data)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
