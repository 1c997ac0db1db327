"""Canonical profile files: loaders, converters from the published sources, and their errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from arkgpu.traces.profiles import (
    ProfileFormatError,
    default_profile_dir,
    load_pair_profiles,
    load_solo_profiles,
    write_pair_profiles,
    write_solo_profiles,
)
from arkgpu.traces.profiles_importing import import_profiles

SOLO_HEADER = "gpu,model,batch,share,latency_ms,throughput_per_s,l2_util_pct,dram_util_pct\n"


def test_igniter_converter_reads_the_shipped_source(shared_profiles: Path) -> None:
    """iGniter: 648 solo points on the V100 (4 models), 750 pairs, MPS % turned into fractions."""
    imported = import_profiles("igniter", shared_profiles / "igniter_v100")
    assert len(imported.solo) == 648
    assert len(imported.pairs) == 750
    assert {r.model for r in imported.solo} == {"alexnet", "resnet50", "vgg19", "ssd"}
    assert {r.gpu for r in imported.solo} == {"V100"}
    assert {round(r.share, 2) for r in imported.solo} == {0.1, 0.2, 0.4, 0.5, 0.6, 0.8, 1.0}
    assert all(p.share_a + p.share_b == pytest.approx(1.0) for p in imported.pairs)
    first = imported.pairs[0]
    assert (first.model_a, first.batch_a) == ("alexnet", 2)
    assert first.share_a == pytest.approx(0.2)
    assert first.latency_a_ms == pytest.approx(2.7610640856844304)


def test_parvagpu_converter_keeps_one_process_rows(shared_profiles: Path) -> None:
    """ParvaGPU: one-process rows only, no zero rows, latency = batch/throughput in ms."""
    imported = import_profiles("parvagpu", shared_profiles / "parvagpu_a100")
    assert imported.pairs == []
    assert len({r.model for r in imported.solo}) == 11
    assert {round(r.share * 7) for r in imported.solo} == {1, 2, 3, 4, 7}
    point = next(
        r for r in imported.solo if r.model == "resnet50" and r.batch == 256 and r.share == 1.0
    )
    assert point.latency_ms == pytest.approx(1000 * 256 / 2582.226)


def test_migprofiler_converter_names_sequence_lengths(shared_profiles: Path) -> None:
    """MIGProfiler: MIG profile names become sevenths; NLP models carry their sequence length."""
    imported = import_profiles("migprofiler", shared_profiles / "migprofiler_a100_80g")
    models = {r.model for r in imported.solo}
    assert {"resnet50", "vision_transformer", "bert-base-seq64", "bert-base-seq512"} <= models
    assert {round(r.share * 7) for r in imported.solo} == {1, 2, 3, 7}


def test_shipped_files_are_the_converted_sources(shared_profiles: Path, tmp_path: Path) -> None:
    """The package's canonical files hold what the converters make of data/profiles (SOURCE.md)."""
    shipped = default_profile_dir()
    imported = import_profiles("igniter", shared_profiles / "igniter_v100")
    write_solo_profiles(tmp_path / "x_solo.csv", imported.solo)
    write_pair_profiles(tmp_path / "x_pairs.csv", imported.pairs)
    assert load_solo_profiles(tmp_path / "x_solo.csv") == load_solo_profiles(
        shipped / "igniter_v100_solo.csv"
    )
    assert load_pair_profiles(tmp_path) == load_pair_profiles(shipped)
    parva = import_profiles("parvagpu", shared_profiles / "parvagpu_a100").solo
    assert len(load_solo_profiles(shipped / "parvagpu_a100_solo.csv")) == len(parva)
    mig = import_profiles("migprofiler", shared_profiles / "migprofiler_a100_80g").solo
    assert len(load_solo_profiles(shipped / "migprofiler")) == len(mig)


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("body", "line", "field"),
    [
        ("V100,resnet50,8,0.5,abc,100,,\n", 2, "latency_ms"),
        ("V100,resnet50,8,0.5,10,100,,\nV100,resnet50,8,1.5,10,100,,\n", 3, "share"),
        ("V100,resnet50,0,0.5,10,100,,\n", 2, "batch"),
        ("V100,,8,0.5,10,100,,\n", 2, "model"),
        ("V100,resnet50,8,0.5,10,100,120,\n", 2, "l2_util_pct"),
        ("V100,resnet50,8,0.5,-3,100,,\n", 2, "latency_ms"),
    ],
)
def test_malformed_solo_rows_name_file_line_and_field(
    tmp_path: Path, body: str, line: int, field: str
) -> None:
    """A bad value is reported with the file, its line number and the column's name."""
    path = _write(tmp_path, "bad_solo.csv", SOLO_HEADER + body)
    with pytest.raises(ProfileFormatError) as caught:
        load_solo_profiles(path)
    assert (caught.value.line, caught.value.field) == (line, field)
    assert str(path) in str(caught.value)
    assert f":{line}:" in str(caught.value)


def test_missing_column_and_extra_values_are_errors(tmp_path: Path) -> None:
    """A header without a required column, or a row with too many values, is refused."""
    path = _write(tmp_path, "a_solo.csv", "gpu,model,batch,share,latency_ms\nV100,x,1,1,1\n")
    with pytest.raises(ProfileFormatError, match="throughput_per_s"):
        load_solo_profiles(path)
    path = _write(tmp_path, "b_solo.csv", SOLO_HEADER + "V100,x,1,1,1,1,,,9\n")
    with pytest.raises(ProfileFormatError, match=":2:"):
        load_solo_profiles(path)


def test_source_format_errors_name_the_source_field(tmp_path: Path) -> None:
    """Converters report the source's own column names and lines."""
    parva = _write(
        tmp_path,
        "prof_data_x.csv",
        "Mig instance,Batch size,Workload Number,Throughput,Latency\n1,4,1,100,0.5\n",
    )
    with pytest.raises(ProfileFormatError, match=r"prof_data_x.csv:2: field 'Latency'"):
        import_profiles("parvagpu", parva)
    mig = _write(
        tmp_path,
        "cv.csv",
        ",model_name,batch_size,latency,throughput,mig_profile\n0,r,1,5,200,9g.99gb\n",
    )
    with pytest.raises(ProfileFormatError, match="mig_profile"):
        import_profiles("migprofiler", mig)


def test_missing_paths_and_unknown_sources_are_errors(tmp_path: Path) -> None:
    """A path that does not exist or a source nobody converts gives a clear error."""
    with pytest.raises(FileNotFoundError):
        load_solo_profiles(tmp_path / "nothing")
    with pytest.raises(ValueError, match="unknown profile source"):
        import_profiles("abacus", tmp_path)


def test_igniter_published_slopes_are_read_with_located_errors(
    shared_profiles: Path, tmp_path: Path
) -> None:
    """iGniter's per-model L2 slopes come from its config; a bad entry names file, line, key."""
    from arkgpu.traces.profiles_importing import load_igniter_l2_slopes  # noqa: PLC0415

    slopes = load_igniter_l2_slopes(
        shared_profiles / "igniter_v100" / "Algorithm_config_v100.jsonl"
    )
    assert set(slopes) == {"alexnet", "resnet50", "vgg19", "ssd"}
    assert all(0 < k < 0.05 for k in slopes.values())  # per L2 %: a few % slowdown per 10 %
    bad = _write(
        tmp_path,
        "config.jsonl",
        '{"hardware": {"maxGPUfrequency": 1530}}\n{"m": {"l2cache": 16, "activetime_1": "x"}}\n',
    )
    with pytest.raises(ProfileFormatError, match=r"config.jsonl:2: field 'activetime_1'"):
        load_igniter_l2_slopes(bad)


def test_spreadsheet_exports_load(tmp_path: Path) -> None:
    """A file saved by a spreadsheet (byte-order mark, columns reordered, an extra column,
    CRLF line ends) loads the same as a plain one; an empty file names its missing header."""
    text = "note,model,gpu,batch,share,latency_ms,throughput_per_s,l2_util_pct,dram_util_pct\r\n"
    text += "x,resnet50,V100,8,0.5,11.6,714.7,15.2,\r\n"
    path = tmp_path / "sheet_solo.csv"
    path.write_bytes(b"\xef\xbb\xbf" + text.encode())
    (record,) = load_solo_profiles(path)
    assert (record.gpu, record.model, record.batch, record.l2_util_pct) == (
        "V100",
        "resnet50",
        8,
        15.2,
    )
    assert record.dram_util_pct is None
    empty = _write(tmp_path, "empty_solo.csv", "")
    with pytest.raises(ProfileFormatError, match=r"empty_solo\.csv:1: field 'gpu'"):
        load_solo_profiles(empty)
