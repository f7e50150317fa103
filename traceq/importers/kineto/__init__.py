"""The PyTorch profiler (Kineto) and Chrome-trace JSON importer:
:func:`traceq.importers.kineto.importer.read_kineto`.

The work is split by stage, one module each, data flowing down this list (each module imports only
from those above it; an import-linter contract in ``pyproject.toml`` keeps it so):

* :mod:`~traceq.importers.kineto.trace_bytes` -- bytes: map or gunzip the file, give pages back;
* :mod:`~traceq.importers.kineto.raw_frame` -- the raw event frame both parsers build, and the
  conversions they share;
* :mod:`~traceq.importers.kineto.scanner` (over the compiled ``_scanner``) -- one validating pass
  over a block of events that writes the columns of the fields read;
* :mod:`~traceq.importers.kineto.fast_parser` -- the raw event frame by the columnar fast path, and
  :mod:`~traceq.importers.kineto.lenient_parser` -- the same frame by the lenient fallback;
* :mod:`~traceq.importers.kineto.compact` -- per-event normalisation, a block at a time, the flow
  events kept apart;
* :mod:`~traceq.importers.kineto.normalise` -- what needs the whole trace: pairs, links, kinds, stats;
* :mod:`~traceq.importers.kineto.meta` -- SourceMeta;
* :mod:`~traceq.importers.kineto.importer` -- ``read_kineto``, which ties them together.

This ``__init__`` imports nothing, so that a stage can be imported without the stages after it
(and the compiled module's import, which the import graph sees as one of this package, makes no
cycle).
"""
