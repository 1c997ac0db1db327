"""The chart's node runtime seen from outside: its ``/metrics`` through the API server's proxy.

A scrape is one GET of ``/api/v1/namespaces/<ns>/pods/<node pod>:<port>/proxy/metrics``
with the admin's client (the path ``kubectl get --raw`` takes, without a process per
scrape, so that a series can be sampled a few times a second on a loaded machine).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from kubernetes import client as k8s

SAMPLE_PREFIX = "arkgpu_container_"


@dataclass(frozen=True)
class Scrape:
    """One scrape: when (``time.monotonic()`` after the answer) and each region's samples."""

    t: float
    regions: dict[str, dict[str, float]]

    def value(self, region: str, name: str) -> float | None:
        """Sample ``arkgpu_container_<name>`` of ``region``; None when absent."""
        return self.regions.get(region, {}).get(SAMPLE_PREFIX + name)


def parse(text: str) -> dict[str, dict[str, float]]:
    """The ``arkgpu_container_*`` samples of an exposition, keyed by region then name."""
    out: dict[str, dict[str, float]] = {}
    for line in text.splitlines():
        if not line.startswith(SAMPLE_PREFIX) or 'region="' not in line:
            continue
        region = line.split('region="', 1)[1].split('"', 1)[0]
        out.setdefault(region, {})[line.split("{")[0]] = float(line.rsplit(" ", 1)[1])
    return out


@dataclass
class Scraper:
    """Scrapes the node runtime pod ``pod`` of ``namespace`` at ``port``."""

    api: k8s.ApiClient
    namespace: str
    pod: str
    port: int
    history: list[Scrape] = field(default_factory=list)

    def text(self) -> str:
        """The exposition, as the API server's proxy answers it."""
        core = k8s.CoreV1Api(self.api)
        got = core.connect_get_namespaced_pod_proxy_with_path(
            f"{self.pod}:{self.port}", self.namespace, "metrics"
        )
        return str(got)

    def scrape(self) -> Scrape:
        """One scrape, appended to :attr:`history`."""
        regions = parse(self.text())
        got = Scrape(time.monotonic(), regions)
        self.history.append(got)
        return got

    def until(self, done: float, every_s: float) -> None:
        """Scrapes every ``every_s`` until ``time.monotonic()`` passes ``done``."""
        while time.monotonic() < done:
            self.scrape()
            time.sleep(every_s)
