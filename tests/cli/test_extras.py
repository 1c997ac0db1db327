"""A command that needs an optional package the installation lacks says which extra
to install, in one line, exit status 69; never a traceback or "internal error".

The subprocess tests hide every optional package (a meta path finder that refuses
them) and run the command line as the core install would.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from arkgpu.cli.extras import OPTIONAL_MODULES, extras_of, missing_extra_message
from arkgpu.cli.main import GROUPS, MISSING_EXTRA

REPO = Path(__file__).resolve().parents[2]

#: Runs the command line with every optional module hidden.
WITHOUT_EXTRAS = """
import importlib.abc, sys
from arkgpu.cli.extras import OPTIONAL_MODULES
from arkgpu.cli.main import main

class Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if any(name == m or name.startswith(m + ".") for m in OPTIONAL_MODULES):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, Hide())
sys.exit(main(sys.argv[1:]))
"""


def _without_extras(*argv: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "ARKGPU_DEBUG"}
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_EXTRAS, *argv],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )


def _optional_distributions() -> set[str]:
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    names = set()
    for extra, requirements in extras.items():
        if extra == "test":
            continue  # the test toolchain: no command imports it
        for requirement in requirements:
            name = requirement.split(";")[0].split("[")[0]
            name = name.split(">")[0].split("<")[0].split("=")[0].strip()
            if name != "arkgpu":
                names.add(name)
    return names


def test_every_optional_package_is_mapped_to_the_module_it_installs() -> None:
    """OPTIONAL_MODULES names every package of every extra but the test toolchain,
    each with the module it really installs (found in this test environment)."""
    assert set(OPTIONAL_MODULES.values()) == _optional_distributions()
    for module in OPTIONAL_MODULES:
        assert importlib.util.find_spec(module) is not None, module


def test_the_extras_come_from_the_package_metadata() -> None:
    """A package in one extra names that extra; one in two names both; the
    self-reference of ``bench`` to ``arkgpu[plots]`` is not matplotlib's."""
    requires = [
        'matplotlib>=3.8; extra == "plots"',
        'arkgpu[plots]; extra == "bench"',
        'prometheus-client>=0.20; extra == "node"',
        'prometheus_client>=0.20; extra == "k8s"',
    ]
    assert extras_of("matplotlib", requires) == ["plots"]
    assert extras_of("prometheus-client", requires) == ["node", "k8s"]
    error = ModuleNotFoundError("No module named 'prometheus_client'", name="prometheus_client")
    message = missing_extra_message(error, requires)
    assert message is not None
    assert "pip install 'arkgpu[node]' or 'arkgpu[k8s]'" in message


def test_a_module_outside_the_extras_is_not_called_missing() -> None:
    """A missing module no extra provides is a bug, reported as one."""
    error = ModuleNotFoundError("No module named 'arkgpu.nothing'", name="arkgpu.nothing")
    assert missing_extra_message(error, []) is None


def _assert_one_line_extra(done: subprocess.CompletedProcess[str], extra: str) -> None:
    lines = done.stderr.strip().splitlines()
    assert done.returncode == MISSING_EXTRA, done.stderr
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("arkgpu: error: this command needs ")
    assert f"'arkgpu[{extra}]'" in lines[0]


@pytest.mark.parametrize("group", list(GROUPS))
def test_every_group_without_the_extras_helps_or_names_the_extra(group: str) -> None:
    """``arkgpu GROUP --help`` on the core install prints the help, or one line
    naming the extra that group needs; never a traceback or internal error."""
    done = _without_extras(group, "--help")
    if done.returncode == 0:
        assert "usage: arkgpu" in done.stdout
    else:
        assert done.returncode == MISSING_EXTRA, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert "pip install 'arkgpu[" in done.stderr


def test_limiter_bench_plot_without_matplotlib_names_the_plots_extra(tmp_path: Path) -> None:
    """``arkgpu limiter bench --plot`` on the core install says to install
    arkgpu[plots] (before any benchmark runs: the output is checked first)."""
    from arkgpu.limiter.benchmarking import plot_report  # noqa: PLC0415

    report = {"share_cases": [], "share_error_pts_max": 0.0}
    hide = dict.fromkeys(("matplotlib", "matplotlib.figure"))
    with pytest.MonkeyPatch.context() as patch:
        for name, value in hide.items():
            patch.setitem(sys.modules, name, value)
        with pytest.raises(ModuleNotFoundError) as raised:
            plot_report(report, tmp_path / "plot.png")
    message = missing_extra_message(raised.value)
    assert message is not None
    assert "'arkgpu[plots]'" in message


def test_a_plot_without_matplotlib_is_refused_before_the_work(tmp_path: Path) -> None:
    """``arkgpu limiter bench --plot`` on the core install names the plots extra
    at once, before the benchmark runs (no JSON report is written)."""
    report = tmp_path / "bench.json"
    done = _without_extras(
        "limiter", "bench", "--quick", "--json", str(report), "--plot", str(tmp_path / "p.png")
    )
    _assert_one_line_extra(done, "plots")
    assert not report.exists()


def test_a_kubernetes_daemon_without_the_k8s_extra_names_it(tmp_path: Path) -> None:
    """``arkgpu webhook run`` on the core install says to install arkgpu[k8s]."""
    config = tmp_path / "webhook.toml"
    config.write_text('tls_cert_file = "/nonexistent/c.pem"\ntls_key_file = "/nonexistent/k.pem"\n')
    done = _without_extras("webhook", "run", "--config", str(config))
    _assert_one_line_extra(done, "k8s")
