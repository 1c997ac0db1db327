"""Sharing modes of the co-location simulator; importing this package registers them all."""

from arkgpu.sim.colocation.modes import arkgpu, exclusive, hami, mig, mps, tgs, timeslice
from arkgpu.sim.colocation.modes.base import (
    ModeContext,
    ModeNotApplicableError,
    ModeOptions,
    SharingMode,
    mode_class,
    mode_keys,
)

__all__ = [
    "ModeContext",
    "ModeNotApplicableError",
    "ModeOptions",
    "SharingMode",
    "arkgpu",
    "exclusive",
    "hami",
    "mig",
    "mode_class",
    "mode_keys",
    "mps",
    "tgs",
    "timeslice",
]
