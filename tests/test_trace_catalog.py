"""Where openb names are found: ``$ARKGPU_OPENB_DIR`` first, then the embedded traces."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from arkgpu.traces.catalog import OPENB_DIR_ENV, openb_search_dirs, resolve_pod_trace
from arkgpu.traces.openb import load_pods

HEADER = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n"


def test_every_openb_name_resolves_without_any_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    """gpushare40 and multigpu30 are embedded (gzipped): found with no directory given."""
    monkeypatch.delenv(OPENB_DIR_ENV, raising=False)
    for name, pods in (("gpushare40", 8152), ("multigpu30", 8508)):
        trace = resolve_pod_trace(name)
        assert trace.label == f"openb_pod_list_{name}"
        assert trace.path.name == f"openb_pod_list_{name}.csv.gz"
        assert len(load_pods(trace.path)) == pods


def test_the_environment_directory_comes_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file in $ARKGPU_OPENB_DIR shadows the embedded one of the same name."""
    mine = tmp_path / "openb_pod_list_gpushare40.csv"
    mine.write_text(HEADER + "p0,1000,100,1,500\n")
    monkeypatch.setenv(OPENB_DIR_ENV, str(tmp_path))
    assert openb_search_dirs()[0] == tmp_path
    assert resolve_pod_trace("gpushare40").path == mine


def test_a_gzipped_path_loads_and_is_labelled_without_suffixes(tmp_path: Path) -> None:
    """``x.csv.gz`` given as a path: label ``x``, rows read through gzip."""
    path = tmp_path / "mytrace.csv.gz"
    with gzip.open(path, "wt") as f:
        f.write(HEADER + "p0,1000,100,1,500\n")
    trace = resolve_pod_trace(str(path))
    assert trace.label == "mytrace"
    assert len(load_pods(trace.path)) == 1


def test_an_unknown_name_lists_the_embedded_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    """The error names the file looked for and what is embedded."""
    monkeypatch.delenv(OPENB_DIR_ENV, raising=False)
    with pytest.raises(FileNotFoundError, match=r"openb_pod_list_nosuch\.csv.*gpushare40"):
        resolve_pod_trace("nosuch")
