"""The runtime's loop over regions (no container processes): adoption, writes, restart."""

from __future__ import annotations

import fcntl
import os
import struct
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from arkgpu.colocation.deciding import ControlConfig, NodeController
from arkgpu.colocation.observations import BeObservation, GpuObservations, LcObservation
from arkgpu.colocation.sizing import LcDemand, ShareSizer
from arkgpu.limiter import layout
from arkgpu.limiter.lending import lender_path
from arkgpu.limiter.region import LIMITS_FILE, USAGE_FILE, Limits, create_region, read_limits
from arkgpu.limiter.untrusted import start_ticks
from arkgpu.node.bench import attach
from arkgpu.node.config import NodeConfig
from arkgpu.node.pods import PodSpec, write_pod
from arkgpu.node.runtime import NodeRuntime
from arkgpu.predictor import Predictor, default_predictor

LC = PodSpec("lc", "lc", 0, "resnet50", 1024, target_ms=50.0, peak_rps=150.0)
BE = PodSpec("be", "be", 0, "vgg16", 2048)


@pytest.fixture(scope="module")
def predictor() -> Predictor:
    """The predictor fitted on the shipped profiles (once)."""
    return default_predictor()


def _region(root: Path, spec: PodSpec, share_bp: int) -> Path:
    region = create_region(root / spec.name, Limits((None,), share_bp))
    write_pod(region, spec)
    attach(region / USAGE_FILE, os.getpid())  # a process of it runs: the runtime adjusts it
    return region


def _runtime(root: Path, predictor: Predictor, gpus: tuple[int, ...] = (0,)) -> NodeRuntime:
    config = NodeConfig(regions_dir=root, nvml=False, scan_every=1)
    controller = NodeController(ShareSizer(predictor), ControlConfig(config.adjustment))
    return NodeRuntime(config, controller, list(gpus))


def test_adopts_writes_shares_caps_and_links_the_lender(
    tmp_path: Path, predictor: Predictor
) -> None:
    """After start-up, a tick writes both limits (caps from pod.json) and links the LC's usage."""
    lc, be = _region(tmp_path, LC, 5000), _region(tmp_path, BE, 5000)
    runtime = _runtime(tmp_path, predictor)
    runtime.start()
    assert set(runtime.containers) == {"lc", "be"}
    runtime.tick()  # the rebuild period: nothing written
    assert read_limits(lc).share_bp == 5000
    runtime.tick()
    lc_limits, be_limits = read_limits(lc), read_limits(be)
    assert lc_limits.memory_bytes == (1024 << 20,)
    assert be_limits.memory_bytes == (2048 << 20,)
    assert lc_limits.share_bp + be_limits.share_bp == 10_000
    assert be_limits.lent_bp == (lc_limits.share_bp,)
    assert lender_path(be, 0).resolve() == (lc / "usage").resolve()


def test_forgets_a_gone_region_and_adopts_a_new_one(tmp_path: Path, predictor: Predictor) -> None:
    """A removed region is forgotten at the next scan; a new one with pod.json is adopted."""
    _region(tmp_path, LC, 5000)
    be = _region(tmp_path, BE, 5000)
    runtime = _runtime(tmp_path, predictor)
    runtime.start()
    for path in be.iterdir():
        path.unlink()
    be.rmdir()
    runtime.tick()
    assert set(runtime.containers) == {"lc"}
    (tmp_path / "half").mkdir()  # no pod.json yet: not adopted
    create_region(tmp_path / "half", Limits((None,)))
    _region(tmp_path, BE, 5000)
    runtime.tick()
    assert set(runtime.containers) == {"lc", "be"}
    assert runtime.stats.forgotten == 1


def test_a_restart_leaves_every_limit_as_it_was(tmp_path: Path, predictor: Predictor) -> None:
    """A runtime starting over running containers writes nothing in its first period:
    the limits files (generation included) stay byte for byte what they were."""
    lc, be = _region(tmp_path, LC, 3700), _region(tmp_path, BE, 6300)
    before = {p: (p / LIMITS_FILE).read_bytes() for p in (lc, be)}
    runtime = _runtime(tmp_path, predictor)
    runtime.start()
    runtime.tick()
    assert {p: (p / LIMITS_FILE).read_bytes() for p in before} == before
    assert runtime.stats.writes == 0


def test_the_rebuilt_state_continues_from_the_shares_in_force(predictor: Predictor) -> None:
    """NodeController.restore then a tick with quiet feedback (p99 between the relax and
    violation ratios) gives back the share in force, whatever the unit held before."""
    sizer = ShareSizer(predictor)
    demand = LcDemand("resnet50", 50.0, 100.0, 8, 2.0)
    quiet = LcObservation("lc", demand, p99_ms=0.7 * 50.0)
    obs = GpuObservations(0, (quiet,), (BeObservation("be", "vgg16", 32),))
    for current in (1500, 4000, 6000):
        controller = NodeController(sizer)
        controller.restore(obs, {"lc": current, "be": 10_000 - current})
        entries = {e.name: e.share_bp for e in controller.tick(obs).containers()}
        assert abs(entries["lc"] - current) <= 100, current
        assert entries["be"] == 10_000 - entries["lc"]


def test_a_bad_pod_file_is_skipped_with_one_line(
    tmp_path: Path, predictor: Predictor, capsys: pytest.CaptureFixture[str]
) -> None:
    """A region whose pod.json lacks a field, or names another GPU, is not adopted; each is
    said once on standard error, naming the region and the field."""
    region = create_region(tmp_path / "broken", Limits((None,)))
    (region / "pod.json").write_text('{"kind": "lc", "gpu": 0}')
    _region(tmp_path, replace(BE, name="far", gpu=3), 5000)
    runtime = _runtime(tmp_path, predictor)
    runtime.start()
    runtime.scan()
    assert runtime.containers == {}
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2, err
    assert "broken" in err[0]
    assert "model" in err[0]
    assert "far" in err[1]
    assert "GPU 3" in err[1]


def test_hami_pods_keep_their_share_and_the_others_split_the_rest(
    tmp_path: Path, predictor: Predictor
) -> None:
    """Two pods without an ArkGPU class (elastic false) at 30 and 20 percent keep their limits
    for ever; the one opted-in BE job gets the rest of the GPU, not the whole GPU."""
    fixed = [
        _region(tmp_path, PodSpec(f"hami-{bp}", "be", 0, "unknown", elastic=False), bp)
        for bp in (3000, 2000)
    ]
    be = _region(tmp_path, BE, 1000)
    runtime = _runtime(tmp_path, predictor)
    runtime.start()
    for _ in range(4):
        runtime.tick()
    assert [read_limits(r).share_bp for r in fixed] == [3000, 2000]
    assert read_limits(be).share_bp == 5000
    assert "hami-3000" in runtime.containers  # adopted (seen), never adjusted


def test_a_hami_pod_with_no_process_running_holds_no_share(
    tmp_path: Path, predictor: Predictor
) -> None:
    """A pod without an ArkGPU class at 30 percent whose one process ended (a finished HAMi
    job whose region the device plugin has not removed yet): the BE job gets the whole GPU.
    Once a process of it runs again it holds its 30 percent and the BE job gets 70."""
    hami = create_region(tmp_path / "hami", Limits((None,), 3000))
    write_pod(hami, PodSpec("hami", "be", 0, "unknown", elastic=False))
    ended = subprocess.Popen(["sleep", "60"])
    try:
        attach(hami / USAGE_FILE, ended.pid)
    finally:
        ended.kill()
        ended.wait()
    be = _region(tmp_path, BE, 1000)
    runtime = _runtime(tmp_path, predictor)
    runtime.start()
    for _ in range(4):
        runtime.tick()
    assert read_limits(be).share_bp == 10_000
    assert read_limits(hami).share_bp == 3000  # its own limits are never rewritten
    attach(hami / USAGE_FILE, os.getpid())
    for _ in range(4):
        runtime.tick()
    assert read_limits(be).share_bp == 7000


def test_nothing_is_written_before_a_process_attaches(tmp_path: Path, predictor: Predictor) -> None:
    """BE jobs at 60 and 40 percent with no process yet: their limits stay as the plugin wrote
    them; once one's process attaches, only that one is written."""
    first = create_region(tmp_path / "be1", Limits((None,), 6000))
    write_pod(first, replace(BE, name="be1"))
    second = create_region(tmp_path / "be2", Limits((None,), 4000))
    write_pod(second, replace(BE, name="be2"))
    runtime = _runtime(tmp_path, predictor)
    runtime.start()
    for _ in range(3):
        runtime.tick()
    assert (read_limits(first).share_bp, read_limits(second).share_bp) == (6000, 4000)
    attach(first / USAGE_FILE, os.getpid())
    runtime.tick()
    assert read_limits(first).share_bp == 10_000
    assert read_limits(second).share_bp == 4000


def test_a_pod_on_two_gpus_is_held_on_both(tmp_path: Path, predictor: Predictor) -> None:
    """A HAMi pod with 30 percent of GPUs 0 and 1: the BE job on GPU 1 gets the other 70."""
    pair = PodSpec("pair", "be", 0, "unknown", gpus=(0, 1), elastic=False)
    _region(tmp_path, pair, 3000)
    be = _region(tmp_path, replace(BE, gpu=1), 1000)
    runtime = _runtime(tmp_path, predictor, (0, 1))
    runtime.start()
    for _ in range(3):
        runtime.tick()
    assert read_limits(be).share_bp == 7000


def test_a_share_change_keeps_the_caps_of_every_gpu_of_the_container(
    tmp_path: Path, predictor: Predictor
) -> None:
    """An elastic BE container on GPUs 0 and 1 (a two-device DRA request: 2 and 3 GiB): the
    runtime writes its new share and the first GPU's cap from pod.json, and keeps the second
    GPU's cap as the driver wrote it (it once wrote a single cap, dropping the second)."""
    spec = replace(BE, name="two", gpus=(0, 1), memory_mib=2048)
    region = create_region(tmp_path / "two", Limits((2048 << 20, 3072 << 20), 2000))
    write_pod(region, spec)
    attach(region / USAGE_FILE, os.getpid())
    runtime = _runtime(tmp_path, predictor, (0, 1))
    runtime.start()
    for _ in range(3):
        runtime.tick()
    limits = read_limits(region)
    assert limits.share_bp == 10_000
    assert limits.memory_bytes == (2048 << 20, 3072 << 20)


def test_a_container_is_named_by_its_pod_when_pod_json_says_so(
    tmp_path: Path, predictor: Predictor, capsys: pytest.CaptureFixture[str]
) -> None:
    """The device plugin's region folder is dev-<hash>; pod.json's namespace, pod and
    container name the container for metrics and logs. Without them the folder names it; a
    name of the wrong type is skipped with one line naming the field."""
    named = replace(BE, name="dev-4f1c", namespace="team", pod="train-0", container="main")
    _region(tmp_path, named, 5000)
    _region(tmp_path, replace(LC, name="demo"), 5000)
    broken = create_region(tmp_path / "dev-bad", Limits((None,)))
    (broken / "pod.json").write_text('{"kind": "be", "gpu": 0, "model": "vgg16", "pod": 7}')
    runtime = _runtime(tmp_path, predictor)
    runtime.start()
    labels = {n: c.spec.label for n, c in runtime.containers.items()}
    assert labels == {"dev-4f1c": "team/train-0/main", "demo": "demo"}
    err = capsys.readouterr().err
    assert "dev-bad" in err
    assert "field pod: expected a string, got 7" in err


def _foreign_attach(usage: Path) -> None:
    """Attach a process of another pid namespace: its pid 1 names another process here
    (another start time), as a container's first process seen from the node pod."""
    slot = layout.UsageStruct.procs.offset
    fd = os.open(usage, os.O_RDWR)
    try:
        os.pwrite(fd, struct.pack("<i", 1), slot + layout.ProcStruct.pid.offset)
        ticks = struct.pack("<Q", start_ticks(1) + 12345)
        os.pwrite(fd, ticks, slot + layout.ProcStruct.start_ticks.offset)
    finally:
        os.close(fd)


def _hold_liveness_lock(usage: Path) -> int:
    """Take the library's liveness lock (an OFD read lock on byte 0) as its process does."""
    fd = os.open(usage, os.O_RDWR)
    fcntl.fcntl(fd, fcntl.F_OFD_SETLK, struct.pack("hhqqi4x", fcntl.F_RDLCK, 0, 0, 1, 0))
    return fd


def test_a_container_of_another_pid_namespace_is_adjusted_while_its_library_lives(
    tmp_path: Path, predictor: Predictor
) -> None:
    """The runtime in the chart's node pod cannot judge a container's pids: a BE job whose
    slot names another namespace's pid is adjusted (alone on its GPU: the whole GPU) while a
    process holds the library's liveness lock on its usage file, not before, and counts no
    more once the lock is gone (the process died)."""
    region = create_region(tmp_path / "be", Limits((None,), 4000))
    write_pod(region, BE)
    _foreign_attach(region / USAGE_FILE)
    runtime = _runtime(tmp_path, predictor)
    runtime.start()
    runtime.tick()
    assert read_limits(region).share_bp == 4000
    fd = _hold_liveness_lock(region / USAGE_FILE)
    runtime.tick()
    assert read_limits(region).share_bp == 10_000
    os.close(fd)
    runtime.tick()
    assert not runtime.containers["be"].active()
