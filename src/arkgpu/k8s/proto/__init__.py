"""Protocol definitions vendored from Kubernetes, and the Python stubs generated from them.

``deviceplugin/v1beta1/api.proto`` is the kubelet's device plugin API and
``podresources/v1/api.proto`` its PodResources API, copied unchanged from
k8s.io/kubelet (README.md beside this file); the ``*_pb2*`` modules are
grpcio-tools' output for them (never edited by hand).
"""
