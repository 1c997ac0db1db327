"""ArkGPU: GPU sharing for Kubernetes that keeps latency-critical inference within its target."""

__version__ = "0.1.0"
