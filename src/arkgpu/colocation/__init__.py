"""Level 2 and the node's control loop: pure code over observations, no I/O.

* :mod:`~arkgpu.colocation.sizing`: the level-2 split (smallest share that keeps
  an LC service inside its target, over the fitted predictor).
* :mod:`~arkgpu.colocation.observations`: what the loop sees of a GPU each
  period (LC measurements, BE jobs) and how a measured period becomes one.
* :mod:`~arkgpu.colocation.adjusting`: the adjustment unit (control law).
* :mod:`~arkgpu.colocation.splitting`: LC shares wanted to a GPU's split, in
  basis points (the loop's one fraction-to-basis-points step).
* :mod:`~arkgpu.colocation.deciding`: :class:`NodeController`, one tick per GPU
  and period to a decision per container (share, memory cap, idle-share loans).
* :mod:`~arkgpu.colocation.limiting`: a container's decision as the limiter's
  :class:`~arkgpu.limiter.region.Limits`.

The simulator's ``arkgpu`` modes and the node runtime call the same code.
"""
