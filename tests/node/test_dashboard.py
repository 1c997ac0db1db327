"""The Grafana dashboard asks only for metrics the runtime exports (docs/NODE.md)."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).parents[2]


def test_every_dashboard_query_names_a_documented_metric() -> None:
    """Each panel query's metric names are in docs/NODE.md's list; every panel has a query."""
    dashboard = json.loads((ROOT / "deploy/grafana/arkgpu-node.json").read_text())
    documented = set(re.findall(r"`(arkgpu_[a-z0-9_]+)`", (ROOT / "docs/NODE.md").read_text()))
    assert dashboard["panels"]
    for panel in dashboard["panels"]:
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            names = set(re.findall(r"\b(arkgpu_[a-z0-9_]+)\b", target["expr"]))
            assert names, target["expr"]
            assert names <= documented, (panel["title"], names - documented)
