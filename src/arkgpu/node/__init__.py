"""The node runtime: one program per GPU node driving live containers through the limiter.

All I/O of the node's control loop lives here; the decisions are the pure code
of :mod:`arkgpu.colocation` (the same :class:`~arkgpu.colocation.deciding.NodeController`
the simulator's ``arkgpu`` modes call).

* :mod:`~arkgpu.node.config`: the runtime's settings (TOML, one dataclass).
* :mod:`~arkgpu.node.pods`: what a container's region says about its pod (``pod.json``).
* :mod:`~arkgpu.node.gpus`: GPU discovery through NVML.
* :mod:`~arkgpu.node.locking`: one runtime per node (flock).
* :mod:`~arkgpu.node.observing`: a container's region read into an observation.
* :mod:`~arkgpu.node.runtime`: the control loop (adopt, observe, decide, write).
* :mod:`~arkgpu.node.demo`: one LC and one BE workload on a fake GPU under the runtime.

docs/NODE.md describes the configuration, the control law and what is built.
"""
