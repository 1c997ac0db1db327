"""GPU models: memory and streaming multiprocessors, looked up by name.

The openb trace names GPU models ``G1``, ``G2`` and ``G3`` without disclosing
them; their figures here are placeholders (memory of a 32 GB part, 80 SMs)
that placement never reads, since the trace expresses GPU demand in milli-GPU
shares, not in MiB. Published specifications are used for every named model.
"""

from __future__ import annotations

from dataclasses import dataclass

#: The GPU of iGniter's measured profiles: the co-location simulator's ground truth
#: and the predictor's default GPU. Every other module names it through this constant.
REFERENCE_GPU = "V100"


@dataclass(frozen=True, slots=True)
class GpuModel:
    """One kind of GPU."""

    name: str
    """Model name as the traces and node labels spell it (``V100M32``, ``A100-80GB``)."""
    memory_mib: int
    """Device memory in MiB."""
    sm_count: int
    """Streaming multiprocessors; the unit of spatial sharing (MPS, MIG)."""
    disclosed: bool = True
    """False for the trace's anonymised models, whose figures are placeholders."""


def _catalogue() -> dict[str, GpuModel]:
    models = [
        GpuModel("G1", 32768, 80, disclosed=False),
        GpuModel("G2", 32768, 80, disclosed=False),
        GpuModel("G3", 32768, 80, disclosed=False),
        GpuModel("T4", 15360, 40),
        GpuModel("P100", 16384, 56),
        GpuModel("V100M16", 16384, 80),
        GpuModel("V100M32", 32768, 80),
        GpuModel(REFERENCE_GPU, 32768, 80),
        GpuModel("A10", 24576, 72),
        GpuModel("A100-40GB", 40960, 108),
        GpuModel("A100-80GB", 81920, 108),
        GpuModel("H100", 81920, 132),
        GpuModel("H200", 143360, 132),
    ]
    return {m.name: m for m in models}


class UnknownGpuModelError(KeyError):
    """A GPU model name that the catalogue does not know."""


def gpu_model(name: str) -> GpuModel:
    """Return the GPU model called ``name``; raise :class:`UnknownGpuModelError` if none."""
    catalogue = _catalogue()
    try:
        return catalogue[name]
    except KeyError:
        known = ", ".join(sorted(catalogue))
        raise UnknownGpuModelError(f"unknown GPU model {name!r} (known: {known})") from None


def known_gpu_models() -> frozenset[str]:
    """Every model name :func:`gpu_model` accepts."""
    return frozenset(_catalogue())
