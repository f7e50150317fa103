"""The ten queries of docs/sql.md give the same rows through every way traceq offers to run them:
``traceq sql`` (polars' SQL), ``sqlite3`` on the file ``traceq convert -o x.db`` writes, DuckDB on
the Arrow tables and DuckDB on the Parquet files ``traceq sql -o`` writes."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Any, Final

import pytest
from click.testing import CliRunner

import traceq
from traceq.cli import cli
from traceq.exports.tables import TABLES

DOC: Final = Path(__file__).resolve().parents[2] / "docs" / "sql.md"
SAMPLES: Final = ("training_step.pt.trace.json.gz", "training_step.nsys.sqlite")


def documented_queries() -> list[str]:
    return re.findall(r"```sql\n(.*?)```", DOC.read_text(), flags=re.S)


def rows(found: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Rows with booleans as 0/1, as SQLite stores them."""
    return [tuple(int(v) if isinstance(v, bool) else v for v in row) for row in found]


def test_the_page_documents_ten_queries_each_over_a_named_table() -> None:
    queries = documented_queries()
    assert len(queries) == 10
    for query in queries:
        assert {w.lower() for w in re.findall(r"FROM (\w+)", query)} <= set(TABLES)


@pytest.mark.parametrize("sample", SAMPLES)
def test_each_documented_query_answers_the_same_in_polars_sqlite_and_duckdb(
    sample: str, samples: Path, tmp_path: Path
) -> None:
    duckdb = pytest.importorskip("duckdb")
    path = samples / sample
    trace = traceq.load(path)
    tables = traceq.tables(trace)
    database = tmp_path / "run.db"
    runner = CliRunner()
    assert runner.invoke(cli, ["convert", str(path), "-o", str(database)]).exit_code == 0
    arrow = duckdb.connect()
    parquet = duckdb.connect()
    for name in TABLES:
        arrow.register(name, tables.frame(name).to_arrow())
        out = tmp_path / f"{name}.parquet"
        result = runner.invoke(cli, ["sql", str(path), f"SELECT * FROM {name}", "-o", str(out)])
        assert result.exit_code == 0, result.output
        parquet.execute(f"CREATE VIEW {name} AS SELECT * FROM read_parquet('{out}')")
    with sqlite3.connect(database) as db:
        for query in documented_queries():
            expected = rows(traceq.sql(trace, query).rows())
            assert expected, f"the sample answers nothing to\n{query}"
            assert rows(db.execute(query).fetchall()) == expected, query
            assert rows(arrow.execute(query).fetchall()) == expected, query
            assert rows(parquet.execute(query).fetchall()) == expected, query
