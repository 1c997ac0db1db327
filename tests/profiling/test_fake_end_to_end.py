"""``arkgpu profile run --backend fake``: real processes on the fake libcuda and NVML, under
the limiter, end to end: plan, workers, shares, profiles, the predictor reading them, resume."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from arkgpu.profiling.workers import FAKE_MODELS
from arkgpu.traces.profiles import load_pair_profiles, load_solo_profiles


def arkgpu_command() -> list[str]:
    """The ``arkgpu`` command of this interpreter."""
    return [sys.executable, "-m", "arkgpu"]


QUICK = ("--warmup-s", "0.05", "--measure-s", "0.3", "--min-iterations", "5")


def _run(
    args: list[str], env: dict[str, str], timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*arkgpu_command(), *args],
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.timeout(300)
def test_profiles_follow_the_fake_kernels_and_the_shares_and_the_predictor_fits_them(
    workdir: Path, fake_env: dict[str, str]
) -> None:
    """Latency >= the kernel's device time; GPU time held to the share by the limiter (as
    NVML sees it); GPU and driver from NVML; the folder fits as a predictor as it is."""
    out = workdir / "out"
    args = ["profile", "run", "--backend", "fake", "--models", "fake-small,fake-large"]
    args += ["--batches", "1,8", "--shares", "0.25,0.5,1", "--pair-shares", "0.5:0.5"]
    done = _run([*args, *QUICK, "--out", str(out)], fake_env)
    assert done.returncode == 0, done.stderr
    assert "on ArkGPU Fake GPU (driver fake-550.0)" in done.stdout
    lines = done.stderr.splitlines()
    assert lines[0].startswith("profile: 13 points, 0 done before; about ")
    assert any(line.startswith("profile: [13/13] pair fake-small b4 s0.5") for line in lines)
    solo = {(r.model, r.batch, r.share): r for r in load_solo_profiles(out)}
    assert len(solo) == 12
    assert {r.gpu for r in solo.values()} == {"ArkGPU-Fake-GPU"}
    for (model, batch, share), row in solo.items():
        kernel_ms = FAKE_MODELS[model].kernel_us(batch) / 1000.0
        assert row.latency_ms >= kernel_ms * 0.95, (model, batch, share)  # ran on the device
    # Paced by the limiter: a 3.2 ms kernel on a quarter of the GPU waits for its tokens.
    assert solo[("fake-large", 8, 0.25)].latency_ms >= 0.7 * 3.2 / 0.25
    [pair] = load_pair_profiles(out)
    assert (pair.model_a, pair.model_b, pair.share_a, pair.share_b) == (
        "fake-small",
        "fake-large",
        0.5,
        0.5,
    )
    assert pair.latency_b_ms >= FAKE_MODELS["fake-large"].kernel_us(4) / 1000.0
    with open(out / "arkgpu-fake-gpu_solo_stats.csv", newline="") as handle:
        stats = {(r["model"], r["batch"], r["share"]): r for r in csv.DictReader(handle)}
    for key, stat in stats.items():  # NVML saw each share held; key: (model, batch, share)
        assert float(stat["gpu_util_pct"]) <= 100.0 * float(key[2]) + 10.0, key
    assert float(stats[("fake-large", "8", "1")]["gpu_util_pct"]) > 40.0
    run = json.loads((out / "run.json").read_text())
    assert run["gpu"] == {
        "nvml_name": "ArkGPU Fake GPU",
        "driver": "fake-550.0",
        "gpu": "ArkGPU-Fake-GPU",
    }
    fitted = _run(
        ["predictor", "fit", "--profiles", str(out), "--out", str(workdir / "p.json")], fake_env
    )
    assert fitted.returncode == 0, fitted.stderr
    assert "2 level-1 curves, 1 co-located records at level 2" in fitted.stdout
    assert "ArkGPU-Fake-GPU: 2 DNN models, 1 pairs" in fitted.stdout


def _points(out: Path) -> dict[str, tuple[int, str]]:
    return {
        p.name: (p.stat().st_mtime_ns, p.read_text())
        for p in sorted((out / "points").glob("*.json"))
    }


@pytest.mark.timeout(300)
def test_a_killed_run_resumes_without_measuring_finished_points_again(
    workdir: Path, fake_env: dict[str, str]
) -> None:
    """SIGKILL mid-run leaves only whole point files; the rerun skips them and finishes."""
    out = workdir / "out"
    args = ["profile", "run", "--backend", "fake", "--models", "fake-tiny,fake-small"]
    args += ["--batches", "1,2,4,8", "--shares", "0.5,1", "--pair-shares", "0.5:0.5"]
    args += [*QUICK, "--out", str(out)]
    proc = subprocess.Popen(
        [*arkgpu_command(), *args],
        env=fake_env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    while len(list((out / "points").glob("*.json"))) < 3 and time.monotonic() < deadline:
        assert proc.poll() is None, "the run ended before it could be killed"
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    before = _points(out)
    assert 3 <= len(before) < 17
    for _, text in before.values():
        assert len(json.loads(text)["measured"]) in (1, 2)  # whole documents only
    done = _run(args, fake_env)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[0].startswith(f"profile: 17 points, {len(before)} done before")
    assert f"({len(before)} done before, {17 - len(before)} measured in" in done.stdout
    after = _points(out)
    assert len(after) == 17
    for name, (mtime, text) in before.items():
        assert after[name] == (mtime, text), f"{name} was measured again"
    assert len(load_solo_profiles(out)) == 16
    assert len(load_pair_profiles(out)) == 1


def test_a_finished_plan_reruns_as_a_no_op_and_dry_run_measures_nothing(
    workdir: Path, fake_env: dict[str, str]
) -> None:
    """Nothing is left to measure; --dry-run prints the plan and its expected time only."""
    out = workdir / "out"
    args = ["profile", "run", "--backend", "fake", "--models", "fake-tiny", "--batches", "1"]
    args += ["--shares", "1", *QUICK, "--out", str(out)]
    assert _run(args, fake_env).returncode == 0
    again = _run(args, fake_env)
    assert "(1 done before, 0 measured in" in again.stdout
    dry = _run([*args[:-2], "--out", str(workdir / "dry"), "--dry-run"], fake_env)
    assert dry.returncode == 0, dry.stderr
    assert "1 solo + 0 pair points" in dry.stdout
    assert not (workdir / "dry" / "points").exists()


@pytest.mark.timeout(300)
def test_sigterm_stops_the_run_cleanly_keeping_finished_points(
    workdir: Path, fake_env: dict[str, str]
) -> None:
    """SIGTERM: exit 130 with one line, the workers' regions removed, finished points kept."""
    out = workdir / "out"
    args = ["profile", "run", "--backend", "fake", "--models", "fake-tiny", "--batches", "1,2,4"]
    args += ["--shares", "0.25,0.5,1", *QUICK, "--out", str(out)]
    proc = subprocess.Popen(
        [*arkgpu_command(), *args],
        env=fake_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while not list((out / "points").glob("*.json")) and time.monotonic() < deadline:
        assert proc.poll() is None, "the run ended before it could be stopped"
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert err.splitlines()[-1] == "arkgpu: interrupted"
    assert list((workdir / "tmp").iterdir()) == []  # regions and worker homes removed
    kept = list((out / "points").glob("*.json"))
    assert 1 <= len(kept) < 9
    assert len(load_solo_profiles(out)) == len(kept)
