"""Profiling a GPU: models alone and in pairs on compute shares set by the limiter,
written as canonical profiles (docs/PROFILING.md).

- :mod:`~arkgpu.profiling.plans`: what is measured, and how long it takes (pure);
- :mod:`~arkgpu.profiling.workers`, :mod:`~arkgpu.profiling.torch_backend`:
  the processes that run the models (fake driver, PyTorch);
- :mod:`~arkgpu.profiling.running`: the run, point by point, resumable;
- :mod:`~arkgpu.profiling.results`: the output folder and its profiles;
- :mod:`~arkgpu.profiling.nvml`: GPU name, driver and utilisation.
"""
