"""The command line's shared behaviour."""

import pytest

from arkgpu.cli.main import main


def test_version_prints_and_exits_zero(capsys: pytest.CaptureFixture[str]) -> None:
    """``arkgpu --version`` names the package version."""
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert "arkgpu 0.1.0" in capsys.readouterr().out
