"""The layers of ARCHITECTURE.md hold: import-linter's contracts are kept."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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
