"""Where per-file work runs: in this process, on a local process pool, or on a Dask cluster.

This module owns *where* work runs, never *what* it does: it knows files only as the labels of
tasks (for error messages, and sizes for the automatic choice), and nothing of traces.
:func:`open_executor` opens an :class:`Executor` for a set of items, chosen by **one** argument
(:data:`ExecutorSpec`):

- ``None``: automatic: a process pool with one process per available core, except for a single
  item or less than :data:`AUTO_POOL_MIN_BYTES` of input, which run in this process;
- an ``int`` ``N``: ``1`` runs in this process, one item after the other; ``N > 1`` a pool of
  ``min(N, items)`` spawned processes (:class:`concurrent.futures.ProcessPoolExecutor` with the
  ``spawn`` start method: polars and pyarrow start threads on import, so a forked worker could
  inherit a held lock);
- a ``str``: the address of a **Dask** scheduler (``tcp://host:8786``), connected to for the
  block and closed after;
- a ``distributed.Client``: that Dask cluster (the optional extra ``traceq[dask]``; imported only
  when asked for).

:meth:`Executor.map` runs a task -- a module-level function ``task(label, *args)``, pickled by
reference -- once per item and returns the results in input order, whatever order the workers
finish in.  The executor stays open for several rounds of tasks (the report pipeline runs two), so
a pool starts its processes once.  Results travel back pickled (a polars DataFrame pickles as its
Arrow-IPC-based binary serialisation); the driver holds what the tasks return, a worker what its
current task holds.

Errors are the driver's own: the first failing item in input order (the one an in-process run
would have stopped at) is raised as its ``TraceqError``, naming the item's file; a worker that dies
is reported as a ``TraceqError`` too.
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
import sys
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeAlias, TypeVar

from traceq.errors import InvalidArgumentError, TraceqError

if TYPE_CHECKING:
    import distributed

DASK_EXTRA = "traceq[dask]"
"""The optional extra that installs Dask distributed."""

AUTO_POOL_MIN_BYTES = 8 << 20
"""With the automatic executor (``None``), inputs smaller than this in total (on disk) run in this process.

Starting a spawned worker costs about 1.5-2.5 s of wall time here (each one imports polars,
pyarrow and traceq); one core imports about 2 MB/s of gzipped Kineto JSON and 5-10 MB/s of nsys
SQLite, so below ~8 MB two workers finish no sooner than one process.  An explicit number ``N``
always uses the pool.
"""

_POOL_LOST_HINT = "it may have been killed for lack of memory: import with fewer --jobs"
_DASK_LOST_HINT = "the Dask workers running it kept dying, often for lack of memory: raise dask worker --memory-limit"

T = TypeVar("T")
Task = Callable[..., T]
"""A task: a module-level function ``task(label, *args)`` (it must pickle by reference)."""

ExecutorSpec: TypeAlias = "int | str | distributed.Client | None"
"""Where work runs: ``None`` (automatic), a number of local processes (``1``: this process), a Dask
scheduler address, or a ``distributed.Client`` (see the module docstring)."""


@dataclass(frozen=True)
class _Done(Generic[T]):
    """One task's result; its ``__sizeof__`` tells Dask's memory manager how big it is.

    ``warnings`` holds what a task warned (message, file, line) where the executor recorded it
    (pool workers, which run one task at a time), replayed in the driver so that its filters and
    handlers (the CLI's ``CacheWarning`` line) see them.
    """

    value: T
    warnings: tuple[tuple[Warning, str, int], ...] = ()

    def __sizeof__(self) -> int:
        return _size_of(self.value) + 1024


def _size_of(value: object) -> int:
    """Bytes a task result holds: what its ``estimated_size()`` says, or its ``events`` table's."""
    for holder in (value, getattr(value, "events", None)):
        sizer = getattr(holder, "estimated_size", None)
        if callable(sizer):
            return int(sizer())
    return sys.getsizeof(value)


class Executor(Protocol):
    """An open executor: runs tasks over items, round after round."""

    def map(
        self,
        task: Task[T],
        items: Sequence[tuple[Path, tuple[Any, ...]]],
        *,
        doing: str = "imported",
        replay_warnings: bool = True,
    ) -> list[T]:
        """``task(path, *args)`` for each ``(path, args)`` of ``items``; the results in that order.

        Raises the error of the first failing item in input order; a worker that dies is a
        ``TraceqError`` naming the file ("... exited abruptly before this file was ``doing``").
        ``replay_warnings=False`` drops what the tasks warn (a second round over the same files
        would only repeat the first round's warnings).
        """
        ...


@contextmanager
def open_executor(spec: ExecutorSpec, labels: Sequence[str | Path]) -> Iterator[Executor]:
    """The executor ``spec`` names (:data:`ExecutorSpec`) for tasks over the files ``labels``,
    open for the ``with`` block.

    On Dask, workers must see the files at the same paths (a shared filesystem); relative paths
    are made absolute against the driver's working directory, so a task sees the absolute path.
    A pool is shut down after the block; a scheduler given by address is disconnected.

    Raises ``InvalidArgumentError`` for a number below 1 or a spec of another type; a
    ``TraceqError`` when Dask is not installed or the scheduler cannot be reached.
    """
    paths = [Path(f) for f in labels]
    if isinstance(spec, bool) or not (spec is None or isinstance(spec, int | str) or _is_client(spec)):
        raise InvalidArgumentError(
            f"cannot run work on {spec!r}",
            hint="pass a number of processes, a Dask scheduler address or a distributed.Client",
        )
    if isinstance(spec, int) and spec < 1:
        raise InvalidArgumentError(f"jobs must be at least 1, got {spec}", hint="use --jobs 1 to import in-process")
    if not paths:
        yield _InProcess()
    elif isinstance(spec, str):
        with _connect(spec) as own:
            yield _OnDask(own)
    elif spec is not None and not isinstance(spec, int):
        yield _OnDask(spec)
    elif (workers := _pool_size(paths, spec)) == 1:
        yield _InProcess()
    else:
        pool = concurrent.futures.ProcessPoolExecutor(
            max_workers=workers,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_exit_with_parent,
            initargs=(os.getpid(),),
        )
        try:
            yield _OnPool(pool)
        finally:
            pool.shutdown(wait=True, cancel_futures=True)


def on_cluster(spec: ExecutorSpec) -> bool:
    """Whether ``spec`` names a Dask cluster (whose workers may not share this machine's disk)."""
    return isinstance(spec, str) or not (spec is None or isinstance(spec, int))


def _is_client(value: object) -> bool:
    """Whether ``value`` is a ``distributed.Client``, without importing Dask when it is not installed."""
    dist = sys.modules.get("distributed")
    return dist is not None and isinstance(value, dist.Client)


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


def _run(task: Task[T], path: Path, args: tuple[Any, ...], *, keep_warnings: bool = False) -> _Done[T]:
    """Run one task (in the driver, a pool worker or a Dask worker), naming the file in its errors.

    ``keep_warnings`` records the task's warnings into the result instead of showing them; only
    where one task runs at a time (``catch_warnings`` is not thread-safe, and a Dask worker may
    run several tasks in threads: there they go to the worker's log).
    """
    try:
        if not keep_warnings:
            return _Done(task(path, *args))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")  # the driver's filters decide, on replay
            value = task(path, *args)
        kept = tuple((w.message, w.filename, w.lineno) for w in caught if isinstance(w.message, Warning))
        return _Done(value, kept)
    except TraceqError as exc:
        if exc.path is None:
            exc.path = str(path)
            exc.args = (exc.one_line(),)
        raise
    except Exception as exc:
        exc.add_note(f"traceq: raised while processing {path}")
        raise


class _InProcess:
    """Runs the tasks here, one after the other; the first failure stops the round."""

    def map(
        self,
        task: Task[T],
        items: Sequence[tuple[Path, tuple[Any, ...]]],
        *,
        doing: str = "imported",
        replay_warnings: bool = True,
    ) -> list[T]:
        # Warnings show as they happen, unless they are to be dropped.
        return [_run(task, p, args, keep_warnings=not replay_warnings).value for p, args in items]


class _OnPool:
    """Runs the tasks on a process pool."""

    def __init__(self, pool: concurrent.futures.ProcessPoolExecutor) -> None:
        self.pool = pool

    def map(
        self,
        task: Task[T],
        items: Sequence[tuple[Path, tuple[Any, ...]]],
        *,
        doing: str = "imported",
        replay_warnings: bool = True,
    ) -> list[T]:
        futures = {self.pool.submit(_run, task, p, args, keep_warnings=True): i for i, (p, args) in enumerate(items)}
        done = ((futures.pop(f), f.result) for f in concurrent.futures.as_completed(list(futures)))
        try:
            return _in_input_order(
                done,
                [p for p, _ in items],
                lost=(BrokenProcessPool,),
                lost_hint=_POOL_LOST_HINT,
                doing=doing,
                replay_warnings=replay_warnings,
            )
        finally:
            for future in futures:
                future.cancel()


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


@dataclass(frozen=True)
class _Packed(Generic[T]):
    """A task and its arguments, as one opaque value for Dask."""

    task: Task[T]
    args: tuple[Any, ...]


def _run_packed(path: Path, packed: _Packed[T]) -> _Done[T]:
    return _run(packed.task, path, packed.args)


class _OnDask:
    """Runs the tasks on a Dask cluster; each result is fetched, then its future released."""

    def __init__(self, client: distributed.Client) -> None:
        self.client = client

    def map(
        self,
        task: Task[T],
        items: Sequence[tuple[Path, tuple[Any, ...]]],
        *,
        doing: str = "imported",
        replay_warnings: bool = True,
    ) -> list[T]:
        dist = _distributed()
        paths = [p for p, _ in items]
        remote = [p if p.is_absolute() else p.absolute() for p in paths]
        batch = uuid.uuid4().hex[:12]
        keys = [f"traceq-{getattr(task, '__name__', 'task').strip('_')}-{batch}-{i}" for i in range(len(remote))]
        # Arguments travel packed: Dask would otherwise look inside tuples and lists for tasks and keys.
        packed = [_Packed(task, args) for _, args in items]
        futures = self.client.map(_run_packed, remote, packed, key=keys, pure=False)
        index = {f.key: i for i, f in enumerate(futures)}
        pending = dict(zip(index.values(), futures, strict=True))
        del futures  # a gathered result is freed on its worker once the driver drops its future
        try:
            done = (
                (index[f.key], pending.pop(index[f.key]).result)
                for f in dist.as_completed(list(pending.values()), loop=self.client.loop)
            )
            return _in_input_order(
                done,
                paths,
                lost=(dist.KilledWorker,),
                lost_hint=_DASK_LOST_HINT,
                doing=doing,
                replay_warnings=replay_warnings,
            )
        finally:
            if pending:
                self.client.cancel(list(pending.values()))  # type: ignore[no-untyped-call]  # distributed leaves it unannotated


def _in_input_order(
    done: Iterable[tuple[int, Callable[[], _Done[T]]]],
    paths: Sequence[Path],
    *,
    lost: tuple[type[BaseException], ...],
    lost_hint: str,
    doing: str = "imported",
    replay_warnings: bool = True,
) -> list[T]:
    """Collect results as tasks finish; on failure, raise the first failing file in input order.

    ``done`` yields (input position, the finished task's ``result``) in completion order.  A
    failure at position ``i`` is raised once every position before ``i`` has finished, so the
    error does not depend on which worker was fastest.
    """
    results: list[_Done[T] | None] = [None] * len(paths)
    first_failure: tuple[int, BaseException] | None = None
    contiguous = 0  # results[:contiguous] are all present
    for position, result in done:
        try:
            results[position] = result()
        except lost as exc:
            failure: BaseException = TraceqError(
                f"a worker process exited abruptly before this file was {doing}",
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
        raise RuntimeError(f"{len(paths) - len(complete)} of {len(paths)} tasks never reported back")
    if replay_warnings:
        for finished in complete:
            for message, filename, lineno in finished.warnings:
                warnings.warn_explicit(message, type(message), filename, lineno)
    return [r.value for r in complete]


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
