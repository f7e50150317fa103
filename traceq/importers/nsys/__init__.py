"""The Nsight Systems importer: SQLite exports
(:func:`traceq.importers.nsys.sqlite_importer.read_nsys_sqlite`) and ``.nsys-rep`` reports
(:func:`traceq.importers.nsys.rep_importer.read_nsys_rep`, through ``nsys export``).

The work is split by stage, one module each, data flowing down this list (each module imports only
from those above it; an import-linter contract in ``pyproject.toml`` keeps it so):

* :mod:`~traceq.importers.nsys.column_reader` (over the compiled ``_column_reader``) -- integer
  columns of an SQLite query straight into Arrow buffers; :mod:`~traceq.importers.nsys.wal` -- a
  WAL-mode export with transactions not yet checkpointed, read from a private checkpointed copy;
* :mod:`~traceq.importers.nsys.export_db` -- read-only access to the export: tables, columns, bulk
  reads in chunks on a few threads, ``StringIds`` look-ups;
* :mod:`~traceq.importers.nsys.strings` -- names resolved once per distinct ``StringIds`` id;
* :mod:`~traceq.importers.nsys.convert` -- one converter per event table: raw columns to rows;
* :mod:`~traceq.importers.nsys.meta` -- what the export says about itself (versions, GPUs, ranks);
* :mod:`~traceq.importers.nsys.sqlite_importer` -- ``read_nsys_sqlite``, which ties them together;
* :mod:`~traceq.importers.nsys.rep_importer` -- ``read_nsys_rep``: ``nsys export``, cached, then the
  SQLite importer.

This ``__init__`` imports nothing, so that a stage can be imported without the stages after it
(and the compiled module's import, which the import graph sees as one of this package, makes no
cycle).
"""
