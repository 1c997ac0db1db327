"""The openb loaders read the real files and reject bad rows with file, line and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from arkgpu.traces.catalog import (
    all_node_list,
    default_node_list,
    embedded_openb_traces,
    resolve_pod_trace,
)
from arkgpu.traces.openb import TraceFormatError, load_nodes, load_pods

HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
    "creation_time,deletion_time,scheduled_time"
)


def test_embedded_default_trace_loads_whole() -> None:
    """The embedded default has 8,152 pods and 1,213 nodes with 6,212 GPUs; no row dropped."""
    pods = load_pods(resolve_pod_trace("default").path)
    nodes = load_nodes(default_node_list())
    assert len(pods) == 8152
    assert len(nodes) == 1213
    assert sum(n.num_gpu for n in nodes) == 6212
    assert {p.num_gpu for p in pods} == {0, 1, 2, 4, 8}


def test_multigpu_files_have_five_columns_and_load() -> None:
    """multigpu* files carry only the first five columns; gpu_spec defaults to any model."""
    pods = load_pods(resolve_pod_trace("multigpu50").path)
    assert len(pods) == 9061
    assert all(p.gpu_spec == frozenset() and p.creation_time == -1 for p in pods)


def test_every_embedded_openb_file_loads() -> None:
    """The ten embedded openb pod lists (default, gpushare*, multigpu*) and both node lists load."""
    names = embedded_openb_traces()
    assert len(names) == 10
    for name in names:
        assert load_pods(resolve_pod_trace(name).path), name
    assert load_nodes(all_node_list())
    assert load_nodes(default_node_list())


def test_gpu_spec_parses_into_model_set(tmp_path: Path) -> None:
    """``V100M16|V100M32`` becomes a set of two models."""
    f = tmp_path / "p.csv"
    f.write_text(f"{HEADER}\np0,1000,100,1,1000,V100M16|V100M32,LS,Running,1,2,1\n")
    assert load_pods(f)[0].gpu_spec == frozenset({"V100M16", "V100M32"})


@pytest.mark.parametrize(
    ("row", "field", "words"),
    [
        ("p0,abc,100,1,500,,LS,Running,1,2,1", "cpu_milli", "not a number"),
        ("p0,1000,-5,1,500,,LS,Running,1,2,1", "memory_mib", "negative"),
        ("p0,1000,100,1,1500,,LS,Running,1,2,1", "gpu_milli", "outside 0..1000"),
        ("p0,1000,100,2,500,,LS,Running,1,2,1", "gpu_milli", "whole GPUs"),
        ("p0,1000,100,1,500,H800,LS,Running,1,2,1", "gpu_spec", "unknown GPU model"),
        ("p0,1000,100,0,300,,LS,Running,1,2,1", "gpu_milli", "without GPU"),
        ("p0,1000,100,1.5,500,,LS,Running,1,2,1", "num_gpu", "not an integer"),
    ],
)
def test_bad_pod_row_names_file_line_and_field(
    tmp_path: Path, row: str, field: str, words: str
) -> None:
    """A bad value on line 3 is reported with the file, line 3 and the field."""
    f = tmp_path / "pods.csv"
    f.write_text(f"{HEADER}\np9,1000,100,1,500,,LS,Running,1,2,1\n{row}\n")
    with pytest.raises(TraceFormatError) as exc:
        load_pods(f)
    message = str(exc.value)
    assert f"{f}:3:" in message
    assert repr(field) in message
    assert words in message


def test_missing_column_is_reported_on_header(tmp_path: Path) -> None:
    """A pod file without gpu_milli fails on line 1 naming the column."""
    f = tmp_path / "pods.csv"
    f.write_text("name,cpu_milli,memory_mib,num_gpu\np0,1,1,0\n")
    with pytest.raises(TraceFormatError, match=r"pods.csv:1: field 'gpu_milli': missing column"):
        load_pods(f)


def test_short_row_is_an_error_not_a_silent_drop(tmp_path: Path) -> None:
    """A row with too few fields fails instead of being skipped."""
    f = tmp_path / "pods.csv"
    f.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1,1,0,0\np1,1,1\n")
    with pytest.raises(TraceFormatError, match=r":3: field '\*': wrong number of fields"):
        load_pods(f)


def test_node_with_gpus_needs_known_model(tmp_path: Path) -> None:
    """A GPU node of an unknown model is rejected on its line."""
    f = tmp_path / "nodes.csv"
    f.write_text("sn,cpu_milli,memory_mib,gpu,model\nn0,1000,1000,2,X9000\n")
    with pytest.raises(TraceFormatError, match=r"nodes.csv:2: field 'model'"):
        load_nodes(f)


def test_unknown_trace_name_lists_where_it_looked(tmp_path: Path) -> None:
    """An openb name not found says which file it looked for and where."""
    with pytest.raises(FileNotFoundError, match=r"openb_pod_list_nosuch\.csv"):
        resolve_pod_trace("nosuch", [tmp_path])
