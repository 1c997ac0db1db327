"""Protocol definitions vendored from Kubernetes, and the Python stubs generated from them.

``deviceplugin/v1beta1/api.proto`` is the kubelet's device plugin API, copied
unchanged from k8s.io/kubelet v0.37.2 (README.md beside this file); the
``*_pb2*`` modules are grpcio-tools' output for it (never edited by hand).
"""
