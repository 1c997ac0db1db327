"""The admission webhook's settings (``arkgpu webhook run --config FILE``, TOML).

Top-level fields are those of :class:`WebhookConfig`; table ``[defaults]`` holds
:class:`AdmissionDefaults` and table ``[limits]`` :class:`AdmissionLimits`. An
unknown key, a wrong type, a value out of range or a missing certificate stops
the load with one line naming the file and the field (docs/k8s/WEBHOOK.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from arkgpu.k8s import contract
from arkgpu.model import settings
from arkgpu.model.settings import Parser, choice, integer, number, parsed, path, subtable, text

PERCENT = (1, contract.PERCENT_FULL)


@dataclass(frozen=True)
class AdmissionDefaults:
    """What the mutating webhook fills in on a pod that asks for GPUs and leaves it out."""

    qos: str | None = None
    """``arkgpu.io/qos`` written on a pod without one (default none: left out, so the pod
    keeps HAMi's meaning of ``gpucores``, a cap the node runtime never changes; ``be`` or
    ``lc`` opts every such pod into ArkGPU's classes, docs/MIGRATING-FROM-HAMI.md)."""
    gpucores: int | None = None
    """``nvidia.com/gpucores`` of a container without one, percent 1..100 (default none:
    left out, so the extender's rule applies: a whole GPU's time unless memory is given,
    as HAMi)."""
    gpumem: int | None = None
    """``nvidia.com/gpumem`` of a container with neither gpumem nor gpumem-percentage, MiB
    (default none: left out, the whole GPU's memory, as HAMi)."""
    gpumem_percentage: int | None = None
    """``nvidia.com/gpumem-percentage`` in the same case, percent 1..100 (default none;
    at most one of ``gpumem`` and ``gpumem_percentage``)."""


@dataclass(frozen=True)
class AdmissionLimits:
    """What the validating webhook refuses beyond the contract's own ranges."""

    max_gpu_count: int = 16
    """Largest ``nvidia.com/gpu`` of one container (default 16: the largest GPU servers
    sold; a pod asking more never fits a node)."""
    max_gpu_memory_mib: int | None = None
    """Largest ``nvidia.com/gpumem`` accepted, MiB. Default none: the largest GPU memory in
    the cluster, from the nodes' ``arkgpu.io/gpu-inventory`` annotations (list and watch
    of nodes); set it to run the webhook without access to nodes."""


@dataclass(frozen=True)
class WebhookConfig:
    """Settings of ``arkgpu webhook run`` (units and defaults in each field's text)."""

    tls_cert_file: Path
    """Serving certificate, PEM (required: the API server calls webhooks over HTTPS only).
    Its names must match the URL or Service the webhook configurations give."""
    tls_key_file: Path
    """Private key of the certificate, PEM (required)."""
    listen_address: str = "0.0.0.0"
    """Address to listen on (default all IPv4 addresses)."""
    port: int = 9443
    """HTTPS port (default 9443, the usual webhook port; 0: any free port, for tests)."""
    kubeconfig: Path | None = None
    """Kubeconfig for the node watch (default none: the pod's service account)."""
    scheduler_name: str = contract.SCHEDULER_NAME
    """``schedulerName`` given to GPU pods that use the default scheduler (default
    ``arkgpu-scheduler``, the profile that calls the extender)."""
    predictor: Path | None = None
    """Predictor JSON (``arkgpu predictor fit``) whose models ``arkgpu.io/model`` may name
    (default: the predictor fitted on the profiles shipped in the package)."""
    tls_reload_s: float = 60.0
    """How often the certificate files are checked for a renewal, seconds (default 60:
    cert-manager renews days ahead of expiry)."""
    defaults: AdmissionDefaults = field(default_factory=AdmissionDefaults)
    """Table ``[defaults]``."""
    limits: AdmissionLimits = field(default_factory=AdmissionLimits)
    """Table ``[limits]``."""


PARSERS: dict[str, Parser] = {
    "listen_address": text,
    "port": integer(0, 65_535),
    "tls_cert_file": path,
    "tls_key_file": path,
    "kubeconfig": path,
    "scheduler_name": text,
    "predictor": path,
    "tls_reload_s": number(0.0, 86_400.0),
}
DEFAULTS_PARSERS: dict[str, Parser] = {
    "qos": choice(*contract.QOS_CLASSES),
    "gpucores": integer(*PERCENT),
    "gpumem": integer(1, 2**40),
    "gpumem_percentage": integer(*PERCENT),
}
LIMITS_PARSERS: dict[str, Parser] = {
    "max_gpu_count": integer(1, 1024),
    "max_gpu_memory_mib": integer(1, 2**40),
}


def config_from_dict(table: dict[str, Any], source: str = "config") -> WebhookConfig:
    """The configuration a parsed TOML table describes (ValueError naming the field)."""
    top = dict(table)
    defaults = parsed(subtable(top, "defaults", source), DEFAULTS_PARSERS, f"{source}: [defaults] ")
    limits = parsed(subtable(top, "limits", source), LIMITS_PARSERS, f"{source}: [limits] ")
    values = parsed(top, PARSERS, f"{source}: ")
    for name in ("tls_cert_file", "tls_key_file"):
        if name not in values:
            raise ValueError(
                f"{source}: field {name}: required (the API server calls admission webhooks "
                "over HTTPS only)"
            )
    if "gpumem" in defaults and "gpumem_percentage" in defaults:
        raise ValueError(
            f"{source}: [defaults] field gpumem_percentage: set at most one of gpumem and "
            "gpumem_percentage"
        )
    return replace(
        WebhookConfig(**values),
        defaults=AdmissionDefaults(**defaults),
        limits=AdmissionLimits(**limits),
    )


def load_config(file: Path) -> WebhookConfig:
    """Read ``file`` (TOML); ValueError with one line naming the file and the field."""
    return settings.load_settings(file, config_from_dict)


def field_names() -> list[str]:
    """Every field, tables as ``table.field`` (docs and tests)."""
    top = [f.name for f in fields(WebhookConfig) if f.name not in ("defaults", "limits")]
    return [
        *top,
        *(f"defaults.{f.name}" for f in fields(AdmissionDefaults)),
        *(f"limits.{f.name}" for f in fields(AdmissionLimits)),
    ]
