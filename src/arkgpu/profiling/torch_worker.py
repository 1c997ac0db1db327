"""The PyTorch worker process: one model on the GPU, driven over stdin/stdout.

Started by :class:`arkgpu.profiling.torch_backend.TorchWorker` as
``python -m arkgpu.profiling.torch_worker SPEC`` under the interception library;
SPEC is JSON: ``{"model": NAME or null, "file": PATH or null, "input": [C, H, W]}``.
A torchvision model gets random weights (timing only); a TorchScript file is
loaded as is. It prints ``{"ready": true}`` once the model is on the GPU, then
answers each request line ``{"batch": B, "warmup_s": .., "measure_s": ..,
"min_iterations": .., "max_iterations": ..}`` with ``{"latencies_ms": [...],
"start": T}``. End of input ends it.

Each batch is one forward pass on a random input already on the GPU, under
``torch.inference_mode()``, followed by ``torch.cuda.synchronize()``: the
latency is the GPU time of the batch plus the framework's launch overhead,
with no host-to-device copy.
"""

from __future__ import annotations

import json
import sys
from importlib import import_module
from typing import Any

from arkgpu.profiling.looping import Window, measure


def _load(spec: dict[str, Any]) -> Any:
    torch = import_module("torch")  # only in the worker process
    if spec.get("file"):
        module = torch.jit.load(spec["file"], map_location="cuda")
    else:
        torchvision = import_module("torchvision")
        module = torchvision.models.get_model(spec["model"], weights=None)
    return module.cuda().eval()


def main() -> int:
    """Serve requests until end of input."""
    torch = import_module("torch")
    spec = json.loads(sys.argv[1])
    model = _load(spec)
    inputs: dict[int, Any] = {}
    print(json.dumps({"ready": True, "device": torch.cuda.get_device_name()}), flush=True)
    for line in sys.stdin:
        ask = json.loads(line)
        batch = int(ask["batch"])
        if batch not in inputs:
            inputs[batch] = torch.randn(batch, *spec["input"], device="cuda")
        x = inputs[batch]

        def step(x: Any = x) -> None:
            with torch.inference_mode():
                model(x)
            torch.cuda.synchronize()

        window = Window(
            ask["warmup_s"], ask["measure_s"], ask["min_iterations"], ask["max_iterations"]
        )
        latencies, start = measure(step, window)
        print(json.dumps({"latencies_ms": latencies, "start": start}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
