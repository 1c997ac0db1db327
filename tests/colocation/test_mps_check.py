"""The ``mps`` mode's fair-split assumption checked on ParvaGPU's measured MPS data."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from arkgpu.bench.mps_check import MpsCheck, mps_fair_split_check, to_json
from arkgpu.cli.main import main
from arkgpu.traces.profiles import (
    MPS_SUFFIX,
    PAIR_SUFFIX,
    SOLO_SUFFIX,
    MpsRecord,
    ProfileFormatError,
    SoloRecord,
    default_profile_dir,
    load_mps_profiles,
    load_solo_profiles,
)
from arkgpu.traces.profiles_importing import import_parvagpu_mps

GPU = "A100-80GB"
MPS_HEADER = "gpu,model,batch,processes,latency_ms,throughput_per_s\n"
PARVA_HEADER = "Mig instance,Batch size,Workload Number,Throughput,Latency\n"


def _solo(model: str, gpcs: float, latency_ms: float, batch: int = 8) -> SoloRecord:
    return SoloRecord(GPU, model, batch, gpcs / 7, latency_ms, 1000 * batch / latency_ms)


def _mps(model: str, processes: int, latency_ms: float, batch: int = 8) -> MpsRecord:
    return MpsRecord(GPU, model, batch, processes, latency_ms, 1000 * batch / latency_ms)


def _shipped() -> MpsCheck:
    folder = default_profile_dir()
    return mps_fair_split_check(
        load_solo_profiles(folder / "parvagpu_a100_solo.csv"),
        load_mps_profiles(folder / "parvagpu_a100_mps.csv"),
    )


def test_fair_split_interpolates_linearly_in_inverse_share() -> None:
    """n = 2 asks for share 3.5/7, between measured 2/7 (20 ms) and 4/7 (13 ms): in 1/share
    that is 6/7 of the way from 3.5 to 1.75, so 20 - 6/7 * 7 = 14 ms; an exact share
    (n = 7 at 1/7) is used as measured; the whole-GPU reference is the share-1 latency."""
    solo = [_solo("m", 1, 40.0), _solo("m", 2, 20.0), _solo("m", 4, 13.0), _solo("m", 7, 10.0)]
    check = mps_fair_split_check(solo, [_mps("m", 2, 15.4), _mps("m", 7, 44.0)])
    two, seven = check.rows
    assert two.fair_split_ms == pytest.approx(14.0)
    assert two.whole_gpu_ms == 10.0
    assert seven.fair_split_ms == 40.0
    summary = check.summaries[0]
    assert (summary.processes, summary.count) == (2, 1)
    assert summary.median == pytest.approx(1.1)
    assert summary.p10 == summary.p90 == pytest.approx(1.1)
    assert summary.whole_gpu_median == pytest.approx(1.54)
    assert check.skipped == 0
    assert to_json(check)["rows"][0]["fair_split_ms"] == pytest.approx(14.0)


def test_rows_without_a_bracket_or_whole_gpu_latency_are_skipped() -> None:
    """1/n below the smallest measured share, a missing whole-GPU point, or no solo curve at
    all for that (model, batch): the row is left out and counted as skipped."""
    solo = [_solo("big", 4, 13.0), _solo("big", 7, 10.0), _solo("part", 2, 20.0)]
    solo.append(_solo("part", 4, 13.0))
    mps = [_mps("big", 2, 20.0), _mps("part", 2, 14.0), _mps("big", 2, 9.0, batch=16)]
    check = mps_fair_split_check(solo, mps)
    assert check.rows == ()
    assert check.summaries == ()
    assert check.skipped == 3


@pytest.mark.parametrize("processes", [2, 3, 4])
def test_shipped_data_matches_the_fair_split(processes: int) -> None:
    """Measured latency of n identical MPS processes on the whole A100 is, in the median,
    within 10% of one process alone on 1/n of the GPU (MIG, interpolated)."""
    summary = next(s for s in _shipped().summaries if s.processes == processes)
    assert summary.count >= 60
    assert 0.9 <= summary.median <= 1.1


@pytest.mark.parametrize("processes", [2, 3, 4, 5])
def test_shipped_data_tells_fair_split_from_whole_gpu(processes: int) -> None:
    """On batches of 8 or more, which keep the GPU busy, the whole-GPU view (each client
    as if alone) under-predicts by more than 50% in the median while the fair split
    stays within 10%, so the data separate the two views. (Batches 1-4 sit on the flat
    part of the solo curve, where half the GPU is as fast as all of it.)"""
    rows = [r for r in _shipped().rows if r.processes == processes and r.batch >= 8]
    assert len(rows) >= 30
    whole = statistics.median(r.measured_ms / r.whole_gpu_ms for r in rows)
    fair = statistics.median(r.measured_ms / r.fair_split_ms for r in rows)
    assert whole > 1.5
    assert 0.9 <= fair <= 1.1


def test_shipped_mps_file_is_the_converted_source(shared_data: Path) -> None:
    """The shipped file holds what ``import_parvagpu_mps`` makes of ParvaGPU's files
    (SOURCE.md), and no solo or pair loader's directory glob picks it up."""
    shipped = default_profile_dir() / "parvagpu_a100_mps.csv"
    converted = import_parvagpu_mps(shared_data / "profiles" / "parvagpu_a100")
    loaded = load_mps_profiles(shipped)
    assert [(r.model, r.batch, r.processes) for r in loaded] == [
        (r.model, r.batch, r.processes) for r in converted
    ]
    assert [r.latency_ms for r in loaded] == pytest.approx([r.latency_ms for r in converted])
    assert {r.processes for r in loaded} == {2, 3, 4, 5}
    assert shipped.name.endswith(MPS_SUFFIX)
    assert not shipped.name.endswith((SOLO_SUFFIX, PAIR_SUFFIX))


def test_parvagpu_mps_converter_keeps_whole_gpu_rows(tmp_path: Path) -> None:
    """Only 7-GPC rows with 2+ processes are kept, rows of zeros are dropped, and a rounded
    latency that disagrees with batch / throughput names the file, line and field."""
    source = tmp_path / "prof_data_x.csv"
    rows = "7,8,1,1600,0.005\n7,8,2,1155.043,0.007\n3,8,2,600,0.013\n7,8,3,0,0\n"
    source.write_text(PARVA_HEADER + rows)
    (record,) = import_parvagpu_mps(source)
    assert (record.model, record.batch, record.processes) == ("x", 8, 2)
    assert record.latency_ms == pytest.approx(1000 * 8 / 1155.043)
    source.write_text(PARVA_HEADER + "7,8,2,1155.043,0.009\n")
    with pytest.raises(ProfileFormatError, match=r"prof_data_x.csv:2: field 'Latency'"):
        import_parvagpu_mps(source)


@pytest.mark.parametrize(
    ("body", "line", "field"),
    [
        ("A100-80GB,bert,1,2,abc,66\n", 2, "latency_ms"),
        ("A100-80GB,bert,1,2,15,66\nA100-80GB,bert,1,1,15,66\n", 3, "processes"),
        ("A100-80GB,bert,0,2,15,66\n", 2, "batch"),
    ],
)
def test_malformed_mps_rows_name_file_line_and_field(
    tmp_path: Path, body: str, line: int, field: str
) -> None:
    """A bad value in an MPS file is reported with the file, the line and the column."""
    path = tmp_path / "bad_mps.csv"
    path.write_text(MPS_HEADER + body)
    with pytest.raises(ProfileFormatError) as caught:
        load_mps_profiles(path)
    assert (caught.value.line, caught.value.field) == (line, field)
    assert f"{path}:{line}: field {field!r}" in str(caught.value)


def test_cli_prints_one_row_per_process_count(capsys: pytest.CaptureFixture[str]) -> None:
    """``arkgpu colocate mps-check`` prints a line per n; ``--json`` the same summaries."""
    assert main(["colocate", "mps-check"]) == 0
    lines = capsys.readouterr().out.splitlines()
    counts = [int(line.split()[0]) for line in lines if line.split()[0].isdigit()]
    assert counts == [2, 3, 4, 5]
    assert main(["colocate", "mps-check", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [s["processes"] for s in doc["summaries"]] == [2, 3, 4, 5]
