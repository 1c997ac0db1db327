"""Helpers of the co-location tests: a fake predictor and tiny scenarios."""

from __future__ import annotations

from collections.abc import Sequence

from arkgpu.predictor import Workload
from arkgpu.sim.colocation.scenarios import Scenario, parse_scenario


class FakePredictor:
    """A predictor with a known formula: ``1 + batch / share`` ms, slowdown 1.1 per co-runner."""

    def latency_ms(self, model: str, batch: int, share: float, gpu: str = "V100") -> float:
        """Level 1."""
        del model, gpu
        return 1.0 + batch / share

    def colocated_latency_ms(
        self, target: Workload, corunners: Sequence[Workload], gpu: str = "V100"
    ) -> float:
        """Level 2."""
        alone = self.latency_ms(target.model, target.batch, target.share, gpu)
        return alone * 1.1 ** len(corunners)


def tiny(body: str, gpus: int = 1, duration_s: float = 20.0, gpu: str = "V100") -> Scenario:
    """A scenario with ``body`` ([[lc]]/[[be]] tables) on ``gpus`` GPUs."""
    head = (
        f'[scenario]\nname = "tiny"\ngpu = "{gpu}"\ngpus = {gpus}\n'
        f"day_s = 60.0\nduration_s = {duration_s}\n"
    )
    return parse_scenario(head + body, "tiny.toml")


def lc(
    name: str, model: str = "resnet50", target: float = 25.0, rps: float = 100.0, mem: int = 2048
) -> str:
    """An [[lc]] table."""
    return (
        f'[[lc]]\nname = "{name}"\nmodel = "{model}"\ntarget_ms = {target}\n'
        f"peak_rps = {rps}\nmem_mib = {mem}\n"
    )


def be(name: str, model: str = "vgg19", iterations: int = 10**9, mem: int = 8192) -> str:
    """A [[be]] table."""
    return (
        f'[[be]]\nname = "{name}"\nmodel = "{model}"\niterations = {iterations}\nmem_mib = {mem}\n'
    )
