"""Specification of the nsys importer's compiled reader (traceq.importers.nsys._column_reader, used by
traceq.importers.nsys.export_db.ExportDb.read_chunks).

It reads a query whose columns hold integers and NULLs into int64 buffers with Arrow validity
bitmaps, and must give exactly the rows the ``sqlite3`` module gives; anything else it declines,
and the chunk is read through ADBC; SQLite's own failures become CorruptTraceError; and a
whole import is the same with the reader on and off (``TRACEQ_NSYS_COMPILED_READER=0``).
"""

from __future__ import annotations

import sqlite3
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from traceq.errors import CorruptTraceError
from traceq.importers.nsys import column_reader, export_db
from traceq.importers.nsys.export_db import INT, open_export, sqlite_uri
from traceq.importers.nsys.sqlite_importer import _CHUNKED, read_nsys_sqlite

SHIPPED_SAMPLE = Path(__file__).resolve().parents[3] / "sample_traces" / "training_step.nsys.sqlite"
SAMPLES = Path(__file__).resolve().parents[3] / ".." / "shared" / "sample_traces" / "nsys"
SAMPLE_NAMES = sorted(p.name for p in SAMPLES.glob("*.sqlite")) or ["(no samples)"]

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
Row = tuple[int | None, ...]

_column_reader = pytest.importorskip("traceq.importers.nsys._column_reader", reason="the compiled reader is not built")
pytestmark = pytest.mark.skipif(
    column_reader.sqlite_functions() is None, reason="the compiled reader found no SQLite library"
)


# --------------------------------------------------------------------------------------------
# helpers


def write_table(path: Path, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> Path:
    """An SQLite file with one table ``T`` of ``columns`` (declarations, e.g. ``"a INTEGER"``) and ``rows``."""
    conn = sqlite3.connect(path)
    conn.execute(f"CREATE TABLE T ({', '.join(columns)})")
    if rows:
        conn.executemany(f"INSERT INTO T VALUES ({', '.join('?' for _ in columns)})", rows)
    conn.commit()
    conn.close()
    return path


def sqlite3_rows(path: Path, sql: str) -> list[Row]:
    conn = sqlite3.connect(path)
    try:
        return [tuple(row) for row in conn.execute(sql).fetchall()]
    finally:
        conn.close()


def compiled_read(path: Path, sql: str, rows_hint: int = 0) -> tuple[int, list[Any]] | str:
    """What the compiled reader returns for ``sql`` on a connection of its own."""
    functions = column_reader.sqlite_functions()
    assert functions is not None
    conn = _column_reader.Connection(sqlite_uri(path), functions)
    try:
        return conn.read(sql, rows_hint)
    finally:
        conn.close()


def as_rows(result: tuple[int, list[Any]] | str) -> list[Row]:
    """The reader's buffers decoded independently of export_db: rows of ints and Nones."""
    assert not isinstance(result, str), result
    n, columns = result
    decoded = []
    for values, validity, nulls in columns:
        assert len(memoryview(values)) == 8 * n
        assert (validity is None) == (nulls == 0)
        bitmap = None if validity is None else pa.py_buffer(validity)
        array = pa.Array.from_buffers(pa.int64(), n, [bitmap, pa.py_buffer(values)], null_count=nulls)
        array.validate(full=True)
        assert array.null_count == nulls
        decoded.append(array.to_pylist())
    return list(zip(*decoded, strict=True)) if decoded else []


def chunks(
    path: Path, table: str, spec: dict[str, pl.DataType], chunk_rows: int
) -> tuple[list[pl.DataFrame], list[str]]:
    """``read_chunks``' pieces and the reasons of the chunks the compiled reader declined."""
    db = open_export(path)
    try:
        return list(db.read_chunks(table, spec, chunk_rows=chunk_rows)), db.declined
    finally:
        db.close()


@pytest.fixture(autouse=True)
def reader_on(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The reader as traceq runs by default, whatever this shell's environment says."""
    monkeypatch.delenv(column_reader.COMPILED_READER_ENV, raising=False)
    yield


# --------------------------------------------------------------------------------------------
# the reader: integers and NULLs, exactly as sqlite3 reads them

EXTREMES: list[Row] = [
    (0, None, INT64_MIN),
    (-1, 1, INT64_MAX),
    (INT64_MAX, -(2**31), None),
    (None, 2**32, -7),
    (INT64_MIN, None, 0),
]


def test_integers_and_nulls_are_read_as_sqlite3_reads_them(tmp_path: Path) -> None:
    path = write_table(tmp_path / "t.sqlite", ("a INTEGER", "b INTEGER", "c"), EXTREMES)
    sql = "SELECT a, b, c FROM T"
    assert as_rows(compiled_read(path, sql)) == sqlite3_rows(path, sql) == EXTREMES


def test_a_column_without_nulls_has_no_bitmap(tmp_path: Path) -> None:
    path = write_table(tmp_path / "t.sqlite", ("a INTEGER", "b INTEGER"), [(1, None), (2, 5)])
    result = compiled_read(path, "SELECT a, b FROM T")
    assert not isinstance(result, str)
    n, [(_, a_validity, a_nulls), (_, b_validity, b_nulls)] = result
    assert (n, a_validity, a_nulls, b_nulls) == (2, None, 0, 1)
    assert bytes(memoryview(b_validity))[0] & 0b11 == 0b10  # bit set = not null


def test_an_empty_result_has_every_column_and_no_rows(tmp_path: Path) -> None:
    path = write_table(tmp_path / "t.sqlite", ("a INTEGER", "b INTEGER"), [(1, 2)])
    result = compiled_read(path, "SELECT a, b FROM T WHERE a > 5")
    assert not isinstance(result, str)
    assert result[0] == 0 and len(result[1]) == 2
    assert as_rows(result) == []


@pytest.mark.parametrize("rows_hint", [0, 1, 3, 100_000])
def test_buffers_grow_past_their_first_allocation(tmp_path: Path, rows_hint: int) -> None:
    # 5000 rows: more than the default first allocation (4096 rows) and than every small hint;
    # nulls at the first row, at growth boundaries and after them
    rows = [(i, None if i % 7 == 0 or i in (1, 2, 4, 4096) else -i, None if i > 4090 else i * 3) for i in range(5000)]
    path = write_table(tmp_path / "t.sqlite", ("a INTEGER", "b INTEGER", "c INTEGER"), rows)
    assert as_rows(compiled_read(path, "SELECT a, b, c FROM T", rows_hint)) == rows


@pytest.mark.parametrize(("value", "kind"), [(2.5, "REAL"), (3.0, "REAL"), ("12", "TEXT"), (b"\x01", "BLOB")], ids=str)
def test_a_value_that_is_not_an_integer_is_declined_not_converted(tmp_path: Path, value: object, kind: str) -> None:
    # an untyped column keeps what was stored (an INTEGER column would turn 3.0 and "12" into integers)
    path = write_table(tmp_path / "t.sqlite", ("a INTEGER", "b"), [(1, 1), (2, value), (3, 3)])
    assert compiled_read(path, "SELECT a, b FROM T") == f"column 1 (b) holds a {kind} value (row 1 of the result)"


def test_sqlite_failures_are_sqlite_errors(tmp_path: Path) -> None:
    path = write_table(tmp_path / "t.sqlite", ("a INTEGER",), [(1,)])
    with pytest.raises(_column_reader.SQLiteError, match="no such table: U"):
        compiled_read(path, "SELECT a FROM U")
    not_sqlite = tmp_path / "not.sqlite"
    not_sqlite.write_bytes(b"SQLite format 2\0" + b"x" * 4096)
    with pytest.raises(_column_reader.SQLiteError, match="not a database"):
        compiled_read(not_sqlite, "SELECT a FROM T")


def test_a_closed_connection_refuses_to_read(tmp_path: Path) -> None:
    functions = column_reader.sqlite_functions()
    assert functions is not None
    conn = _column_reader.Connection(sqlite_uri(write_table(tmp_path / "t.sqlite", ("a",), [(1,)])), functions)
    conn.close()
    conn.close()  # twice is harmless
    with pytest.raises(ValueError, match="closed"):
        conn.read("SELECT a FROM T")


# --------------------------------------------------------------------------------------------
# read_chunks: the reader where it can, ADBC where it declines


def test_chunks_equal_the_sqlite3_rows_in_order(tmp_path: Path) -> None:
    rows = [(i, None if i % 3 == 0 else -(i**3), INT64_MAX - i) for i in range(50)]
    path = write_table(tmp_path / "t.sqlite", ("a INTEGER", "b INTEGER", "c INTEGER"), rows)
    spec: dict[str, pl.DataType] = {"c": INT, "a": INT, "b": INT, "absent": INT}
    pieces, declined = chunks(path, "T", spec, chunk_rows=7)
    assert export_db.reader_backend() == "compiled" and not declined
    assert len(pieces) == 8 and all(p.schema == pl.Schema(spec) for p in pieces)
    assert pl.concat(pieces).rows() == [(c, a, b, None) for a, b, c in rows]


def test_a_declined_chunk_is_read_through_adbc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rows: list[tuple[Any, ...]] = [(i, None if i == 3 else i) for i in range(10)]
    rows[7] = (7, 7.0)  # kept as REAL by the untyped column
    path = write_table(tmp_path / "t.sqlite", ("a INTEGER", "b"), rows)
    spec: dict[str, pl.DataType] = {"a": INT, "b": INT}
    pieces, declined = chunks(path, "T", spec, chunk_rows=3)
    assert declined == [
        'column 1 (b) holds a REAL value (row 1 of the result): SELECT "a", "b" FROM "T" WHERE rowid BETWEEN 7 AND 9'
    ]
    assert pl.concat(pieces).rows() == [(i, None if i == 3 else i) for i in range(10)]
    monkeypatch.setenv(column_reader.COMPILED_READER_ENV, "0")
    assert export_db.reader_backend() == "adbc"
    without, _ = chunks(path, "T", spec, chunk_rows=3)
    assert pl.concat(pieces).equals(pl.concat(without))


def test_a_text_column_is_left_to_adbc(tmp_path: Path) -> None:
    path = write_table(tmp_path / "t.sqlite", ("a INTEGER", "t TEXT"), [(i, f"x{i}") for i in range(9)])
    pieces, declined = chunks(path, "T", {"a": INT, "t": export_db.TEXT}, chunk_rows=4)
    assert not declined  # never asked: the chunk's columns are not all integers
    assert pl.concat(pieces).rows() == [(i, f"x{i}") for i in range(9)]


def damage(path: Path, how: str) -> None:
    data = path.read_bytes()
    if how == "truncated":
        path.write_bytes(data[: len(data) // 2])
    else:  # the middle of the table's pages overwritten; the schema (page 1) and both ends intact
        quarter = len(data) // 4
        path.write_bytes(data[:quarter] + b"\xa5" * (2 * quarter) + data[3 * quarter :])


@pytest.mark.parametrize("how", ["truncated", "overwritten"])
@pytest.mark.parametrize("reader", ["compiled", "off"])
def test_a_damaged_export_is_a_corrupt_trace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reader: str, how: str
) -> None:
    if reader == "off":
        monkeypatch.setenv(column_reader.COMPILED_READER_ENV, "0")
    path = write_table(tmp_path / "t.sqlite", ("a INTEGER", "b INTEGER"), [(i, i * i) for i in range(20_000)])
    damage(path, how)
    with pytest.raises(CorruptTraceError, match="cannot be read as SQLite") as caught:
        db = open_export(path)
        try:
            list(db.read_chunks("T", {"a": INT, "b": INT}, chunk_rows=1000))
        finally:
            db.close()
    assert caught.value.path == str(path)
    if (reader, how) == ("compiled", "overwritten"):  # the reader's own error, from the damaged chunks
        assert isinstance(caught.value.__cause__, _column_reader.SQLiteError)


@given(
    st.lists(st.one_of(st.none(), st.integers(INT64_MIN, INT64_MAX)), min_size=1, max_size=4).flatmap(
        lambda first: st.lists(
            st.tuples(*(st.one_of(st.none(), st.integers(INT64_MIN, INT64_MAX)) for _ in first)), max_size=60
        ).map(lambda rest: [tuple(first), *rest])
    ),
    st.integers(1, 25),
)
@settings(max_examples=60, deadline=None)
def test_any_integer_and_null_columns_read_in_any_chunks_equal_sqlite3(rows: list[Row], chunk_rows: int) -> None:
    columns = [f"c{i}" for i in range(len(rows[0]))]
    with tempfile.TemporaryDirectory() as folder:
        path = write_table(Path(folder) / "t.sqlite", [f"{c} INTEGER" for c in columns], rows)
        pieces, declined = chunks(path, "T", dict.fromkeys(columns, INT), chunk_rows)
        expected = sqlite3_rows(path, f"SELECT {', '.join(columns)} FROM T")
    assert not declined
    assert pl.concat(pieces).rows() == expected == rows


# --------------------------------------------------------------------------------------------
# whole imports: the same with the reader on and off


def import_both_ways(path: Path, monkeypatch: pytest.MonkeyPatch, chunk_rows: int | None) -> None:
    if chunk_rows is not None:
        monkeypatch.setattr(export_db, "CHUNK_ROWS", chunk_rows)
    assert export_db.reader_backend() == "compiled"
    on = read_nsys_sqlite(path)
    monkeypatch.setenv(column_reader.COMPILED_READER_ENV, "0")
    assert export_db.reader_backend() == "adbc"
    off = read_nsys_sqlite(path)
    assert on.events.schema == off.events.schema
    assert on.events.equals(off.events)
    assert (on.stats, on.meta) == (off.stats, off.meta)


def no_chunk_is_declined(path: Path) -> None:
    """nsys's activity columns are INTEGER: the reader takes every chunk of the tables read in chunks."""
    db = open_export(path)
    try:
        for name, spec in _CHUNKED:
            table = db.table(name)
            if table is not None:
                assert sum(piece.height for piece in db.read_chunks(table, spec, chunk_rows=1000)) == db.count(table)
        assert db.declined == []
    finally:
        db.close()


@pytest.mark.parametrize("chunk_rows", [None, 100], ids=["whole", "chunked"])
def test_the_shipped_sample_imports_the_same_with_the_reader_off(
    monkeypatch: pytest.MonkeyPatch, chunk_rows: int | None
) -> None:
    import_both_ways(SHIPPED_SAMPLE, monkeypatch, chunk_rows)


def test_the_shipped_sample_declines_no_chunk() -> None:
    no_chunk_is_declined(SHIPPED_SAMPLE)


@pytest.fixture(params=SAMPLE_NAMES)
def sample(request: pytest.FixtureRequest) -> Path:
    if not SAMPLES.is_dir():
        pytest.skip(f"../shared/sample_traces not present ({SAMPLES.resolve()}); real-trace tests need it")
    path = SAMPLES / str(request.param)
    if not path.is_file():
        pytest.skip(f"no nsys sample exports in {SAMPLES}")
    return path


@pytest.mark.real
@pytest.mark.parametrize("chunk_rows", [None, 1000], ids=["whole", "chunked"])
def test_real_export_imports_the_same_with_the_reader_off(
    sample: Path, monkeypatch: pytest.MonkeyPatch, chunk_rows: int | None
) -> None:
    import_both_ways(sample, monkeypatch, chunk_rows)


@pytest.mark.real
def test_real_export_declines_no_chunk(sample: Path) -> None:
    no_chunk_is_declined(sample)


def test_a_tables_row_span_is_its_count_where_rowids_are_dense_and_never_below_it(tmp_path: Path) -> None:
    """The progress line's row estimate (``row_span``: the rowid span, read from the b-tree's two
    ends) is the table's count where its rowids run without holes, as nsys writes them; never less
    than the count where they have holes; the count itself where the table has no rowid."""
    path = tmp_path / "spans.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE dense (v INTEGER)")
    conn.executemany("INSERT INTO dense VALUES (?)", [(i,) for i in range(1000)])
    conn.execute("CREATE TABLE holes (v INTEGER)")
    conn.executemany("INSERT INTO holes (rowid, v) VALUES (?, ?)", [(r, r) for r in (5, 6, 9, 40)])
    conn.execute("CREATE TABLE empty (v INTEGER)")
    conn.execute("CREATE TABLE keyed (k INTEGER PRIMARY KEY, v INTEGER) WITHOUT ROWID")
    conn.executemany("INSERT INTO keyed VALUES (?, ?)", [(k, k) for k in (3, 70, 900)])
    conn.execute("CREATE VIEW seen AS SELECT v FROM dense WHERE v < 10")
    conn.commit()
    conn.close()
    db = open_export(path)
    try:
        spans = {t: (db.row_span(t), db.count(t)) for t in ("dense", "holes", "empty", "keyed", "seen")}
    finally:
        db.close()
    assert spans == {"dense": (1000, 1000), "holes": (36, 4), "empty": (0, 0), "keyed": (3, 3), "seen": (10, 10)}
