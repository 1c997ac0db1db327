"""The extender's settings, loaded from a TOML file (``arkgpu extender run --config FILE``).

Every key of the file is a field of :class:`ExtenderConfig`; an unknown key, a
wrong type or a value out of range stops the load with one line naming the
file and the field (docs/k8s/EXTENDER.md lists them).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from arkgpu.k8s.contract import PERCENT_FULL, SCHEDULER_NAME
from arkgpu.k8s.jsonhttp import ServerConfig
from arkgpu.model import settings
from arkgpu.model.gpus import REFERENCE_GPU
from arkgpu.model.settings import Parser, boolean, choice, integer, number, parsed, path, text
from arkgpu.placement import POLICIES

DEFAULT_POLICY = "arkgpu"
"""The project's best level-1 policy (docs/BENCHMARKS.md: lowest unallocated GPU share on
every openb trace, never worse than FGD)."""

RELEARN_WORKERS = ("process", "thread")
"""Values of :attr:`ExtenderConfig.relearn_worker`."""


@dataclass(frozen=True)
class ExtenderConfig:
    """Settings of ``arkgpu extender run`` (units and defaults in each field's text)."""

    kubeconfig: Path | None = None
    """Kubeconfig of the API server (default none: the pod's in-cluster service account)."""
    listen_address: str = "0.0.0.0"
    """Address the HTTP(S) endpoint listens on (default 0.0.0.0: every IPv4 address)."""
    port: int = 8888
    """TCP port of filter, prioritize, bind, /healthz, /readyz and /metrics (default 8888)."""
    tls_cert_file: Path | None = None
    """Serving certificate (PEM); with ``tls_key_file``: HTTPS (kube-scheduler's
    ``enableHTTPS``); both absent: plain HTTP (default)."""
    tls_key_file: Path | None = None
    """Private key of ``tls_cert_file`` (PEM)."""
    policy: str = DEFAULT_POLICY
    """Level-1 placement policy by name (default ``arkgpu``, the project's best; any name
    ``arkgpu placement run --policy`` takes)."""
    scheduler_name: str = SCHEDULER_NAME
    """``schedulerName`` of the pods this extender places (default arkgpu-scheduler); pods
    of other schedulers are ignored by the snapshot unless they carry an assignment."""
    seed: int = 0
    """Seed of the policy's random generator (default 0; only ``random`` draws from it)."""
    predictor: Path | None = None
    """Predictor JSON (``arkgpu predictor fit``) for the LC check; default: fitted at start
    on the profiles shipped in the package (a few seconds)."""
    gpu_model: str = REFERENCE_GPU
    """GPU model the predictor is asked about (default V100, the reference)."""
    lc_check: bool = True
    """Check LC pods with the predictor (default true: an LC pod goes only where every LC
    service on its GPU still meets its target); false: LC pods are placed as BE."""
    relearn_in_background: bool = True
    """The ``arkgpu`` policy re-learns its measures (20-100 ms every few hundred GPU pods) off
    the request path, on ``relearn_worker``, so no filter call waits for it (default true);
    false: inline, as the simulator does (placements then repeat exactly, at the cost of
    those slow calls)."""
    relearn_worker: str = "process"
    """Where background re-learning runs: ``process`` (default) or ``thread``. A thread
    shares the interpreter lock with request handling: the filter calls made while it
    solves its LPs took milliseconds longer, which set the p99 (docs/studies/extender.md,
    "Re-learning in a process"). A process shares nothing; it is restarted if it dies, the
    policy deciding meanwhile with what it learned last."""
    gc_full_every: int = 1000
    """Collections of the garbage collector's middle generation between two full ones, once
    the first snapshot is in (CPython's third threshold; default 1000, Python's own is 10).
    A full collection scans every object made since the snapshot was frozen and stalls the
    filter call it falls on by 2-11 ms on the 2-core machine; with 10 the benchmark saw 13 in
    1,000 pods, with 1000 none (docs/studies/extender.md). Cyclic garbage that lived long
    enough to reach the oldest generation is freed that much later; the extender makes
    little (its objects are freed by reference counting)."""
    filter_chosen_only: bool = True
    """filter answers with the one node the policy chose when a node fits (default true):
    kube-scheduler then skips its scoring and the prioritize call, one HTTP round trip and
    the scoring of every feasible node less per pod (docs/studies/scheduling-path.md), and
    the pod lands where the policy put it. False: every fitting node is kept and
    prioritize ranks them (for a scheduler configuration with other extenders or score
    plugins that must see them)."""
    default_gpucores_percent: int = 0
    """``nvidia.com/gpucores`` of a container that gives GPU memory but no cores, percent
    (default 0: the same percentage of the GPU as its memory)."""
    max_body_bytes: int = 16 * 1024 * 1024
    """Largest request body, bytes (default 16 MiB: a 5,000-node NodeList when
    ``nodeCacheCapable`` is false)."""
    read_timeout_s: float = 10.0
    """Longest wait for a caller's next bytes, seconds (default 10)."""
    resync_s: float = 300.0
    """Each watch is reopened after this many seconds (the API server's own timeout),
    seconds (default 300)."""
    backoff_max_s: float = 30.0
    """Longest wait between reconnections to a lost API server, seconds (default 30; the
    wait starts at 0.2 s and doubles)."""

    @property
    def server(self) -> ServerConfig:
        """The endpoint's settings."""
        return ServerConfig(
            listen_address=self.listen_address,
            port=self.port,
            tls_cert_file=self.tls_cert_file,
            tls_key_file=self.tls_key_file,
            max_body_bytes=self.max_body_bytes,
            read_timeout_s=self.read_timeout_s,
        )


PARSERS: dict[str, Parser] = {
    "kubeconfig": path,
    "listen_address": text,
    "port": integer(0, 65_535),
    "tls_cert_file": path,
    "tls_key_file": path,
    "policy": text,
    "scheduler_name": text,
    "seed": integer(0, 2**32 - 1),
    "predictor": path,
    "gpu_model": text,
    "lc_check": boolean,
    "relearn_in_background": boolean,
    "relearn_worker": choice(*RELEARN_WORKERS),
    "gc_full_every": integer(1, 1_000_000),
    "filter_chosen_only": boolean,
    "default_gpucores_percent": integer(0, PERCENT_FULL),
    "max_body_bytes": integer(1024),
    "read_timeout_s": number(0.0, 3600.0),
    "resync_s": number(0.0, 86_400.0),
    "backoff_max_s": number(0.0, 3600.0),
}
"""How each field is read from TOML."""


def config_from_dict(table: dict[str, Any], source: str = "config") -> ExtenderConfig:
    """The configuration a parsed TOML table describes (ValueError naming the field)."""
    config = ExtenderConfig(**parsed(table, PARSERS, f"{source}: "))
    if config.policy not in POLICIES.names():
        known = ", ".join(POLICIES.names())
        raise ValueError(f"{source}: field policy: unknown policy {config.policy!r} ({known})")
    if (config.tls_cert_file is None) != (config.tls_key_file is None):
        raise ValueError(f"{source}: fields tls_cert_file, tls_key_file: give both or neither")
    return config


def load_config(file: Path) -> ExtenderConfig:
    """Read ``file`` (TOML); ValueError with one line naming the file and the field."""
    return settings.load_settings(file, config_from_dict)


def field_names() -> list[str]:
    """Every field, in order (docs and tests)."""
    return [f.name for f in fields(ExtenderConfig)]
