"""Creating, reading and updating a region from the node side."""

from pathlib import Path

import pytest

from arkgpu.limiter import (
    Limits,
    Mode,
    create_region,
    layout,
    read_limits,
    read_usage,
    write_limits,
)


def test_limits_round_trip_and_update_in_place(tmp_path: Path) -> None:
    """Limits written at creation and by a later update read back unchanged;
    the update keeps the file (same inode, so mappings see it) and advances
    the seqlock generation by two (even: no write in progress)."""
    region = create_region(tmp_path / "r", Limits((1 << 30, None), 4_000))
    assert read_limits(region) == Limits((1 << 30, None), 4_000, Mode.HARD)
    inode = (region / "limits").stat().st_ino
    write_limits(region, Limits((2 << 30,), 7_550, Mode.ELASTIC, burst_us=5000))
    assert read_limits(region) == Limits((2 << 30,), 7_550, Mode.ELASTIC, 5000)
    assert (region / "limits").stat().st_ino == inode
    data = (region / "limits").read_bytes()
    generation = int.from_bytes(data[16:24], "little")
    assert generation == 2


def test_new_region_has_empty_usage(tmp_path: Path) -> None:
    """A fresh usage file has no processes, no memory and no latency samples."""
    usage = read_usage(create_region(tmp_path / "r", Limits((1 << 20,))))
    assert usage.processes == ()
    assert usage.used_bytes == (0,) * layout.MAX_DEVICES
    assert usage.latency_head == 0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"memory_bytes": (1,), "share_bp": 10_001}, "share_bp"),
        ({"memory_bytes": (1,), "share_bp": 50.0}, "share_bp"),
        ({"memory_bytes": (-1,)}, "memory caps"),
        ({"memory_bytes": (None,) * 9}, "at most 8 devices"),
        ({"memory_bytes": (1,), "burst_us": 0}, "burst_us"),
    ],
)
def test_bad_limits_are_refused_with_the_field_named(
    kwargs: dict[str, object], message: str
) -> None:
    """Out-of-range limits raise ValueError naming the field."""
    with pytest.raises(ValueError, match=message):
        Limits(**kwargs)  # type: ignore[arg-type]


def test_a_file_that_is_not_a_region_is_named_in_the_error(tmp_path: Path) -> None:
    """Reading a directory whose limits file is not a region names the file."""
    (tmp_path / "limits").write_bytes(b"\0" * 200)
    with pytest.raises(ValueError, match="limits: not an ArkGPU region"):
        read_limits(tmp_path)
