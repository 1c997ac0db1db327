"""Figures for people: human units, and tables that say which way is better."""

from __future__ import annotations

import pytest
from rich.console import Console

from arkgpu.cli import figures
from arkgpu.cli.tables import Column, label, make_table


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (70225.0, "19 h 30 min"),
        (987404.0, "11 d 10 h"),
        (0.024441728, "24.4 ms"),
        (0.0000123, "12.3 µs"),
        (5.4e-8, "54.0 ns"),
        (3.25, "3.25 s"),
        (125.0, "2 min 5 s"),
        (0.0, "0 s"),
        (None, "n/a"),
        (float("nan"), "n/a"),
    ],
)
def test_durations_read_in_human_units(seconds: float | None, text: str) -> None:
    """The issue's raw figures ("wait mean 70225 s", "max 24.441728 ms") read as people say them."""
    assert figures.duration(seconds) == text


@pytest.mark.parametrize(
    ("value", "unit", "text"),
    [(24.441728, figures.MS, "24.4 ms"), (None, figures.MS, "n/a"), (850.0, figures.NS, "850 ns")],
)
def test_durations_in_other_units(value: float | None, unit: float, text: str) -> None:
    """Figures kept in ms or ns in JSON print in the unit that suits them."""
    assert figures.scaled_duration(value, unit) == text


@pytest.mark.parametrize(
    ("num_bytes", "text"),
    [(512, "512 B"), (1536, "1.50 KiB"), (3 * 2**30, "3.00 GiB"), (200 * 2**20, "200 MiB")],
)
def test_sizes_in_binary_units(num_bytes: int, text: str) -> None:
    """Memory prints in B, KiB, MiB, GiB."""
    assert figures.size(num_bytes) == text


def test_rates_changes_and_counts() -> None:
    """Rates take k/M prefixes; a ratio prints as a signed change; counts get separators."""
    assert figures.rate(1234.5, "req") == "1.23 k req/s"
    assert figures.rate(0.5) == "0.50/s"
    assert figures.rate(1234.5) == "1.23 k/s"
    assert figures.change(1.25) == "+25.0%"
    assert figures.change(float("inf")) == "n/a"
    assert figures.count(1523) == "1,523"


def test_table_headers_say_which_way_is_better() -> None:
    """Arrows in the headers, and a caption explaining the arrows and n/a."""
    table = make_table(
        "t",
        (label("name"), Column("wait", "lower"), Column("goodput", "higher")),
        na="not measured",
    )
    table.add_row("a", "1 s", "n/a")
    console = Console(width=100, record=True)
    console.print(table)
    text = console.export_text()
    assert "wait ↓" in text
    assert "goodput ↑" in text
    assert "↓ lower is better" in text
    assert "↑ higher is better" in text
    assert "n/a: not measured" in text
