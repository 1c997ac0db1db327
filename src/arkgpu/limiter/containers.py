"""Containers on the fake GPU: real processes that load the fake driver through
the interception library, each with its own region. Used by the benchmark and
the tests (and by later end-to-end tests).

A container's processes must not be able to write their limits file. When the
caller is root they run as ``nobody`` (uid 65534) beside a root-owned limits
file; otherwise the limits file is made read-only (mode 0444) for its owner.
"""

from __future__ import annotations

import os
import stat
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from arkgpu.limiter import builds, native
from arkgpu.limiter.region import LIMITS_FILE, Limits, create_region, write_limits

NOBODY = 65534


def container_user() -> int | None:
    """The uid container processes run as: nobody when we are root, else ourselves."""
    return NOBODY if os.geteuid() == 0 else None


def make_world_readable(directory: Path) -> None:
    """Let the container user reach ``directory`` (mode 0755)."""
    directory.mkdir(parents=True, exist_ok=True)
    directory.chmod(0o755)


@dataclass
class FakeContainer:
    """One container: a region directory and the environment of its processes."""

    region: Path
    fake_state: Path
    user: int | None = field(default_factory=container_user)

    @classmethod
    def create(cls, region: Path, fake_state: Path, limits: Limits) -> FakeContainer:
        """Create the region with ``limits`` and return the container."""
        user = container_user()
        make_world_readable(region)
        # The first process to attach initialises them: the device state and
        # the per-process table the fake NVML reads (contexts, escapes).
        for path in (fake_state, fake_state.with_name(fake_state.name + ".procs")):
            if not path.exists():
                path.touch()
                path.chmod(0o666)
        create_region(region, limits, (user, user) if user is not None else None)
        if user is None:
            (region / LIMITS_FILE).chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
        return cls(region, fake_state, user)

    def set_limits(self, limits: Limits) -> None:
        """Change the limits while the container runs (the node side's write)."""
        write_limits(self.region, limits)

    def env(self, extra: dict[str, str] | None = None, preload: bool = True) -> dict[str, str]:
        """The container processes' environment."""
        env = native.container_env(self.region, self.fake_state, preload=preload)
        if preload:  # a sanitizer build's runtime goes first
            env["LD_PRELOAD"] = builds.preload(native.limiter_library())
        env.update(extra or {})
        return env

    def popen(
        self, args: list[str], extra_env: dict[str, str] | None = None, preload: bool = True
    ) -> subprocess.Popen[str]:
        """Start a process of this container with piped text stdin and stdout."""
        return subprocess.Popen(
            args,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=self.env(extra_env, preload),
            user=self.user,
        )
