"""The Nsight Systems writer: a :class:`~tracegen.timeline.Timeline` as an nsys SQLite export.

* :mod:`~tracegen.nsys.writer`: :func:`~tracegen.nsys.writer.write_nsys_sqlite` and
  :func:`~tracegen.nsys.writer.write_nsys_per_rank` (exported from :mod:`tracegen`), byte-deterministic;
* :mod:`~tracegen.nsys.activity`: the kernel, sync, memset, memcpy, runtime and NVTX rows;
* :mod:`~tracegen.nsys.target_info`: the machine, GPUs, processes, streams and metadata;
* :mod:`~tracegen.nsys.ids`: global thread/process ids and the ``StringIds`` table;
* :mod:`~tracegen.nsys.ddl`: the tables' DDL, copied from real exports (data).
"""
