"""The image's specification: deploy/image/ (image.toml and the lists beside it).

Both builds read these files: ``make image`` (this package) and the Dockerfile
(tests/packaging/test_image_spec.py checks that it does).
"""

from __future__ import annotations

import hashlib
import tomllib
from dataclasses import dataclass
from pathlib import Path

from imagebuild.oci import ImageConfig

#: The specification's directory, relative to the repository.
SPEC_DIR = Path("deploy") / "image"


class SpecError(Exception):
    """A specification file is missing or wrong (one line: the file and the field)."""


@dataclass(frozen=True)
class ImageSpec:
    """What goes into the image and what it runs with."""

    repository: str
    """Image name without tag, as containerd spells it (``docker.io/arkgpu/arkgpu``)."""
    tag: str
    """The project's version (pyproject.toml), which the chart uses as appVersion."""
    suite: str
    """Debian release of the base (``bookworm``)."""
    variant: str
    """mmdebstrap variant of the base (``minbase``)."""
    installer: str
    """pip requirement that installs the Python packages (``pip==X``), run from its wheel."""
    epoch: int
    """Layer modification times are clamped to this instant, s since 1970."""
    packages: list[str]
    """Debian packages installed on the variant (packages.txt)."""
    requirements: list[str]
    """Pinned Python packages besides ArkGPU (requirements.txt, ``name==version``)."""
    config: ImageConfig
    """Entrypoint, command, environment, working directory and labels."""
    cuda_repository: str
    """Name without tag of the plain image that runs the CUDA program."""
    cuda_config: ImageConfig
    """Its configuration: its own entrypoint and command, the rest as ``config``."""

    @property
    def name(self) -> str:
        """``repository:tag``."""
        return f"{self.repository}:{self.tag}"


def listed(path: Path) -> list[str]:
    """The lines of a list file without comments and blanks."""
    lines = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
    return [line for line in lines if line]


def _field(table: dict[str, object], key: str, kind: type, where: str) -> object:
    value = table.get(key)
    if not isinstance(value, kind):
        raise SpecError(f"{where}: {key} must be a {kind.__name__}, got {value!r}")
    return value


def load(repo: Path) -> ImageSpec:
    """The specification in ``repo`` (a checkout)."""
    spec_dir = repo / SPEC_DIR
    where = str(spec_dir / "image.toml")
    try:
        doc = tomllib.loads((spec_dir / "image.toml").read_text())
        version = tomllib.loads((repo / "pyproject.toml").read_text())["project"]["version"]
    except (OSError, tomllib.TOMLDecodeError, KeyError) as exc:
        raise SpecError(f"{where}: {exc}") from exc
    image, config = doc.get("image", {}), doc.get("config", {})
    cuda = doc.get("cuda-program", {})
    labels = {**config.get("labels", {}), "org.opencontainers.image.version": version}
    main = _config(config, labels, where)
    cuda_labels = {**labels, "org.opencontainers.image.title": "cuda-program"}
    cuda_config = ImageConfig(
        entrypoint=list(_field(cuda, "entrypoint", list, where)),  # type: ignore[call-overload]
        cmd=list(_field(cuda, "cmd", list, where)),  # type: ignore[call-overload]
        env=main.env,
        workdir=main.workdir,
        labels=cuda_labels,
    )
    return ImageSpec(
        repository=str(_field(image, "repository", str, where)),
        tag=version,
        suite=str(_field(image, "suite", str, where)),
        variant=str(_field(image, "variant", str, where)),
        installer=str(_field(image, "installer", str, where)),
        epoch=int(_field(image, "epoch", int, where)),  # type: ignore[call-overload]
        packages=listed(spec_dir / "packages.txt"),
        requirements=listed(spec_dir / "requirements.txt"),
        config=main,
        cuda_repository=str(_field(cuda, "repository", str, where)),
        cuda_config=cuda_config,
    )


def _config(config: dict[str, object], labels: dict[str, str], where: str) -> ImageConfig:
    return ImageConfig(
        entrypoint=list(_field(config, "entrypoint", list, where)),  # type: ignore[call-overload]
        cmd=list(_field(config, "cmd", list, where)),  # type: ignore[call-overload]
        env=dict(_field(config, "env", dict, where)),  # type: ignore[call-overload]
        workdir=str(_field(config, "workdir", str, where)),
        labels=labels,
    )


def base_key(repo: Path, spec: ImageSpec) -> str:
    """Names the cached Debian base: a hash of everything that goes into it."""
    digest = hashlib.sha256()
    for part in (spec.suite, spec.variant, str(spec.epoch), *spec.packages):
        digest.update(part.encode() + b"\0")
    digest.update((repo / SPEC_DIR / "dpkg-slim.cfg").read_bytes())
    return digest.hexdigest()[:16]
