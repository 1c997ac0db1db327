"""The PyTorch backend without PyTorch: model names, files, and the worker's protocol.

The worker process is exercised end to end with a *stand-in* ``torch`` and
``torchvision`` (a few lines below whose forward pass sleeps in proportion to
the batch): this pins the process, its environment (limiter preloaded, its
region, the GPU index) and the request/reply protocol, not PyTorch itself,
which tests/gpu/profile_run.sh runs on a real GPU.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import arkgpu
from arkgpu.limiter import Limits, native
from arkgpu.limiter.containers import FakeContainer, make_world_readable
from arkgpu.profiling.looping import Window
from arkgpu.profiling.torch_backend import TorchBackend, script_file

TORCH = """
import os, time
class _Cuda:
    @staticmethod
    def get_device_name():
        keys = ("ARKGPU_REGION_DIR", "CUDA_VISIBLE_DEVICES", "LD_PRELOAD")
        return "|".join(os.environ.get(k, "") for k in keys)
    @staticmethod
    def synchronize():
        pass
cuda = _Cuda()
class _Mode:
    def __enter__(self):
        return self
    def __exit__(self, *a):
        return False
def inference_mode():
    return _Mode()
def randn(batch, *shape, device=None):
    return batch
"""
TORCHVISION = """
import time
class _Net:
    def cuda(self):
        return self
    def eval(self):
        return self
    def __call__(self, batch):
        time.sleep(0.002 * batch)
class models:
    @staticmethod
    def get_model(name, weights=None):
        if name != "standin50":
            raise ValueError(f"unknown model {name}")
        return _Net()
"""


def test_model_names_and_torchscript_files() -> None:
    """torchvision names lose underscores; NAME=PATH and *.pt name TorchScript files."""
    backend = TorchBackend(0, (3, 224, 224))
    assert backend.profile_name("mobilenet_v2") == "mobilenetv2"
    assert backend.profile_name("mine=/x/y.bin") == "mine"
    assert backend.profile_name("/models/bert.pt") == "bert"
    assert script_file("resnet50") is None
    with pytest.raises(ValueError, match=r"--models: TorchScript file /no/such\.pt not found"):
        backend.check_model("/no/such.pt")
    backend.check_model("resnet50")  # checked by the worker when it loads


@pytest.fixture
def stand_in(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Stand-in torch and torchvision packages on this process's and the worker's
    path; beside them a copy of arkgpu and of the native build, which the worker's
    user (nobody, as root) can read wherever the checkout lies (a clone in /root)."""
    packages = workdir / "standin"
    for name, text in (("torch", TORCH), ("torchvision", TORCHVISION)):
        (packages / name).mkdir(parents=True)
        (packages / name / "__init__.py").write_text(text)
    for path in (packages, packages / "torch", packages / "torchvision"):
        make_world_readable(path)
    source = Path(arkgpu.__file__).parent
    shutil.copytree(source, packages / "arkgpu", ignore=shutil.ignore_patterns("build*", "*.pyc"))
    monkeypatch.syspath_prepend(str(packages))
    monkeypatch.setenv("PYTHONPATH", str(packages))
    monkeypatch.setenv(native.NATIVE_DIR_ENV, str(native.stage(workdir / "native")))
    return packages


@pytest.mark.timeout(120)
def test_the_worker_runs_under_the_limiter_and_times_its_batches(
    workdir: Path, stand_in: Path
) -> None:
    """Ready with the region, GPU index and limiter in its environment; batches timed."""
    container = FakeContainer.create(workdir / "region", workdir / "unused", Limits((None,)))
    backend = TorchBackend(3, (3, 8, 8))
    worker = backend.start("standin50", container, workdir / "w.log")
    try:
        region, device, preload = worker.device.split("|")  # type: ignore[attr-defined]
        assert (region, device) == (str(container.region), "3")
        assert preload.endswith("libarkgpu_limiter.so")
        window = Window(0.05, 0.3, 5, 1000)
        small, start = worker.run(2, window)
        large, _ = worker.run(20, window)
    finally:
        worker.close()
    assert start > 0
    assert len(small) >= 5
    assert 1.0 <= sorted(small)[len(small) // 2] < 50.0
    assert sorted(large)[len(large) // 2] > 5 * sorted(small)[len(small) // 2]


@pytest.mark.timeout(120)
def test_an_unknown_model_fails_in_one_line_naming_the_log(workdir: Path, stand_in: Path) -> None:
    """A model torchvision does not have: OSError with the worker's last line and its log."""
    container = FakeContainer.create(workdir / "region", workdir / "unused", Limits((None,)))
    with pytest.raises(OSError, match=r"did not start: ValueError: unknown model nosuch.*w\.log"):
        TorchBackend(0, (3, 8, 8)).start("nosuch", container, workdir / "w.log")
