"""The output folder: whole point files, canonical profiles made of them, one GPU per folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from arkgpu.profiling.nvml import GpuIdentity
from arkgpu.profiling.plans import PairPoint, SoloPoint
from arkgpu.profiling.results import Measured, RunFolder, atomic_write
from arkgpu.profiling.stats import LatencyStats
from arkgpu.traces.profiles import load_pair_profiles, load_solo_profiles

GPU = GpuIdentity("NVIDIA H200", "570.1", "H200")


def _m(model: str, batch: int, share: float, ms: float, mem: float | None = None) -> Measured:
    return Measured(model, batch, share, LatencyStats.of([ms, ms * 1.1, ms * 0.9]), 50.0, mem)


def test_points_make_canonical_profiles_the_loaders_read(tmp_path: Path) -> None:
    """Solo and pair points become *_solo.csv and *_pairs.csv; stats files stay apart."""
    folder = RunFolder(tmp_path)
    solo = SoloPoint("resnet50", 4, 0.5)
    pair = PairPoint(SoloPoint("resnet50", 4, 0.5), SoloPoint("vgg19", 4, 0.5))
    folder.save(solo, [_m("resnet50", 4, 0.5, 10.0, mem=30.0)], {})
    folder.save(pair, [_m("resnet50", 4, 0.5, 12.0), _m("vgg19", 4, 0.5, 20.0)], {})
    solo_file, _ = folder.write_profiles(GPU, "# source\n")
    assert solo_file.name == "h200_solo.csv"
    [row] = load_solo_profiles(tmp_path)
    assert (row.gpu, row.model, row.batch, row.share) == ("H200", "resnet50", 4, 0.5)
    assert row.latency_ms == pytest.approx(10.0)
    assert row.throughput == pytest.approx(4000.0 / 10.0)
    assert (row.l2_util_pct, row.dram_util_pct) == (None, 30.0)
    [p] = load_pair_profiles(tmp_path)
    assert (p.latency_a_ms, p.latency_b_ms) == pytest.approx((12.0, 20.0))
    assert p.std_a_ms == pytest.approx(1.2)
    stats = (tmp_path / "h200_solo_stats.csv").read_text().splitlines()
    assert stats[0].startswith("workload,model,batch,share,median_ms,p99_ms,std_ms")
    assert len((tmp_path / "h200_pairs_stats.csv").read_text().splitlines()) == 3
    assert (tmp_path / "SOURCE.md").read_text() == "# source\n"


def test_zero_memory_time_leaves_dram_empty(tmp_path: Path) -> None:
    """NVML's memory figure 0 (the fake, or unavailable) is not written as a measurement."""
    folder = RunFolder(tmp_path)
    folder.save(SoloPoint("m", 1, 1.0), [_m("m", 1, 1.0, 2.0, mem=0.0)], {})
    folder.write_profiles(GPU, "")
    [row] = load_solo_profiles(tmp_path)
    assert row.dram_util_pct is None


def test_a_torn_or_foreign_point_file_is_not_done(tmp_path: Path) -> None:
    """Half a JSON document (or leftovers of a temporary file) is measured again."""
    folder = RunFolder(tmp_path)
    point = SoloPoint("m", 1, 1.0)
    assert not folder.done(point)
    folder.point_file(point).write_text('{"kind": "solo", "measured": [{"model"')
    assert not folder.done(point)
    (tmp_path / "points" / ".x.json.tmp").write_text("{")
    folder.save(point, [_m("m", 1, 1.0, 2.0)], {"label": "x"})
    assert folder.done(point)
    assert json.loads(folder.point_file(point).read_text())["label"] == "x"
    assert len(folder.results()[0]) == 1


def test_an_atomic_write_that_fails_leaves_the_old_file(tmp_path: Path) -> None:
    """The target keeps its old contents and no temporary file is left behind."""
    target = tmp_path / "f.txt"
    target.write_text("old")

    def broken(path: Path) -> None:
        path.write_text("half")
        raise RuntimeError("disk gone")

    with pytest.raises(RuntimeError):
        atomic_write(target, broken)
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.txt"]


def test_a_folder_of_another_gpu_or_backend_is_refused(tmp_path: Path) -> None:
    """Resuming into a folder measured on another GPU would mix GPUs in one profile."""
    folder = RunFolder(tmp_path)
    doc = {"gpu": {"gpu": "H200", "driver": "570.1"}, "backend": "torch"}
    folder.check_run(doc)
    folder.check_run(doc)  # the same GPU resumes
    with pytest.raises(ValueError, match=r"--out .* holds a run with gpu"):
        folder.check_run({**doc, "gpu": {"gpu": "A100-80GB", "driver": "570.1"}})
    with pytest.raises(ValueError, match="backend"):
        folder.check_run({**doc, "backend": "fake"})
