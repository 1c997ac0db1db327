"""Fixtures of the CLI tests."""

from __future__ import annotations

import pytest

from cli.bad_input_helpers import bad_files


@pytest.fixture(scope="session")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The bad files the bad-input cases name, and one good predictor and profile folder."""
    return bad_files(tmp_path_factory.mktemp("bad-input"))
