"""Small clusters, traces and a re-packing problem for the issue-6 placement tests."""

from __future__ import annotations

from pathlib import Path

import pytest

NODE_CSV = """sn,cpu_milli,memory_mib,gpu,model
n0,64000,262144,2,P100
n1,96000,393216,8,G2
n2,32000,131072,4,T4
n3,96000,786432,8,V100M32
"""
POD_HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
    "creation_time,deletion_time,scheduled_time"
)
SHAPES = [
    (4000, 8192, 1, 470, ""),
    (8000, 16384, 1, 1000, ""),
    (2000, 4096, 1, 230, ""),
    (12000, 24576, 0, 0, ""),
    (16000, 65536, 2, 1000, ""),
    (6000, 12288, 1, 320, "T4|P100"),
    (6000, 12288, 1, 650, ""),
    (3000, 6144, 1, 810, ""),
]


def write_trace(directory: Path, count: int = 60) -> tuple[Path, Path]:
    """A node CSV (4 nodes, 22 GPUs) and a pod CSV of ``count`` mixed pods with times."""
    nodes = directory / "nodes.csv"
    nodes.write_text(NODE_CSV)
    lines = [POD_HEADER]
    for i in range(count):
        cpu, mem, num, milli, spec = SHAPES[i % len(SHAPES)]
        lines.append(
            f"p{i:03d},{cpu},{mem},{num},{milli},{spec},LS,Running,{i * 60},{i * 60 + 900},0"
        )
    pods = directory / "pods.csv"
    pods.write_text("\n".join(lines) + "\n")
    return nodes, pods


@pytest.fixture
def small_trace(tmp_path: Path) -> tuple[Path, Path]:
    """Paths of the small node and pod CSVs."""
    return write_trace(tmp_path)
