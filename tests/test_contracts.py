"""The layers of ARCHITECTURE.md hold: import-linter's contracts are kept."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from arkgpu.limiter import layout
from arkgpu.model.shares import SHARE_FULL_BP, share_bp, share_fraction

REPO = Path(__file__).resolve().parent.parent


def test_import_contracts_are_kept() -> None:
    """``lint-imports`` reports every contract kept, the layer contract among them."""
    exe = Path(sys.executable).with_name("lint-imports")
    proc = subprocess.run(
        [str(exe)], cwd=REPO, capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Layers of ARCHITECTURE.md" in proc.stdout
    assert "0 broken" in proc.stdout


def test_a_policy_importing_the_simulator_would_break_a_contract(tmp_path: Path) -> None:
    """The contracts bite: a config forbidding an import that exists is reported broken."""
    config = tmp_path / "contracts.ini"
    config.write_text(
        "[importlinter]\nroot_package = arkgpu\n\n"
        "[importlinter:contract:x]\nname = sim may not import placement (inverted on purpose)\n"
        "type = forbidden\nsource_modules = arkgpu.sim\nforbidden_modules = arkgpu.placement\n"
    )
    exe = Path(sys.executable).with_name("lint-imports")
    proc = subprocess.run(
        [str(exe), "--config", str(config)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode != 0
    assert "BROKEN" in proc.stdout


def test_compute_share_converts_once_between_fraction_and_basis_points() -> None:
    """One unit end to end: a fraction becomes basis points and back through one pair."""
    assert layout.SHARE_FULL == SHARE_FULL_BP == 10_000
    assert share_bp(0.3) == 3000
    assert share_bp(1 / 3) == 3333
    assert share_fraction(share_bp(0.25)) == 0.25
    with pytest.raises(ValueError, match=r"0\.\.1"):
        share_bp(1.5)
    with pytest.raises(ValueError, match="share_bp"):
        share_fraction(10_001)
