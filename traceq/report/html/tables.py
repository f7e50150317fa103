"""The tables of the HTML report as data: columns, rows and cells of text that the section
builders fill and the ``table`` macro (``templates/sections/macros.html.j2``) lays out.

A cell holds plain text (the template escapes it), whether it is a number (right-aligned), its
CSS classes (``name`` for names in monospace, ``hi`` for a highlighted value, ``nowrap``), a
tooltip, and the colour of a swatch drawn before the text.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from traceq.units import shorten

KERNEL_NAME_CHARS: Final = 200
"""Names in tables are cut to this many characters; the cell's tooltip holds the whole name."""


@dataclass(frozen=True)
class Cell:
    """One ``<td>``: ``text``, right-aligned when ``num``, with extra ``cls`` classes, a
    ``title`` tooltip and a ``swatch`` colour before the text."""

    text: str
    num: bool = False
    cls: str = ""
    title: str | None = None
    swatch: str | None = None

    @property
    def classes(self) -> str:
        """The cell's ``class`` attribute (empty for none)."""
        return " ".join(c for c in ("n" if self.num else "", self.cls) if c)


@dataclass(frozen=True)
class Column:
    """One ``<th>``: the column's title, whether it holds numbers, and a swatch colour before the title."""

    title: str
    num: bool = False
    swatch: str | None = None


@dataclass(frozen=True)
class Row:
    """One ``<tr>`` and its ``class`` (``total`` for a sum row)."""

    cells: tuple[Cell, ...]
    cls: str = ""


@dataclass(frozen=True)
class Table:
    """A table: its head and its rows."""

    columns: tuple[Column, ...]
    rows: tuple[Row, ...]


def table(columns: Iterable[Column], rows: Iterable[Row]) -> Table:
    return Table(tuple(columns), tuple(rows))


def row(*cells: Cell, cls: str = "") -> Row:
    return Row(cells, cls)


def num(text: str, *, cls: str = "") -> Cell:
    """A right-aligned cell of a number."""
    return Cell(text, num=True, cls=cls)


def name_cell(name: str, width: int = KERNEL_NAME_CHARS) -> Cell:
    """A name in monospace, cut to ``width`` characters with the whole name as the tooltip."""
    return Cell(shorten(name, width), cls="name", title=name if len(name) > width else None)
