"""The DRA driver (``arkgpu dra-driver run``): GPUs as devices with consumable capacity.

Publishes one ResourceSlice (resource.k8s.io/v1) per node, whose devices (one per
GPU) allow multiple allocations and offer the consumable capacities ``memory`` and
``cores``; kube-scheduler then allocates shares of a GPU to ResourceClaims itself
(docs/k8s/DRA.md).
"""
