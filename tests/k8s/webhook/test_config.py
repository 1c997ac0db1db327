"""``arkgpu webhook run --config``: every field read; a bad file refused in one line naming it."""

from __future__ import annotations

from pathlib import Path

import pytest

from arkgpu.k8s.webhook.config import (
    AdmissionDefaults,
    AdmissionLimits,
    config_from_dict,
    field_names,
    load_config,
)

TLS = {"tls_cert_file": "/etc/webhook/tls.crt", "tls_key_file": "/etc/webhook/tls.key"}
DOC = Path(__file__).parents[3] / "docs" / "k8s" / "WEBHOOK.md"


def test_defaults_and_every_field(tmp_path: Path) -> None:
    """A file with every field loads into the dataclasses; an empty one keeps the defaults."""
    file = tmp_path / "webhook.toml"
    file.write_text(
        'tls_cert_file = "/c.pem"\ntls_key_file = "/k.pem"\nlisten_address = "127.0.0.1"\n'
        'port = 8443\nkubeconfig = "/kc"\nscheduler_name = "gpu-scheduler"\n'
        'predictor = "/p.json"\ntls_reload_s = 5\n'
        '[defaults]\nqos = "lc"\ngpucores = 30\ngpumem = 4096\n'
        "[limits]\nmax_gpu_count = 4\nmax_gpu_memory_mib = 81920\n"
    )
    config = load_config(file)
    assert (config.port, config.listen_address, config.scheduler_name) == (
        8443,
        "127.0.0.1",
        "gpu-scheduler",
    )
    assert config.kubeconfig == Path("/kc")
    assert config.predictor == Path("/p.json")
    assert config.tls_reload_s == 5.0
    assert config.defaults == AdmissionDefaults("lc", 30, 4096, None)
    assert config.limits == AdmissionLimits(4, 81920)
    plain = config_from_dict(dict(TLS))
    assert (plain.port, plain.listen_address, plain.scheduler_name) == (
        9443,
        "0.0.0.0",
        "arkgpu-scheduler",
    )
    assert plain.defaults == AdmissionDefaults(None, None, None, None)
    assert plain.limits == AdmissionLimits(16, None)


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        ({}, "f.toml: field tls_cert_file: required (the API server calls admission webhooks"),
        ({"tls_cert_file": "/c"}, "f.toml: field tls_key_file: required"),
        ({**TLS, "port": 70000}, "f.toml: field port: expected an integer <= 65535"),
        ({**TLS, "nosuch": 1}, "f.toml: unknown field 'nosuch'"),
        (
            {**TLS, "defaults": {"qos": "gold"}},
            "f.toml: [defaults] field qos: expected one of lc, be",
        ),
        ({**TLS, "defaults": {"gpucores": 101}}, "f.toml: [defaults] field gpucores"),
        (
            {**TLS, "defaults": {"gpumem": 1, "gpumem_percentage": 5}},
            "field gpumem_percentage: set at most one",
        ),
        ({**TLS, "limits": {"max_gpu_count": 0}}, "f.toml: [limits] field max_gpu_count"),
        ({**TLS, "limits": {"max_gpu_memory_mib": "80G"}}, "[limits] field max_gpu_memory_mib"),
        ({**TLS, "limits": 3}, "f.toml: field limits: expected a table"),
        (
            {**TLS, "scheduler_name": ""},
            "f.toml: field scheduler_name: expected a non-empty string",
        ),
    ],
)
def test_bad_field_is_named(table: dict[str, object], expected: str) -> None:
    """Each bad value: ValueError, one line, naming the file, the table and the field."""
    with pytest.raises(ValueError, match=r"^f\.toml: ") as caught:
        config_from_dict(table, "f.toml")
    assert expected in str(caught.value)
    assert "\n" not in str(caught.value)


def test_every_field_is_documented() -> None:
    """docs/k8s/WEBHOOK.md names every field (``table.field`` as ``field`` under its table)."""
    text = DOC.read_text()
    for name in field_names():
        assert f"`{name.split('.')[-1]}`" in text, name
