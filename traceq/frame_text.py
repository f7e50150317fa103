"""A result frame as text for people and pipes: CSV, JSON rows, or a terminal table.

``traceq events`` and ``traceq sql`` print their frames through :func:`frame_text`.  The terminal
table spells the control characters of trace strings as escapes (:data:`traceq.units.CONTROL_ESCAPES`),
so that a name cannot move the cursor or clear the screen; CSV and JSON carry them as data.
"""

from __future__ import annotations

import json

import polars as pl

from traceq.units import CONTROL_ESCAPES


def frame_text(frame: pl.DataFrame, fmt: str) -> str:
    """``frame`` as ``csv``, ``json`` (a list of row objects) or ``table`` text, ending in a newline."""
    frame = frame.with_columns(pl.col(pl.Categorical, pl.Enum).cast(pl.String))
    if fmt == "csv":
        return frame.write_csv()
    if fmt == "json":
        return json.dumps(frame.to_dicts(), indent=1, default=str) + "\n"
    text = pl.col(pl.String)
    frame = frame.with_columns(text.str.replace_many(list(CONTROL_ESCAPES), list(CONTROL_ESCAPES.values())))
    with pl.Config(tbl_rows=-1, tbl_cols=-1, fmt_str_lengths=60, tbl_width_chars=200, tbl_hide_dataframe_shape=True):
        return f"{frame}\n"
