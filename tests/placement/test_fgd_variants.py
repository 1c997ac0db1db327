"""FGD's gpuspec/cpu variants are rebuilt whole from the default trace and checked on the way."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from arkgpu.cli.main import main
from arkgpu.traces.catalog import all_node_list, default_node_list
from arkgpu.traces.fgd_variants import read_default, rebuild, variant_names
from arkgpu.traces.openb import TraceFormatError, load_nodes, load_pods


@pytest.fixture(scope="module")
def default() -> list[dict[str, str]]:
    """The embedded default trace as text rows."""
    return read_default()


@pytest.mark.parametrize(
    ("name", "specs"),
    [
        ("gpuspec05", 369),
        ("gpuspec10", 732),
        ("gpuspec20", 1444),
        ("gpuspec25", 1759),
        ("gpuspec33", 2388),
    ],
)
def test_gpuspec_variant_is_the_default_with_specs(
    default: list[dict[str, str]], name: str, specs: int
) -> None:
    """Same pods in the same order; only gpu_spec differs, on the shipped number of GPU pods."""
    rows = rebuild(name, default)
    assert len(rows) == len(default) == 8152
    assert sum(1 for r in rows if r["gpu_spec"]) == specs
    for row, base in zip(rows, default, strict=True):
        assert {k: v for k, v in row.items() if k != "gpu_spec"} == {
            k: v for k, v in base.items() if k != "gpu_spec"
        }
        assert not row["gpu_spec"] or int(row["num_gpu"]) > 0


@pytest.mark.parametrize(
    ("name", "pods", "cpu_only"),
    [
        ("cpu0", 7064, 0),
        ("cpu037", 7336, 272),
        ("cpu050", 7439, 375),
        ("cpu072", 7608, 544),
        ("cpu100", 7853, 789),
        ("cpu200", 8832, 1768),
        ("cpu235", 9240, 2176),
        ("cpu250", 9420, 2356),
        ("cpu300", 10094, 3030),
    ],
)
def test_cpu_variant_is_the_default_gpu_pods_and_default_cpu_pods(
    default: list[dict[str, str]], name: str, pods: int, cpu_only: int
) -> None:
    """The 7,064 GPU pods of the default in order; CPU-only pods drawn from the default's."""
    rows = rebuild(name, default)
    gpu = [r for r in rows if r["num_gpu"] != "0"]
    base_gpu = [r for r in default if r["num_gpu"] != "0"]
    assert len(rows) == pods
    assert len(rows) - len(gpu) == cpu_only
    keys = ("cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "creation_time")
    assert [[r[k] for k in keys] for r in gpu] == [[r[k] for k in keys] for r in base_gpu]
    cpu_keys = ("cpu_milli", "memory_mib", "creation_time", "deletion_time")
    base_cpu = {tuple(r[k] for k in cpu_keys) for r in default if r["num_gpu"] == "0"}
    assert all(tuple(r[k] for k in cpu_keys) in base_cpu for r in rows if r["num_gpu"] == "0")
    assert [r["name"] for r in rows[:2]] == ["openb-pod-0000", "openb-pod-0001"]


def test_cli_writes_every_variant_and_the_all_node_list(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``placement variants --out`` writes loadable pod lists and the 1,523-node list."""
    assert main(["placement", "variants", "--out", str(tmp_path)]) == 0
    assert str(tmp_path / "openb_pod_list_gpuspec33.csv") in capsys.readouterr().out
    gpu_pods = {
        name: sum(p.num_gpu > 0 for p in load_pods(tmp_path / f"openb_pod_list_{name}.csv"))
        for name in variant_names()
    }
    assert set(gpu_pods.values()) == {7064}
    spec33 = load_pods(tmp_path / "openb_pod_list_gpuspec33.csv")
    assert sum(1 for p in spec33 if p.gpu_spec) == 2388
    nodes = load_nodes(tmp_path / "openb_node_list_all_node.csv")
    assert len(nodes) == 1523
    assert sum(n.num_gpu for n in nodes) == sum(n.num_gpu for n in load_nodes(default_node_list()))
    assert (tmp_path / "openb_node_list_all_node.csv").read_bytes() == all_node_list().read_bytes()
    assert not list(tmp_path.glob("*.partial"))


def _delta(directory: Path, name: str, text: str) -> None:
    with gzip.open(directory / f"{name}.csv.gz", "wt", encoding="utf-8") as f:
        f.write(text)


@pytest.mark.parametrize(
    ("name", "text", "where"),
    [
        ("gpuspec99", "name,num_gpu,gpu_milli,gpu_spec\nnope,1,1000,T4\n", ":2: field 'name'"),
        (
            "gpuspec99",
            "name,num_gpu,gpu_milli,gpu_spec\nopenb-pod-0000,1,500,T4\n",
            ":2: field 'gpu_milli'",
        ),
        (
            "gpuspec99",
            "name,num_gpu,gpu_milli,gpu_spec\nopenb-pod-0000,1,1000,T4\nopenb-pod-0000,1,1000,G2\n",
            ":3: field 'name'",
        ),
        ("gpuspec99", "name,num_gpu,gpu_milli\nopenb-pod-0000,1,1000\n", ":1: field 'gpu_spec'"),
        (
            "cpu999",
            "row,cpu_milli,memory_mib,creation_time,deletion_time\n0,1000,2048,0,1\n0,1000,2048,0,1\n",
            ":3: field 'row'",
        ),
        (
            "cpu999",
            "row,cpu_milli,memory_mib,creation_time,deletion_time\n99999,1000,2048,0,1\n",
            ":2: field 'row'",
        ),
    ],
)
def test_bad_difference_file_names_file_line_and_field(
    default: list[dict[str, str]], tmp_path: Path, name: str, text: str, where: str
) -> None:
    """A wrong row in a difference file is refused with its file, line and field."""
    _delta(tmp_path, name, text)
    with pytest.raises(TraceFormatError, match=rf"{name}\.csv\.gz{where}"):
        rebuild(name, default, tmp_path)


def test_unknown_variant_lists_the_shipped_ones(default: list[dict[str, str]]) -> None:
    """Asking for a variant that is not shipped says which ones are."""
    with pytest.raises(FileNotFoundError, match="gpuspec33"):
        rebuild("gpuspec77", default)
