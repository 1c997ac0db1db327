"""The API server through the official ``kubernetes`` Python client (docs/k8s/EXTENDER.md says why).

Only the client's transport is used: configuration (a kubeconfig or the
in-cluster service account), authentication, TLS, retries of the connection
pool, and the watch's line stream. Answers are read as JSON
(``_preload_content=False``), never deserialised into the generated model
classes: faster for large lists, and the same dicts the rest of ArkGPU reads.
Every failure becomes an :class:`~arkgpu.k8s.cluster.api.ApiError` (status 0
when the server could not be reached).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes import config as _config
from kubernetes import watch as _watch
from kubernetes.client.exceptions import ApiException

from arkgpu.k8s.cluster.api import ApiError, Json, Listed, WatchEvent

config: Any = _config  # the package's loaders and watch carry no type annotations
watch: Any = _watch

REQUEST_TIMEOUT_S = 15.0
"""Longest wait for one API call other than a watch, seconds."""
POOL_SIZE = 64
"""HTTPS connections kept open to the API server: kube-scheduler binds many pods at once, and
with urllib3's default of 10 each bind past the tenth opened and dropped a TLS connection
("Connection pool is full" in the log, up to 446 times per 1,000 pods)."""


RAW_EVENTS = "raw JSON"
"""What the watch helper is told it returns: nothing is deserialised into a model."""


def load_client(kubeconfig: Path | None) -> client.ApiClient:
    """A client of the kubeconfig given, or of the pod's service account when None.

    Every ArkGPU component loads its client here. The configuration is the client's own
    (never the ``kubernetes`` package's global default), so two clients never share one.
    A missing or malformed kubeconfig, or no service account, is a one-line ValueError.
    """
    configuration = client.Configuration()
    try:
        if kubeconfig is None:
            config.load_incluster_config(client_configuration=configuration)
        else:
            config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    except Exception as exc:  # ConfigException, a missing or malformed file
        where = str(kubeconfig) if kubeconfig else "in-cluster service account (no kubeconfig)"
        reason = " ".join(str(exc).split())[:300] or type(exc).__name__
        raise ValueError(
            f"{where}: cannot load the API server's configuration ({reason})"
        ) from None
    configuration.connection_pool_maxsize = POOL_SIZE
    return client.ApiClient(configuration)


def _error(exc: Exception) -> ApiError:
    if isinstance(exc, ApiException):
        return ApiError(int(exc.status or 0), f"API server: {exc.reason}")
    return ApiError(0, f"API server unreachable: {type(exc).__name__}: {exc}")


class KubeApi:
    """Implements :class:`~arkgpu.k8s.cluster.api.ClusterApi` with the official client."""

    def __init__(self, api_client: client.ApiClient) -> None:
        self.core = client.CoreV1Api(api_client)
        self.resource = client.ResourceV1Api(api_client)

    def _json(self, method: Any, *args: Any, **kwargs: Any) -> Json:
        try:
            response = method(
                *args, _preload_content=False, _request_timeout=REQUEST_TIMEOUT_S, **kwargs
            )
            data: Json = json.loads(response.data) if response.data else {}
            return data
        except Exception as exc:  # ApiException, urllib3's connection errors, bad JSON
            raise _error(exc) from None

    def _lister(self, resource: str) -> Any:
        if resource == "nodes":
            return self.core.list_node
        if resource == "pods":
            return self.core.list_pod_for_all_namespaces
        if resource == "resourceclaims":
            return self.resource.list_resource_claim_for_all_namespaces
        raise ValueError(f"unknown resource {resource!r}")

    def list(self, resource: str) -> Listed:
        data = self._json(self._lister(resource))
        items = data.get("items") or []
        return Listed(list(items), str(data.get("metadata", {}).get("resourceVersion", "")))

    def watch(self, resource: str, resource_version: str, timeout_s: float) -> Iterator[WatchEvent]:
        # Events are read as JSON (deserialize=False): a return type given here spares the
        # client its model look-up, which fails for resource.k8s.io/v1 (no V1ResourceClaim).
        stream = watch.Watch(return_type=RAW_EVENTS)
        try:
            for event in stream.stream(
                self._lister(resource),
                resource_version=resource_version,
                allow_watch_bookmarks=True,
                timeout_seconds=int(timeout_s),
                _request_timeout=(REQUEST_TIMEOUT_S, timeout_s + REQUEST_TIMEOUT_S),
                deserialize=False,
            ):
                yield WatchEvent(str(event["type"]), event["object"])
        except Exception as exc:  # a 410 Gone, a cut connection, a malformed line
            raise _error(exc) from None
        finally:
            stream.stop()

    def get_pod(self, namespace: str, name: str) -> Json:
        return self._json(self.core.read_namespaced_pod, name, namespace)

    def annotate_pod(
        self, namespace: str, name: str, uid: str, annotations: dict[str, Any]
    ) -> Json:
        body = {"metadata": {"uid": uid, "annotations": annotations}}
        return self._json(self.core.patch_namespaced_pod, name, namespace, body)

    def bind_pod(
        self,
        namespace: str,
        name: str,
        uid: str,
        node: str,
        annotations: dict[str, str] | None = None,
    ) -> None:
        meta: Json = {"name": name, "namespace": namespace, "uid": uid}
        if annotations:
            meta["annotations"] = annotations
        target = {"apiVersion": "v1", "kind": "Node", "name": node}
        body = {"apiVersion": "v1", "kind": "Binding", "metadata": meta, "target": target}
        self._json(self.core.create_namespaced_pod_binding, name, namespace, body)
