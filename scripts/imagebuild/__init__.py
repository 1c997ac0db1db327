"""Builds ArkGPU's container images without a daemon (``make image``; docs/IMAGE.md)."""
