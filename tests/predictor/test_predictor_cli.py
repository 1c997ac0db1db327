"""The ``arkgpu profiles`` and ``arkgpu predictor`` commands, end to end on small inputs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from arkgpu.cli.main import main
from arkgpu.predictor import Predictor


def test_import_fit_show_round_trip(
    shared_profiles: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Import iGniter, fit on the result, show a model: files, table and PNG are produced."""
    out = tmp_path / "igniter_v100"
    assert (
        main(
            [
                "profiles",
                "import",
                "--from",
                "igniter",
                str(shared_profiles / "igniter_v100"),
                str(out),
            ]
        )
        == 0
    )
    assert (tmp_path / "igniter_v100_solo.csv").exists()
    assert (tmp_path / "igniter_v100_pairs.csv").exists()
    model = tmp_path / "p.json"
    assert main(["predictor", "fit", "--profiles", str(tmp_path), "--out", str(model)]) == 0
    png = tmp_path / "r.png"
    code = main(
        ["predictor", "show", str(model), "--model", "resnet50", "--batch", "8", "--png", str(png)]
    )
    assert code == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = capsys.readouterr().out
    assert "resnet50, batch 8" in text
    assert "forward+backward" in text


def test_eval_prints_json_with_both_levels(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``predictor eval --json`` reports level1, level2 and baselines with MAPE and p90,
    and ``--plot`` draws them."""
    from arkgpu.traces.profiles import default_profile_dir  # noqa: PLC0415

    code = main(
        [
            "predictor",
            "eval",
            "--profiles",
            str(default_profile_dir()),
            "--gpu",
            "V100",
            "--split",
            "random",
            "--seed",
            "1",
            "--json",
            "--plot",
            str(tmp_path / "e.png"),
        ]
    )
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert report["split"] == "random"
    assert (tmp_path / "e.png").read_bytes()[:4] == b"\x89PNG"
    for section in (report["level1"], report["level2"], *report["baselines"]["level2"].values()):
        assert {"mape_pct", "p90_ape_pct"} <= set(section)


def test_bad_input_exits_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A malformed profile or predictor file: exit status 2 and an error naming the file."""
    bad = tmp_path / "x_solo.csv"
    bad.write_text("gpu,model\nV100,resnet50\n")
    assert main(["predictor", "fit", "--profiles", str(bad), "--out", str(tmp_path / "p")]) == 2
    assert "x_solo.csv:1" in capsys.readouterr().err
    junk = tmp_path / "junk.json"
    junk.write_text("{")
    assert main(["predictor", "show", str(junk), "--model", "a", "--batch", "1"]) == 2
    assert "junk.json" in capsys.readouterr().err


def test_fit_takes_several_profile_sets_and_eval_breaks_level2_down(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two --profiles sets (the shipped V100/A100 folder and MIGProfiler's A100 file) fit one
    predictor file with both GPUs, a note on the (GPU, model) both sets measured, and
    ``ask`` answers from it; ``eval --json`` carries the level-2 breakdown."""
    from arkgpu.traces.profiles import default_profile_dir  # noqa: PLC0415

    shipped = default_profile_dir()
    out = tmp_path / "p.json"
    args = [
        "predictor",
        "fit",
        "--profiles",
        str(shipped),
        "--profiles",
        str(shipped / "migprofiler"),
    ]
    assert main([*args, "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert "from 2 profile set(s)" in captured.out
    assert "A100-80GB: 17 DNN models, 0 pairs and 326 MPS groups" in captured.out
    assert "V100: 4 DNN models, 750 pairs and 0 MPS groups" in captured.out
    assert "resnet50 on A100-80GB" in captured.err
    no_mps = ["predictor", "fit", "--profiles", str(shipped), "--no-mps"]
    assert main([*no_mps, "--out", str(tmp_path / "no-mps.json")]) == 0
    assert "A100-80GB: 11 DNN models, 0 pairs and 0 MPS groups" in capsys.readouterr().out
    assert (
        main(["predictor", "ask", str(out), "--model", "resnet50", "--batch", "512", "--json", "-"])
        == 0
    )
    answer = json.loads(capsys.readouterr().out)
    assert answer["confident"] is False
    assert "batch 512" in answer["reasons"][0]
    code = main(
        ["predictor", "eval", "--profiles", str(shipped), "--gpu", "A100-80GB", "--json", "-"]
    )
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    strength = report["level2_breakdown"]["strength"]
    compared = {"arkgpu guarded", "arkgpu contention", "no-interference", "igniter-linear"}
    assert set(strength) == compared
    for name in compared - {"igniter-linear"}:  # no L2 use measured on the A100
        assert sum(b["count"] for b in strength[name].values()) == report["level2"]["count"] > 0
    coverage = report["level2_coverage"]["strength"]
    assert sum(b["count"] for b in coverage.values()) == report["level2"]["count"]
    assert all(0.0 <= b["coverage"] <= 1.0 for b in coverage.values())
    assert set(report["level2_breakdown"]["corunners"]["no-interference"]) <= {
        f"{n} co-runner" + ("" if n == 1 else "s") for n in range(1, 5)
    }


def test_eval_repeats_pools_random_splits_and_refuses_other_splits(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``--repeats 2`` titles the tables with both seeds and gives each interval bin the
    lowest and highest coverage of the two splits; with a split that ignores the seed it is
    a one-line error naming the option."""
    from arkgpu.traces.profiles import default_profile_dir  # noqa: PLC0415

    args = [
        "predictor",
        "eval",
        "--profiles",
        str(default_profile_dir()),
        "--gpu",
        "V100",
        "--repeats",
        "2",
    ]
    assert main([*args, "--seed", "5"]) == 0
    out = capsys.readouterr().out
    assert "split random (seeds 5-6)" in out
    assert "lowest - highest of the 2 splits" in out
    row = next(line for line in out.splitlines() if "strength <1.10" in line)
    assert re.search(r"\d+\.\d\d% - \d+\.\d\d%", row), row
    code = main([*args, "--split", "leave-one-model-out"])
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert "--repeats" in err
    assert "leave-one-model-out" in err


def test_eval_new_model_points_titles_the_table_and_needs_leave_one_model_out(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``--new-model-points 3x2`` says in the title how a held-out model was fitted; with
    another split it is a one-line error naming the option."""
    from arkgpu.traces.profiles import default_profile_dir  # noqa: PLC0415

    args = ["predictor", "eval", "--profiles", str(default_profile_dir()), "--gpu", "V100"]
    points = ["--new-model-points", "3x2"]
    assert main([*args, "--split", "leave-one-model-out", *points]) == 0
    out = capsys.readouterr().out
    assert "a held-out model fitted on 3 batches x 2 shares of its own points" in out
    assert main([*args, *points]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert "--new-model-points" in err


def test_bench_times_level2_for_repeated_and_unseen_workloads(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`predictor bench --json` reports a co-located prediction both for workloads asked
    before and never asked before, in wall and CPU time (issue 35's <= 20 us target is
    read from these, not asserted: the machine is shared)."""
    assert main(["predictor", "bench", "--queries", "200", "--samples", "1", "--json", "-"]) == 0
    timings = json.loads(capsys.readouterr().out)
    for key in ("one_colocated_us", "fresh_colocated_us", "fresh_colocated_cpu_us"):
        assert timings[key] > 0, key
    assert timings["queries"] == 200


def test_ask_with_corunners_answers_level2_with_its_interval(
    fitted: Predictor, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`predictor ask --with` gives the co-located latency, its interval and whether the pair
    was measured together; a malformed co-runner is a one-line error (exit 2)."""
    path = tmp_path / "p.json"
    fitted.save(path)
    ask = ["predictor", "ask", str(path), "--model", "alexnet", "--batch", "8", "--share", "0.5"]
    assert main([*ask, "--with", "alexnet:8:0.5", "--json", "-"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert (answer["kind"], answer["confident"]) == ("new-pair", False)
    assert answer["low_ms"] < answer["latency_ms"] < answer["high_ms"]
    assert main([*ask, "--with", "vgg19:8:0.5"]) == 0
    assert "measured-pair); confident" in capsys.readouterr().out
    assert main([*ask, "--with", "vgg19:8"]) == 2
    assert "expected MODEL:BATCH:SHARE" in capsys.readouterr().err
