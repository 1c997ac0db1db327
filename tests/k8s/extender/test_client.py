"""The API server client: loaded from a kubeconfig, with a connection pool sized for binds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from arkgpu.k8s.cluster.kube import POOL_SIZE, load_client


def test_the_client_keeps_a_pool_for_concurrent_binds(tmp_path: Path) -> None:
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
    api = load_client(kubeconfig)
    try:
        assert api.configuration.host == "https://127.0.0.1:1"
        assert api.configuration.connection_pool_maxsize == POOL_SIZE > 10
        assert api.rest_client.pool_manager.connection_pool_kw["maxsize"] == POOL_SIZE
    finally:
        api.close()


def test_a_missing_kubeconfig_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"no\.kubeconfig: cannot load the API server's config"):
        load_client(tmp_path / "no.kubeconfig")
