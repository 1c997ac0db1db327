"""The image's specification (deploy/image/) and the Dockerfile stay in step.

``make image`` builds from the specification; the Dockerfile must install the
same Debian packages with the same dpkg exclusions on the same Debian release,
the same wheels with the same script, and run with the same configuration.
requirements.txt pins exactly what ``arkgpu[node,k8s]`` needs, nothing of the
plotting, benchmark or test extras; the chart runs the image this names.
"""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from pathlib import Path

import pytest
import yaml
from imagebuild.building import WHEEL_CFLAGS
from imagebuild.spec import ImageSpec, listed, load
from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[2]
#: What the chart's workloads need: the core and these extras (docs/IMAGE.md).
IMAGE_EXTRAS = ("node", "k8s")
#: Packages that must never be in the image (plotting, learned baselines, test tools).
NEVER = ("matplotlib", "scikit-learn", "pytest", "hypothesis", "mypy", "ruff", "setuptools")


def instructions(text: str) -> list[tuple[str, str]]:
    """A Dockerfile's instructions as (KEYWORD, arguments), continuations joined,
    comments and the parser directive dropped."""
    joined = re.sub(r"\\\n", " ", text)
    found = []
    for raw in joined.splitlines():
        line = raw.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            found.append((keyword.upper(), " ".join(rest.split())))
    return found


def final_stage(steps: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The instructions from the last FROM on."""
    last = max(i for i, (keyword, _) in enumerate(steps) if keyword == "FROM")
    return steps[last:]


@pytest.fixture(scope="module")
def spec() -> ImageSpec:
    return load(REPO)


@pytest.fixture(scope="module")
def dockerfile() -> list[tuple[str, str]]:
    return instructions((REPO / "Dockerfile").read_text())


def test_both_builds_start_from_the_same_debian(
    spec: ImageSpec, dockerfile: list[tuple[str, str]]
) -> None:
    """The image is Debian's minbase of the spec's release (bookworm-slim is
    Debian's minbase build); the wheels are built on the same release."""
    assert spec.variant == "minbase"
    froms = [args for keyword, args in dockerfile if keyword == "FROM"]
    assert froms == [f"debian:{spec.suite} AS wheels", f"debian:{spec.suite}-slim"]


def test_the_dockerfile_installs_packages_txt_with_the_dpkg_exclusions(
    dockerfile: list[tuple[str, str]],
) -> None:
    """dpkg-slim.cfg is in place before apt-get installs packages.txt, without
    Recommends (as mmdebstrap), and apt's lists and logs are removed."""
    stage = final_stage(dockerfile)
    copy = next(i for i, (k, a) in enumerate(stage) if k == "COPY")
    assert stage[copy][1].startswith("deploy/image/dpkg-slim.cfg /etc/dpkg/dpkg.cfg.d/")
    apt = next(i for i, (k, a) in enumerate(stage) if k == "RUN" and "apt-get install" in a)
    assert copy < apt
    run = stage[apt][1]
    assert "--mount=type=bind,source=deploy/image/packages.txt,target=/tmp/packages.txt" in run
    assert "apt-get install -y --no-install-recommends $(sed 's/#.*//' /tmp/packages.txt)" in run
    assert "rm -rf /var/lib/apt/lists/* /var/cache/apt/* /var/log/*" in run


def test_the_dockerfile_installs_the_same_wheels_with_the_same_script(
    spec: ImageSpec, dockerfile: list[tuple[str, str]]
) -> None:
    """The wheels stage builds ArkGPU's wheel with make image's C flags and
    downloads requirements.txt and the spec's pip; the image runs
    install-python.sh over them, as make image does in its chroot."""
    first = dockerfile[: dockerfile.index(final_stage(dockerfile)[0])]
    wheels = " ".join(args for keyword, args in first if keyword == "RUN")
    build = f"CFLAGS={WHEEL_CFLAGS} SOURCE_DATE_EPOCH={spec.epoch} python3 -m pip wheel"
    assert f"{build} -q --no-deps -w /wheels ." in wheels
    download = "pip download -q --no-deps --only-binary=:all: -d /wheels"
    assert f"{download} -r deploy/image/requirements.txt {spec.installer}" in wheels
    install = [a for k, a in final_stage(dockerfile) if k == "RUN" and "install-python.sh" in a]
    assert install == [
        "--mount=type=bind,from=wheels,source=/wheels,target=/tmp/wheels "
        "--mount=type=bind,source=deploy/image,target=/tmp/spec "
        "sh /tmp/spec/install-python.sh /tmp/wheels /tmp/spec/requirements.txt"
    ]


def test_the_dockerfile_runs_with_the_spec_configuration(
    spec: ImageSpec, dockerfile: list[tuple[str, str]]
) -> None:
    """ENV, LABEL, WORKDIR, ENTRYPOINT and CMD of the image are image.toml's
    (the version label is the project's version); no USER (the chart sets it)."""
    stage = final_stage(dockerfile)
    env = dict(a.split("=", 1) for k, a in stage if k == "ENV")
    assert env == spec.config.env
    labels = {}
    for keyword, args in stage:
        if keyword == "LABEL":
            key, value = args.split("=", 1)
            labels[key] = json.loads(value)
    assert labels == spec.config.labels
    last = dict(stage)
    assert last["WORKDIR"] == spec.config.workdir
    assert json.loads(last["ENTRYPOINT"]) == spec.config.entrypoint
    assert json.loads(last["CMD"]) == spec.config.cmd
    assert "USER" not in last


def _requirements(extras: tuple[str, ...]) -> list[Requirement]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    wanted = [Requirement(r) for r in project["dependencies"]]
    for extra in extras:
        wanted += [Requirement(r) for r in project["optional-dependencies"][extra]]
    return wanted


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_requirements_pin_what_the_node_and_k8s_extras_need(spec: ImageSpec) -> None:
    """Every pin is name==version; every requirement of the core and the node and
    k8s extras is satisfied by its pin; nothing plots, benchmarks or tests."""
    pins = {}
    for line in spec.requirements:
        name, _, version = line.partition("==")
        assert version, line
        assert not set(version) & set("<>=!~*; "), line
        pins[_normal(name)] = version
    for requirement in _requirements(IMAGE_EXTRAS):
        pinned = pins.get(_normal(requirement.name))
        assert pinned is not None, f"{requirement} is not pinned"
        assert requirement.specifier.contains(pinned, prereleases=False), requirement
    assert not {_normal(name) for name in NEVER} & set(pins)
    assert "pip" not in pins  # the installer runs from its wheel (image.toml)


def test_the_chart_runs_the_image_this_builds(spec: ImageSpec) -> None:
    """The chart's default image is this repository at the chart's appVersion,
    which is the project's version; ``arkgpu`` and ``python3``, which its
    containers run, are on the image's PATH."""
    chart = yaml.safe_load((REPO / "deploy/helm/arkgpu/Chart.yaml").read_text())
    values = yaml.safe_load((REPO / "deploy/helm/arkgpu/values.yaml").read_text())
    assert spec.repository == "docker.io/" + values["image"]["repository"]
    assert values["image"]["tag"] == ""
    assert spec.tag == chart["appVersion"]
    assert spec.config.env["PATH"].split(":")[:2] == ["/usr/local/sbin", "/usr/local/bin"]


def test_packages_txt_lists_what_the_image_needs_and_no_compiler() -> None:
    """The Debian packages: the interpreter, and no compiler or build tool."""
    packages = listed(REPO / "deploy/image/packages.txt")
    assert "python3" in packages
    assert not {"gcc", "make", "build-essential", "libc6-dev", "python3-pip"} & set(packages)


def test_install_python_sh_is_what_both_builds_run() -> None:
    """install-python.sh installs without an index, without dependencies and from
    binary wheels only (the pins are the whole set), and compiles bytecode that
    carries no time stamp."""
    script = (REPO / "deploy/image/install-python.sh").read_text()
    words = shlex.split(script.split("install --no-index", 1)[1].split("\n\n")[0], comments=True)
    for flag in ("--no-deps", "--only-binary=:all:", "--no-cache-dir"):
        assert flag in words
    assert "--invalidation-mode unchecked-hash" in script
