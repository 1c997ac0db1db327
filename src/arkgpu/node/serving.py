"""``arkgpu node run``: build the runtime from its configuration and run it.

The lock is taken before anything else, so a second runtime on the node stops
at once with one line; SIGTERM and SIGINT end the loop after the current
period (the limits stay in the regions).
"""

from __future__ import annotations

import signal
import sys
from types import FrameType

from arkgpu.colocation.deciding import ControlConfig, NodeController
from arkgpu.colocation.sizing import ShareSizer
from arkgpu.node.backstop import open_backstop
from arkgpu.node.config import NodeConfig
from arkgpu.node.gpus import assumed, discover, nvml_handles
from arkgpu.node.locking import NodeLock
from arkgpu.node.runtime import NodeRuntime
from arkgpu.predictor import Predictor, default_predictor


def build_runtime(config: NodeConfig) -> NodeRuntime:
    """The runtime for ``config``: GPUs discovered, predictor loaded, controller built."""
    gpus = discover() if config.nvml else assumed(config.gpus)
    if not gpus:
        raise OSError("NVML reports no GPU on this node")
    predictor = Predictor.load(config.predictor) if config.predictor else default_predictor()
    calibration = config.calibration if config.calibrate else None
    control = ControlConfig(config.adjustment, config.lend_idle_share, calibration=calibration)
    controller = NodeController(ShareSizer(predictor, config.gpu_model), control)
    runtime = NodeRuntime(config, controller, [g.index for g in gpus])
    if config.backstop != "off":
        runtime.backstop = open_backstop(
            config.backstop,
            config.backstop_margin_mib,
            config.backstop_grace_s,
            [g.index for g in gpus],
            config.backstop_unattached,
        )
    return runtime


def serve(config: NodeConfig) -> int:
    """Run the node runtime until SIGTERM or SIGINT; returns the exit status."""
    lock = NodeLock(config.lock_path)
    stopping: list[int] = []

    def stop(signum: int, frame: FrameType | None) -> None:
        stopping.append(signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        runtime = build_runtime(config)
        if config.metrics_port:
            from arkgpu.node.metrics import serve_metrics  # noqa: PLC0415 (the [node] extra)

            handles = nvml_handles(sorted(runtime.gpus)) if config.nvml else None
            serve_metrics(runtime, config.metrics_address, config.metrics_port, handles)
        print(
            f"arkgpu node: {len(runtime.gpus)} GPU(s), regions {config.regions_dir}, "
            f"period {config.period_s:g} s",
            file=sys.stderr,
            flush=True,
        )
        runtime.run(lambda: bool(stopping))
    finally:
        lock.close()
    return 0
