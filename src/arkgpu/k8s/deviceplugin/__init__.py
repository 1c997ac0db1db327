"""The kubelet device plugin (``arkgpu device-plugin run``; docs/k8s/DEVICE-PLUGIN.md).

Serves the device plugin API v1beta1 (stubs generated from the kubelet's own
``api.proto``, :mod:`arkgpu.k8s.proto`) on a Unix socket in the kubelet's
directory: advertises ``split_count`` virtual ``nvidia.com/gpu`` devices per
healthy GPU, and on Allocate turns the pod's assignment into a control region
(the limiter's), environment, mounts and device nodes.
"""
