"""Bad input to the node-side and Kubernetes commands: the limiter, the node runtime and
its workloads, the webhook, the device plugin, the DRA driver and the extender.

Each case must end as every bad input does (:func:`bad_input_helpers.check`).
"""

from __future__ import annotations

import pytest

from cli.bad_input_helpers import Case, run_case

DP = ("device-plugin", "run", "--config")
DEVICE_PLUGIN_CASES: tuple[Case, ...] = (
    Case(
        "device-plugin run --config: a missing file", (*DP, "{tmp}/no.toml"), "no.toml", "--config"
    ),
    Case("device-plugin run --config: not TOML", (*DP, "{bad_toml}"), "{bad_toml}", "--config"),
    Case(
        "device-plugin run --config: an unknown field", (*DP, "{dp_unknown}"), "nosuch", "--config"
    ),
    Case(
        "device-plugin run --config: a field of the wrong type",
        (*DP, "{dp_badtype}"),
        "split_count",
        "--config",
    ),
    Case(
        "device-plugin run --config: an empty node name",
        (*DP, "{dp_nonode}"),
        "node_name",
        "--config",
    ),
    Case(
        "device-plugin run --config: no kubelet directory",
        (*DP, "{dp_nokubelet}"),
        "kubelet_dir",
        "--config",
    ),
    Case(
        "device-plugin run --config: a kubeconfig that does not exist",
        (*DP, "{dp_nokubeconfig}"),
        "kubeconfig",
        "--config",
    ),
)


DRA_CASES: tuple[Case, ...] = (
    Case(
        "dra-driver run --config: a missing file",
        ("dra-driver", "run", "--config", "{tmp}/no.toml"),
        "no.toml",
        "--config",
    ),
    Case(
        "dra-driver run --config: not TOML",
        ("dra-driver", "run", "--config", "{bad_toml}"),
        "{bad_toml}",
        "--config",
    ),
    Case(
        "dra-driver run --config: an unknown field",
        ("dra-driver", "run", "--config", "{node_unknown}"),
        "nosuch",
        "--config",
    ),
    Case(
        "dra-driver run --config: a field of the wrong type",
        ("dra-driver", "run", "--config", "{dra_badtype}"),
        "resync_s",
        "--config",
    ),
)


NODE_CASES: tuple[Case, ...] = (
    Case(
        "node run --config: a missing file",
        ("node", "run", "--config", "{tmp}/no.toml"),
        "no.toml",
        "--config",
    ),
    Case(
        "node run --config: not TOML",
        ("node", "run", "--config", "{bad_toml}"),
        "{bad_toml}",
        "--config",
    ),
    Case(
        "node run --config: an unknown field",
        ("node", "run", "--config", "{node_unknown}"),
        "nosuch",
        "--config",
    ),
    Case(
        "node run --config: a field of the wrong type",
        ("node", "run", "--config", "{node_badtype}"),
        "period_s",
        "--config",
    ),
    Case(
        "node demo --plot: a folder instead of a file",
        ("node", "demo", "--plot", "{dir}"),
        "--plot",
        "--plot",
    ),
    Case(
        "node demo --json: under a file",
        ("node", "demo", "--json", "{file}/x.json"),
        "{file}",
        "--json",
    ),
    Case(
        "workload lc --rates: not RATE:SECONDS",
        ("workload", "lc", "--rates", "fast"),
        "--rates",
        "--rates",
    ),
    Case(
        "workload lc --rates: a zero rate",
        ("workload", "lc", "--rates", "0:1"),
        "--rates",
        "--rates",
    ),
    Case(
        "workload lc --region: a missing folder",
        ("workload", "lc", "--rates", "1:1", "--region", "{tmp}/noregion"),
        "noregion",
        "--region",
    ),
    Case(
        "workload lc --log: a folder",
        ("workload", "lc", "--rates", "1:1", "--log", "{dir}"),
        "--log",
        "--log",
    ),
    Case(
        "workload lc --model: a model with no profile",
        ("workload", "lc", "--rates", "1:1", "--region", "{dir}", "--model", "nosuchnet"),
        "--model",
        "--model",
    ),
    Case(
        "workload be --region: a folder with no region",
        ("workload", "be", "--seconds", "1", "--region", "{dir}"),
        "{dir}",
        "--region",
    ),
)


WEBHOOK_CASES: tuple[Case, ...] = (
    Case(
        "webhook run --config: a missing file",
        ("webhook", "run", "--config", "{tmp}/no.toml"),
        "no.toml",
        "--config",
    ),
    Case(
        "webhook run --config: not TOML",
        ("webhook", "run", "--config", "{bad_toml}"),
        "{bad_toml}",
        "--config",
    ),
    Case(
        "webhook run --config: no serving certificate (HTTPS only)",
        ("webhook", "run", "--config", "{webhook_no_tls}"),
        "tls_cert_file",
        "--config",
    ),
    Case(
        "webhook run --config: an unknown QoS default",
        ("webhook", "run", "--config", "{webhook_bad_qos}"),
        "[defaults] field qos",
        "--config",
    ),
    Case(
        "webhook run --config: certificate files that do not exist",
        ("webhook", "run", "--config", "{webhook_missing_cert}"),
        "{tmp}/none.crt",
        "--config",
    ),
)


EXTENDER_CASES: tuple[Case, ...] = (
    Case(
        "extender run --config: a missing file",
        ("extender", "run", "--config", "{tmp}/no.toml"),
        "no.toml",
        "--config",
    ),
    Case(
        "extender run --config: not TOML",
        ("extender", "run", "--config", "{bad_toml}"),
        "{bad_toml}",
        "--config",
    ),
    Case(
        "extender run --config: an unknown field",
        ("extender", "run", "--config", "{node_unknown}"),
        "nosuch",
        "--config",
    ),
    Case(
        "extender run --config: an unknown policy",
        ("extender", "run", "--config", "{extender_policy}"),
        "policy",
        "--config",
    ),
    Case(
        "extender run --config: a kubeconfig that does not exist",
        ("extender", "run", "--config", "{extender_kubeconfig}"),
        "no-such.kubeconfig",
        "--config",
    ),
    Case(
        "extender bench --json: under a file",
        ("extender", "bench", "--nodes", "1", "--json", "{file}/x.json"),
        "{file}",
        "--json",
    ),
)


K8S_CASES: tuple[Case, ...] = (
    Case(
        "limiter show: a folder with no region in it",
        ("limiter", "show", "{dir}"),
        "{dir}",
        "region",
    ),
    Case(
        "limiter bench --plot: a folder instead of a file",
        ("limiter", "bench", "--plot", "{dir}"),
        "--plot",
        "--plot",
    ),
    *NODE_CASES,
    *WEBHOOK_CASES,
    *DEVICE_PLUGIN_CASES,
    *DRA_CASES,
    *EXTENDER_CASES,
)


@pytest.mark.parametrize("case", K8S_CASES, ids=lambda c: c.what)
def test_bad_input_is_one_line_naming_the_option(
    case: Case, files: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """The case exits 2 with one ``arkgpu: error:`` line naming its option or file."""
    run_case(case, files, capsys)
