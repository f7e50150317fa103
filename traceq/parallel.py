"""The map step of a multi-rank import: each source file imported by one worker, in parallel.

This module owns *where* files are imported, not *how*: every task is
``traceq.trace.load([path], fmt=fmt, **load_kwargs)`` on one file, and :func:`import_sources`
returns the single-file :class:`~traceq.trace.Trace` objects in the order of its input.  Rank
assignment, the duplicate-rank check and concatenation stay in :mod:`traceq.trace`.

Three executors run the same task:

- **in-process**, for ``jobs=1``, for a single file, and, when ``jobs`` is left to its default,
  for inputs too small to repay starting workers;
- a local **process pool** (:class:`concurrent.futures.ProcessPoolExecutor` with the ``spawn``
  start method: polars and pyarrow start threads on import, so a forked worker could inherit
  a held lock);
- a **Dask distributed** cluster, given a ``distributed.Client`` or a scheduler address (the
  optional extra ``traceq[dask]``; imported only when asked for).

Results travel back pickled (a polars DataFrame pickles as its Arrow-IPC-based binary
serialisation) and the driver keeps every file's table: memory in the driver grows with the
whole job, in each worker with the file it is importing.  Errors are the driver's own: the first
failing file in input order (the file ``jobs=1`` would have stopped at) is raised as its
``TraceqError``, naming the file; a worker that dies is reported as a ``TraceqError`` too.
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures.process import BrokenProcessPool
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from traceq.errors import InvalidArgumentError, TraceqError

if TYPE_CHECKING:
    import distributed

    from traceq.importers import Format
    from traceq.trace import Trace

DASK_EXTRA = "traceq[dask]"
"""The optional extra that installs Dask distributed."""

AUTO_POOL_MIN_BYTES = 8 << 20
"""With ``jobs=None``, inputs smaller than this in total (on disk) are imported in-process.

Starting a spawned worker costs about 1.5-2.5 s of wall time here (each one imports polars,
pyarrow and traceq); one core imports about 2 MB/s of gzipped Kineto JSON and 5-10 MB/s of nsys
SQLite, so below ~8 MB two workers finish no sooner than one process.  An explicit ``jobs=N``
always uses the pool.
"""

_POOL_LOST_HINT = "it may have been killed for lack of memory: import with fewer --jobs"
_DASK_LOST_HINT = "the Dask workers running it kept dying, often for lack of memory: raise dask worker --memory-limit"

_IN_TASK: ContextVar[bool] = ContextVar("traceq_parallel_in_task", default=False)


@dataclass(frozen=True)
class _Imported:
    """One task's result; its ``__sizeof__`` tells Dask's memory manager how big the table is.

    ``warnings`` holds what a pool worker's import warned (message, file, line), replayed in the
    driver so that its filters and handlers (the CLI's ``CacheWarning`` line) see them.
    """

    trace: Trace
    warnings: tuple[tuple[Warning, str, int], ...] = ()

    def __sizeof__(self) -> int:
        return int(self.trace.events.estimated_size()) + 1024


def import_sources(
    files: Sequence[str | Path],
    *,
    fmt: Format | None = None,
    jobs: int | None = None,
    client: distributed.Client | None = None,
    scheduler: str | None = None,
    load_kwargs: Mapping[str, Any] | None = None,
) -> list[Trace]:
    """Import each file on its own worker; one single-file ``Trace`` per file, in input order.

    ``files`` are source files (directories already expanded).  Each is read by
    ``traceq.trace.load([path], fmt=fmt, **load_kwargs)``; ``load_kwargs`` is passed through
    untouched and must pickle.

    Where the work runs:

    - ``client`` (a ``distributed.Client``) or ``scheduler`` (an address such as
      ``tcp://host:8786``, connected to for this call and closed after): the files are mapped
      over the Dask cluster.  Workers must see the files at the same paths (a shared
      filesystem); relative paths are made absolute against the driver's working directory,
      and the imported tables then name the file by that absolute path.
    - ``jobs=1``: in this process, one file after the other.
    - ``jobs=N``: a pool of ``min(N, len(files))`` spawned processes.
    - ``jobs=None``: the pool with one process per available core, except for a single file or
      less than :data:`AUTO_POOL_MIN_BYTES` of input, which are imported in this process.

    Raises the ``TraceqError`` of the first failing file in input order (naming the file);
    a ``TraceqError`` when a worker process dies, when ``jobs`` is below 1, when both
    ``client`` and ``scheduler`` or ``jobs`` with either are given, when Dask is not
    installed, or when the scheduler cannot be reached.
    """
    if _IN_TASK.get():
        raise RuntimeError("import_sources was re-entered from its own task: load() of one file must read it directly")
    paths = [Path(f) for f in files]
    options = dict(load_kwargs or {})
    if client is not None and scheduler is not None:
        raise InvalidArgumentError("both a Dask client and a scheduler address were given", hint="pass one of them")
    if jobs is not None and (client is not None or scheduler is not None):
        raise InvalidArgumentError(
            "jobs sets the size of the local process pool; on a Dask cluster its workers decide",
            hint="drop --jobs or --scheduler",
        )
    if jobs is not None and jobs < 1:
        raise InvalidArgumentError(f"jobs must be at least 1, got {jobs}", hint="use --jobs 1 to import in-process")
    if not paths:
        return []
    if client is not None:
        return _on_dask(client, paths, fmt, options)
    if scheduler is not None:
        with _connect(scheduler) as own:
            return _on_dask(own, paths, fmt, options)
    workers = _pool_size(paths, jobs)
    if workers == 1:
        return [_import_one(p, fmt, options).trace for p in paths]
    return _on_pool(paths, fmt, options, workers)


def available_cores() -> int:
    """CPU cores this process may run on (its affinity mask where the OS has one)."""
    counter: Callable[[], int | None] | None = getattr(os, "process_cpu_count", None)  # Python 3.13+
    if counter is not None:
        return counter() or 1
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0)) or 1
    return os.cpu_count() or 1


def _pool_size(paths: Sequence[Path], jobs: int | None) -> int:
    if len(paths) == 1:
        return 1
    if jobs is None:
        if sum(_size_on_disk(p) for p in paths) < AUTO_POOL_MIN_BYTES:
            return 1
        jobs = available_cores()
    return min(jobs, len(paths))


def _size_on_disk(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0  # the task reports a missing file, with the importer's own message


def _import_one(
    path: Path, fmt: Format | None, load_kwargs: Mapping[str, Any], *, keep_warnings: bool = False
) -> _Imported:
    """The task: import one file (runs in the driver, a pool worker or a Dask worker).

    ``keep_warnings`` records the import's warnings into the result instead of showing them; only
    for pool workers, which run one task at a time (``catch_warnings`` is not thread-safe, and a
    Dask worker may run several tasks in threads: there they go to the worker's log).
    """
    from traceq.trace import load

    token = _IN_TASK.set(True)
    try:
        if not keep_warnings:
            return _Imported(load([path], fmt=fmt, **load_kwargs))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")  # the driver's filters decide, on replay
            trace = load([path], fmt=fmt, **load_kwargs)
        kept = tuple((w.message, w.filename, w.lineno) for w in caught if isinstance(w.message, Warning))
        return _Imported(trace, kept)
    except TraceqError as exc:
        if exc.path is None:
            exc.path = str(path)
            exc.args = (exc.one_line(),)
        raise
    except Exception as exc:
        exc.add_note(f"traceq: raised while importing {path}")
        raise
    finally:
        _IN_TASK.reset(token)


def _on_pool(paths: list[Path], fmt: Format | None, options: dict[str, Any], workers: int) -> list[Trace]:
    pool = concurrent.futures.ProcessPoolExecutor(
        max_workers=workers,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_exit_with_parent,
        initargs=(os.getpid(),),
    )
    try:
        futures = {pool.submit(_import_one, p, fmt, options, keep_warnings=True): i for i, p in enumerate(paths)}
        done = ((futures.pop(f), f.result) for f in concurrent.futures.as_completed(list(futures)))
        return _in_input_order(
            done,
            paths,
            lost=(BrokenProcessPool,),
            lost_hint=_POOL_LOST_HINT,
        )
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _exit_with_parent(parent: int) -> None:
    """Pool-worker initializer: exit once the driver is gone.

    A driver killed outright (SIGKILL, or SIGTERM to it alone) never shuts its pool down, and a
    worker blocked on the task queue would otherwise outlive it.
    """

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(1)

    threading.Thread(target=watch, name="traceq-exit-with-parent", daemon=True).start()


def _on_dask(client: distributed.Client, paths: list[Path], fmt: Format | None, options: dict[str, Any]) -> list[Trace]:
    dist = _distributed()
    remote = [p if p.is_absolute() else p.absolute() for p in paths]
    batch = uuid.uuid4().hex[:12]
    keys = [f"traceq-import-{batch}-{i}" for i in range(len(remote))]
    futures = client.map(_import_one, remote, key=keys, pure=False, fmt=fmt, load_kwargs=options)
    index = {f.key: i for i, f in enumerate(futures)}
    pending = dict(zip(index.values(), futures, strict=True))
    del futures  # a gathered result is freed on its worker once the driver drops its future
    try:
        done = (
            (index[f.key], pending.pop(index[f.key]).result)
            for f in dist.as_completed(list(pending.values()), loop=client.loop)
        )
        return _in_input_order(
            done,
            paths,
            lost=(dist.KilledWorker,),
            lost_hint=_DASK_LOST_HINT,
        )
    finally:
        if pending:
            client.cancel(list(pending.values()))  # type: ignore[no-untyped-call]  # distributed leaves it unannotated


def _in_input_order(
    done: Iterable[tuple[int, Callable[[], _Imported]]],
    paths: Sequence[Path],
    *,
    lost: tuple[type[BaseException], ...],
    lost_hint: str,
) -> list[Trace]:
    """Collect results as tasks finish; on failure, raise the first failing file in input order.

    ``done`` yields (input position, the finished task's ``result``) in completion order.  A
    failure at position ``i`` is raised once every position before ``i`` has finished, so the
    error does not depend on which worker was fastest.
    """
    results: list[_Imported | None] = [None] * len(paths)
    first_failure: tuple[int, BaseException] | None = None
    contiguous = 0  # results[:contiguous] are all present
    for position, result in done:
        try:
            results[position] = result()
        except lost as exc:
            failure: BaseException = TraceqError(
                "a worker process exited abruptly before this file was imported",
                path=paths[position],
                hint=lost_hint,
            )
            failure.__cause__ = exc
            if first_failure is None or position < first_failure[0]:
                first_failure = (position, failure)
        except Exception as exc:
            if first_failure is None or position < first_failure[0]:
                first_failure = (position, exc)
        while contiguous < len(results) and results[contiguous] is not None:
            contiguous += 1
        if first_failure is not None and contiguous >= first_failure[0]:
            raise first_failure[1]
    if first_failure is not None:
        raise first_failure[1]
    complete = [r for r in results if r is not None]
    if len(complete) != len(paths):
        raise RuntimeError(f"{len(paths) - len(complete)} of {len(paths)} import tasks never reported back")
    for imported in complete:
        for message, filename, lineno in imported.warnings:
            warnings.warn_explicit(message, type(message), filename, lineno)
    return [r.trace for r in complete]


def _distributed() -> ModuleType:
    """``distributed``, or a one-line error naming the extra that installs it."""
    try:
        import distributed
    except ImportError as exc:
        raise TraceqError(
            "running on a Dask cluster needs Dask distributed, which is not installed",
            hint=f"pip install '{DASK_EXTRA}'",
        ) from exc
    return distributed


def _connect(scheduler: str) -> distributed.Client:
    dist = _distributed()
    try:
        client: distributed.Client = dist.Client(scheduler, set_as_default=False)
    except (OSError, ValueError) as exc:
        raise TraceqError(
            f"cannot reach the Dask scheduler at {scheduler} ({exc})",
            hint="start one with dask scheduler, then dask worker <address> on each node",
        ) from exc
    return client
