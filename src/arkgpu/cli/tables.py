"""The command line's one table style (rich), with which way is better in every header.

The style: a left-aligned title, a rule under the header and no other lines (rows copy
and paste as plain text), figures right-aligned, notes below the table.

A column is declared with :class:`Column`; its header shows ``↓`` when lower is better
and ``↑`` when higher is better, and the table's caption explains the arrows and what
``n/a`` means for this table.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from rich import box
from rich.console import Console, ConsoleOptions, RenderResult
from rich.table import Table
from rich.text import Text

from arkgpu.cli.figures import NA

Better = Literal["lower", "higher"]

ARROWS: dict[Better, str] = {"lower": "↓", "higher": "↑"}
WIDTH = 132
"""Console width in characters: the same layout on a terminal, in a pipe and in a test."""


@dataclass(frozen=True)
class Column:
    """One column of a table."""

    header: str
    """What the column holds, with its unit."""
    better: Better | None = None
    """Which way is better, or None for a label or a figure with no better side."""
    numeric: bool = True
    """Right-aligned figures (True) or left-aligned labels (False)."""


class NotedTable(Table):
    """A rich table whose title and caption print at full width, above and below it."""

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        title, caption = self.title, self.caption
        self.title = self.caption = None
        if title:
            yield Text(str(title), style="bold")
        try:
            yield from super().__rich_console__(console, options)
        finally:
            self.title, self.caption = title, caption
        if caption:
            yield Text(str(caption))


def label(header: str) -> Column:
    """A left-aligned label column."""
    return Column(header, None, numeric=False)


def make_table(
    title: str, columns: Sequence[Column], notes: Iterable[str] = (), na: str | None = None
) -> Table:
    """A table in the project's style; ``na`` says what ``n/a`` means here."""
    table = NotedTable(
        title=title,
        caption=_caption(columns, notes, na),
        box=box.SIMPLE_HEAD,
        show_edge=False,
        collapse_padding=True,
    )
    for column in columns:
        arrow = f" {ARROWS[column.better]}" if column.better else ""
        table.add_column(
            f"{column.header}{arrow}",
            justify="right" if column.numeric else "left",
            no_wrap=not column.numeric,
        )
    return table


def _caption(columns: Sequence[Column], notes: Iterable[str], na: str | None) -> str:
    sides = {c.better for c in columns if c.better}
    parts = [f"{ARROWS[s]} {s} is better" for s in ("lower", "higher") if s in sides]
    if na:
        parts.append(f"{NA}: {na}")
    parts.extend(notes)
    return "; ".join(parts)


def console(stderr: bool = False) -> Console:
    """The console tables and messages are printed on."""
    return Console(width=WIDTH, stderr=stderr, highlight=False)


def print_table(table: Table, out: Console | None = None) -> None:
    """Print ``table`` on ``out`` (default: standard output)."""
    (out or console()).print(table)
