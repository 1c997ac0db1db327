"""Generated and vendored protocol code (see README.md in arkgpu/k8s/proto_dra)."""
