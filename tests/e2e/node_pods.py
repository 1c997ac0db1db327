"""Pods on the real node as a user makes them: manifests in files, ``kubectl apply -f``."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from .realnode import RealNode

POD_WAIT_S = 180.0
"""Bound for a pod to finish: 1-2 s on an idle machine; room for a load average of 8."""


def apply_manifest(
    node: RealNode, namespace: str, manifest: dict[str, Any], directory: Path
) -> None:
    """Writes ``manifest`` to a file in ``directory`` and applies it with ``kubectl apply -f``."""
    path = directory / f"{manifest['metadata']['name']}.json"
    path.write_text(json.dumps(manifest), encoding="utf-8")
    node.kubectl("apply", "-n", namespace, "-f", str(path))


def wait_succeeded(node: RealNode, namespace: str, name: str) -> str:
    """Waits for the pod to succeed; its log. A failed pod fails the test with its status."""
    deadline = time.monotonic() + POD_WAIT_S
    while True:
        pod = json.loads(node.kubectl("get", "pod", name, "-n", namespace, "-o", "json"))
        phase = pod["status"].get("phase")
        if phase == "Succeeded":
            return node.kubectl("logs", name, "-n", namespace)
        assert phase != "Failed", f"pod {name} failed: {json.dumps(pod['status'])[:2000]}"
        assert time.monotonic() < deadline, (
            f"pod {name} still {phase}: {json.dumps(pod['status'])[:2000]}"
        )
        time.sleep(0.5)
