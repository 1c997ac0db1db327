"""The API server client: loaded from a kubeconfig, with a connection pool sized for binds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from arkgpu.k8s.cluster.api import ApiError
from arkgpu.k8s.cluster.kube import POOL_SIZE, KubeApi, load_client


def _kubeconfig(tmp_path: Path) -> Path:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    return kubeconfig


def test_the_client_keeps_a_pool_for_concurrent_binds(tmp_path: Path) -> None:
    api = load_client(_kubeconfig(tmp_path))
    try:
        assert api.configuration.host == "https://127.0.0.1:1"
        assert api.configuration.connection_pool_maxsize == POOL_SIZE > 10
        assert api.rest_client.pool_manager.connection_pool_kw["maxsize"] == POOL_SIZE
    finally:
        api.close()  # type: ignore[no-untyped-call]


def test_a_missing_kubeconfig_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"no\.kubeconfig: cannot load the API server's config"):
        load_client(tmp_path / "no.kubeconfig")


@pytest.mark.parametrize("resource", ["nodes", "pods", "resourceclaims"])
def test_every_watched_resource_reaches_the_network(tmp_path: Path, resource: str) -> None:
    """A watch fails only for want of an API server (nothing listens on port 1), never in
    the client's model look-up (resource.k8s.io/v1 claims have no V1ResourceClaim model)."""
    api = load_client(_kubeconfig(tmp_path))
    try:
        with pytest.raises(ApiError) as failed:
            next(iter(KubeApi(api).watch(resource, "1", 1.0)))
        assert failed.value.status == 0
        assert "AttributeError" not in str(failed.value)
    finally:
        api.close()  # type: ignore[no-untyped-call]
