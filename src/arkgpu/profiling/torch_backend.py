"""The real-GPU backend: torchvision models or TorchScript files in PyTorch worker processes.

PyTorch is imported only in the worker (:mod:`arkgpu.profiling.torch_worker`),
which runs with this interpreter (``sys.executable``), the interception
library preloaded and its container's region. As root the worker runs as
nobody (the limiter refuses a process that could write its limits), so the
interpreter, its packages and this package must be readable by nobody.

A plan's model is a torchvision name (``resnet50``, ``mobilenet_v2``; the
profile's ``model`` column drops the underscores: ``mobilenetv2``, as the
shipped profiles spell it), or ``NAME=PATH`` / ``PATH`` of a TorchScript file
(``PATH``'s stem names it).
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import arkgpu
from arkgpu.limiter import builds, native
from arkgpu.limiter.containers import FakeContainer
from arkgpu.profiling.looping import Window
from arkgpu.profiling.workers import Worker, last_line

READY_TIMEOUT_S = 300.0
"""Longest wait for a worker to load its model onto the GPU, s."""
SCRIPT_SUFFIXES = (".pt", ".pth", ".ts", ".torchscript")
"""File name endings taken as TorchScript files."""


def script_file(model: str) -> tuple[str, Path] | None:
    """(name, path) when ``model`` names a TorchScript file, else None."""
    name, eq, path = model.partition("=")
    if eq:
        return name, Path(path)
    if model.endswith(SCRIPT_SUFFIXES):
        return Path(model).stem, Path(model)
    return None


SYSTEM_PYTHON = "/usr/bin/python3"
"""The interpreter a worker running as another user falls back to when it cannot run ours."""


def interpreter(user: int | None) -> tuple[str, dict[str, str]]:
    """The interpreter the worker's ``user`` can run, and environment to add.

    As root the worker runs as nobody, who may not reach this interpreter (a
    virtual environment whose Python lies under /root); then the system
    ``python3`` runs it with this process's ``sys.path`` (where torch is found).
    """
    if user is None:
        return sys.executable, {}
    try:
        subprocess.run([sys.executable, "-c", "pass"], user=user, check=True, timeout=60)
    except (PermissionError, subprocess.CalledProcessError):
        return SYSTEM_PYTHON, {"PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    return sys.executable, {}


def _json_object(line: bytes) -> dict[str, Any] | None:
    try:
        doc = json.loads(line)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


class TorchWorker:
    """A PyTorch worker process (:mod:`arkgpu.profiling.torch_worker`)."""

    def __init__(self, spec: dict[str, Any], env: dict[str, str], user: int | None, log: Path):
        self.log = log
        python, extra = interpreter(user)
        if extra:
            env = {**env, "PYTHONPATH": os.pathsep.join((env["PYTHONPATH"], extra["PYTHONPATH"]))}
        with log.open("w") as err:
            self.proc = subprocess.Popen(
                [python, "-m", "arkgpu.profiling.torch_worker", json.dumps(spec)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                env=env,
                user=user,
            )
        self._pending = b""
        ready = self._reply(READY_TIMEOUT_S)
        if not ready.get("ready"):
            self.close()
            raise OSError(f"the PyTorch worker did not start: {last_line(log)} (log: {log})")
        self.device = str(ready.get("device", ""))
        """What the worker says of its GPU (``torch.cuda.get_device_name()``)."""

    def _reply(self, timeout_s: float) -> dict[str, Any]:
        """The next line of the worker's output that is a JSON object ({} on timeout or
        end of output); other lines (a library printing to standard output) are skipped."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout_s
        while True:
            line, newline, rest = self._pending.partition(b"\n")
            if newline:
                self._pending = rest
                doc = _json_object(line)
                if doc is not None:
                    return doc
                continue
            ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
            chunk = os.read(fd, 65536) if ready else b""
            if not chunk:
                return {}
            self._pending += chunk

    def run(self, batch: int, window: Window) -> tuple[list[float], float]:
        """Ask for one point's batches and wait for their latencies."""
        assert self.proc.stdin is not None
        ask = {"batch": batch, "warmup_s": window.warmup_s, "measure_s": window.measure_s}
        ask |= {"min_iterations": window.min_iterations}
        ask |= {"max_iterations": window.max_iterations}
        self.proc.stdin.write((json.dumps(ask) + "\n").encode())
        self.proc.stdin.flush()
        reply = self._reply(READY_TIMEOUT_S + window.warmup_s + window.measure_s * 10)
        if "latencies_ms" not in reply:
            raise OSError(f"the PyTorch worker failed: {last_line(self.log)} (log: {self.log})")
        return [float(v) for v in reply["latencies_ms"]], float(reply["start"])

    def close(self) -> None:
        """End its input and wait for it."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=30)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


class TorchBackend:
    """Models in PyTorch on the real GPU ``device`` (an NVML index)."""

    name = "torch"
    startup_s = 20.0
    fake_state: Path | None = None

    def __init__(self, device: int, input_shape: tuple[int, ...]) -> None:
        self.device = device
        self.input_shape = input_shape

    def nvml_library(self) -> str:
        """The driver's NVML."""
        return "libnvidia-ml.so.1"

    def check_model(self, model: str) -> None:
        """A TorchScript file must exist (a torchvision name is checked by the worker)."""
        script = script_file(model)
        if script is not None and not script[1].is_file():
            raise ValueError(f"--models: TorchScript file {script[1]} not found")

    def profile_name(self, model: str) -> str:
        """torchvision names without underscores; a file's given name or stem."""
        script = script_file(model)
        return script[0] if script else model.replace("_", "")

    def _env(self, container: FakeContainer) -> dict[str, str]:
        env = dict(os.environ)
        package_root = str(Path(arkgpu.__file__).resolve().parents[1])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
        env["LD_PRELOAD"] = builds.preload(native.limiter_library())
        env["ARKGPU_REGION_DIR"] = str(container.region)
        env["CUDA_VISIBLE_DEVICES"] = str(self.device)
        home = container.region.parent / "home"  # the worker's user may have none
        home.mkdir(mode=0o777, exist_ok=True)
        home.chmod(0o777)
        env["HOME"] = env["XDG_CACHE_HOME"] = str(home)
        return env

    def start(self, model: str, container: FakeContainer, log: Path) -> Worker:
        """Start a worker process for ``model``; OSError without PyTorch or torchvision."""
        for package in ("torch", "torchvision"):
            if find_spec(package) is None:
                raise OSError(f"--backend torch needs {package} (pip install {package})")
        script = script_file(model)
        spec = {
            "model": None if script else model,
            "file": str(script[1].resolve()) if script else None,
            "input": list(self.input_shape),
        }
        return TorchWorker(spec, self._env(container), container.user, log)
