"""Where the package looks for its native parts: next to the module (site-packages
or the source tree), or in ``$ARKGPU_NATIVE_DIR``; and the copy that container
processes running as another user can reach."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from arkgpu.limiter import native


def test_build_dir_is_next_to_the_module_unless_overridden(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Without the variable the parts are in native/build beside native.py;
    with it, in the directory it names (an empty value counts as unset)."""
    monkeypatch.delenv(native.NATIVE_DIR_ENV, raising=False)
    assert native.build_dir() == Path(native.__file__).resolve().parent / "native" / "build"
    monkeypatch.setenv(native.NATIVE_DIR_ENV, "")
    assert native.build_dir() == Path(native.__file__).resolve().parent / "native" / "build"
    monkeypatch.setenv(native.NATIVE_DIR_ENV, str(tmp_path))
    assert native.build_dir() == tmp_path


def test_a_missing_part_is_named_with_the_variable_that_sent_us_there(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A directory without the parts gives FileNotFoundError naming the file
    and the variable, not a failure later in a child process."""
    monkeypatch.setenv(native.NATIVE_DIR_ENV, str(tmp_path))
    with pytest.raises(FileNotFoundError, match=r"libarkgpu_limiter\.so.*ARKGPU_NATIVE_DIR"):
        native.limiter_library()


def test_stage_copies_every_part_readable_by_every_user(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The staged copy holds each built file byte for byte, mode 0755, in
    directories of mode 0755, and the lookups then find them there."""
    source = tmp_path / "source"
    for index, name in enumerate(native.BUILT_FILES):
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        (source / name).write_bytes(bytes([index]) * 10)
        (source / name).chmod(0o600)
    monkeypatch.setenv(native.NATIVE_DIR_ENV, str(source))
    staged = native.stage(tmp_path / "staged")
    for index, name in enumerate(native.BUILT_FILES):
        assert (staged / name).read_bytes() == bytes([index]) * 10
        assert stat.S_IMODE((staged / name).stat().st_mode) == 0o755
    for directory in (staged, staged / "fake"):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o755
    monkeypatch.setenv(native.NATIVE_DIR_ENV, str(staged))
    assert native.cubench() == staged / "arkgpu-cubench"
    assert native.fake_driver_dir() == staged / "fake"


def test_stage_refuses_an_incomplete_build(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Staging from a directory that lacks a part fails before copying anything."""
    (tmp_path / "source").mkdir()
    (tmp_path / "source" / "libarkgpu_limiter.so").write_bytes(b"x")
    monkeypatch.setenv(native.NATIVE_DIR_ENV, str(tmp_path / "source"))
    with pytest.raises(FileNotFoundError, match=r"libarkgpu_client\.so"):
        native.stage(tmp_path / "staged")
    assert not (tmp_path / "staged").exists()
