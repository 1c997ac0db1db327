"""Round trip of the webhook's endpoints over HTTPS on one keep-alive connection (as the API
server calls it): ``cd tests && python -m k8s.webhook.bench_roundtrip [N]``.

Not collected by pytest (no ``test_`` prefix); the figures are in docs/studies/webhook.md.
"""

from __future__ import annotations

import http.client
import ssl
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from prometheus_client import CollectorRegistry

from arkgpu.k8s.webhook.config import AdmissionLimits, config_from_dict
from arkgpu.k8s.webhook.serving import start_webhook
from e2e import pki

GOLDEN = Path(__file__).parent / "golden"


def main(count: int) -> None:
    """Prints p50 and p99 of ``count`` reviews per endpoint, milliseconds."""
    tmp = Path(tempfile.mkdtemp())
    ca = pki.make_ca()
    pki.write(ca, tmp, "ca")
    pair = pki.write(pki.issue(ca, "webhook", ips=("127.0.0.1",)), tmp, "webhook")
    config = config_from_dict(
        {"tls_cert_file": str(pair.cert), "tls_key_file": str(pair.key), "port": 0}
    )
    config = replace(
        config, listen_address="127.0.0.1", limits=AdmissionLimits(max_gpu_memory_mib=81_920)
    )
    running = start_webhook(config, CollectorRegistry())
    context = ssl.create_default_context(cafile=str(tmp / "ca.crt"))
    conn = http.client.HTTPSConnection("127.0.0.1", running.port, context=context)
    for path, name in (("/mutate", "mutate-hami-pod"), ("/validate", "validate-bad-pod")):
        body = (GOLDEN / f"{name}.request.json").read_bytes()
        times = []
        for _ in range(count):
            start = time.perf_counter()
            conn.request("POST", path, body, {"Content-Type": "application/json"})
            answer = conn.getresponse()
            answer.read()
            times.append((time.perf_counter() - start) * 1000)
        times.sort()
        p99 = times[min(len(times) - 1, int(len(times) * 0.99))]
        print(f"{path}: n={count} p50={statistics.median(times):.3f} ms p99={p99:.3f} ms")
    conn.close()
    running.close()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2000)
