"""Kubernetes adapters: scheduler extender and device plugin."""
