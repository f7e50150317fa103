"""The map step (traceq.parallel): the same single-file traces, in input order, on every executor.

In-process (``jobs=1``), a spawned process pool (``jobs=2``) and a Dask ``LocalCluster`` must give
identical events, import statistics and metadata for the shipped ranks and for generated 8-rank
jobs in both formats; a worker's error is the driver's one-line error.
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import signal
import subprocess
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

import pytest

import traceq
import traceq.trace
from tracegen import Scenario, build_timeline, write_kineto_ranks, write_nsys_per_rank
from traceq import parallel
from traceq.errors import InvalidArgumentError, TraceqError, UnsupportedFormatError
from traceq.parallel import import_sources
from traceq.trace import Trace, _combine, iter_trace_files

from .conftest import SAMPLES


@pytest.fixture(scope="module", autouse=True)
def _private_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Keep any columnar cache of ``load`` out of the user's cache directory (workers inherit it)."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv("TRACEQ_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        yield


@pytest.fixture(scope="module")
def job_files(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """The shipped 4 ranks, then a generated 8-rank job as Kineto and as per-rank nsys exports."""
    timeline = build_timeline(Scenario("parallel", ranks=8, world_size=8, steps=2, layers=2))
    root = tmp_path_factory.mktemp("jobs")
    kineto = write_kineto_ranks(timeline, root / "kineto")
    nsys = write_nsys_per_rank(timeline, root / "nsys")
    return [*iter_trace_files(SAMPLES / "ranks"), *kineto, *nsys]


@pytest.fixture(scope="module")
def reference(job_files: list[Path]) -> list[Trace]:
    return [traceq.trace.load([f]) for f in job_files]


@pytest.fixture(scope="module")
def dask_client() -> Iterator[Any]:
    """Two single-threaded worker processes, shut down (processes joined) after the module."""
    pytest.importorskip("distributed", reason="the Dask tests need the dask extra (pip install 'traceq[dask]')")
    import dask
    from distributed import Client, LocalCluster

    settings = {
        # The worker's sampling profiler keeps frames (and their locals) alive; the Kineto fast
        # path resizes a buffer that a finished frame's NumPy view may still pin (BufferError).
        # Off until the importer releases its views explicitly.
        "distributed.worker.profile.enabled": False,
    }
    with dask.config.set(settings):
        cluster = LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            silence_logs=logging.ERROR,
        )
        client = Client(cluster, set_as_default=False)
        try:
            yield client
        finally:
            client.close()
            cluster.close()


def assert_same(got: list[Trace], want: list[Trace]) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.meta == w.meta
        assert g.import_stats == w.import_stats
        assert g.events.schema == w.events.schema
        assert g.events.equals(w.events), g.meta.sources[0].path


# --------------------------------------------------------------------------- identical results


def test_in_process_is_load_of_each_file(job_files: list[Path], reference: list[Trace]) -> None:
    assert_same(import_sources(job_files, jobs=1), reference)


def test_pool_matches_in_process(job_files: list[Path], reference: list[Trace]) -> None:
    got = import_sources(job_files, jobs=2)
    assert [t.meta.sources[0].path for t in got] == [str(f) for f in job_files]
    assert_same(got, reference)


def test_pool_results_combine_to_the_same_job(job_files: list[Path], reference: list[Trace]) -> None:
    """Categorical columns made in other processes concatenate to the same table."""
    kineto = [f for f in job_files if f.parent.name == "kineto"]
    want = _combine([r for r, f in zip(reference, job_files, strict=True) if f.parent.name == "kineto"])
    got = _combine(import_sources(kineto, jobs=2))
    assert got.meta == want.meta
    assert got.import_stats == want.import_stats
    assert got.events.equals(want.events)


def test_dask_matches_in_process(dask_client: Any, job_files: list[Path], reference: list[Trace]) -> None:
    assert_same(import_sources(job_files, client=dask_client), reference)


# --------------------------------------------------------------------------- the report, rank by rank


def jobs_of(job_files: list[Path]) -> dict[str, list[Path]]:
    """The shipped 4-rank job and the generated 8-rank job in both formats."""
    return {"shipped": job_files[:4], "kineto": job_files[4:12], "nsys": job_files[12:]}


@pytest.fixture(scope="module")
def report_reference(job_files: list[Path]) -> dict[str, str]:
    """The JSON report of each job, from its whole table in memory."""
    return {name: report_json(traceq.report(traceq.load(files))) for name, files in jobs_of(job_files).items()}


def report_json(report: traceq.Report) -> str:
    return json.dumps(report.to_dict(), sort_keys=True)


def test_the_report_by_rank_is_the_same_in_process_and_on_the_pool(
    job_files: list[Path], report_reference: dict[str, str]
) -> None:
    for name, files in jobs_of(job_files).items():
        assert report_json(traceq.report(files, jobs=1)) == report_reference[name], name
        assert report_json(traceq.report(files, jobs=2, cache=False)) == report_reference[name], name


def test_the_report_by_rank_is_the_same_on_dask(
    dask_client: Any, job_files: list[Path], report_reference: dict[str, str]
) -> None:
    jobs = jobs_of(job_files)
    assert report_json(traceq.report(jobs["shipped"], client=dask_client)) == report_reference["shipped"]
    assert report_json(traceq.report(jobs["kineto"], client=dask_client, cache=False)) == report_reference["kineto"]
    address = dask_client.scheduler.address
    assert report_json(traceq.report(jobs["nsys"], scheduler=address)) == report_reference["nsys"]


def test_dask_by_scheduler_address(dask_client: Any, job_files: list[Path], reference: list[Trace]) -> None:
    address = dask_client.scheduler.address
    assert_same(import_sources(job_files[:3], scheduler=address), reference[:3])


def _children(pid: int) -> set[int]:
    found: set[int] = set()
    for listing in Path(f"/proc/{pid}/task").glob("*/children"):
        found |= {int(k) for k in listing.read_text().split()}
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads the process tree from /proc")
def test_pool_workers_exit_when_the_driver_is_killed(job_files: list[Path]) -> None:
    """A SIGKILLed driver cannot shut its pool down; its workers must not linger."""
    driver_code = (
        "import json, sys\n"
        "from traceq.parallel import import_sources\n"
        "import_sources(json.loads(sys.argv[1]), jobs=2)\n"
    )
    many = [str(f) for f in job_files] * 20  # long enough to be killed mid-way
    driver = subprocess.Popen([sys.executable, "-c", driver_code, json.dumps(many)])
    try:
        deadline = time.monotonic() + 60
        workers: set[int] = set()
        while len(workers) < 2 and time.monotonic() < deadline:  # the pool also starts a resource tracker
            time.sleep(0.2)
            workers = {p for p in _children(driver.pid) if "spawn_main" in Path(f"/proc/{p}/cmdline").read_text()}
        assert len(workers) == 2, "the pool did not start"
    finally:
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait()
    deadline = time.monotonic() + 15
    while any(_alive(p) for p in workers) and time.monotonic() < deadline:
        time.sleep(0.2)
    leaked = [p for p in workers if _alive(p)]
    for pid in leaked:
        os.kill(pid, signal.SIGKILL)
    assert not leaked


# --------------------------------------------------------------------------- errors


@pytest.fixture(scope="module")
def with_bad_files(job_files: list[Path], tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Good files with two unreadable ones at positions 3 and 6."""
    bad = tmp_path_factory.mktemp("bad")
    empty = bad / "rank90.pt.trace.json"
    empty.write_bytes(b"")
    not_a_trace = bad / "rank91.pt.trace.json"
    not_a_trace.write_bytes(b"PK\x03\x04 a zip archive")
    good = job_files[4:10]
    return [*good[:3], empty, *good[3:5], not_a_trace, good[5]]


def _error_of(run: Callable[[], object]) -> TraceqError:
    with pytest.raises(TraceqError) as caught:
        run()
    return caught.value


def test_first_failing_file_in_input_order_is_raised(with_bad_files: list[Path]) -> None:
    in_process = _error_of(lambda: import_sources(with_bad_files, jobs=1))
    pooled = _error_of(lambda: import_sources(with_bad_files, jobs=2))
    assert isinstance(in_process, UnsupportedFormatError)
    assert type(pooled) is type(in_process)
    assert (
        str(pooled)
        == str(in_process)
        == f"{with_bad_files[3]}: file is empty. The capture produced no data; profile again."
    )
    assert "\n" not in str(pooled)


def test_dask_worker_error_is_the_drivers_error(dask_client: Any, with_bad_files: list[Path]) -> None:
    in_process = _error_of(lambda: import_sources(with_bad_files, jobs=1))
    on_dask = _error_of(lambda: import_sources(with_bad_files, client=dask_client))
    assert type(on_dask) is type(in_process)
    assert str(on_dask) == str(in_process)
    assert on_dask.path == str(with_bad_files[3])
    # the cluster is still usable afterwards (unfinished tasks were cancelled, not left running)
    assert len(import_sources(with_bad_files[:2], client=dask_client)) == 2


def test_error_without_a_path_is_given_the_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def fails(paths: list[Path], **_: object) -> Trace:
        raise InvalidArgumentError("unknown kind 'x'", hint="choose another")

    monkeypatch.setattr(traceq.trace, "load", fails)
    error = _error_of(lambda: import_sources([tmp_path / "a.json", tmp_path / "b.json"], jobs=1))
    assert str(error) == f"{tmp_path / 'a.json'}: unknown kind 'x'. Choose another."


def _finished(value: object) -> Callable[[], object]:
    def result() -> object:
        if isinstance(value, BaseException):
            raise value
        return value

    return result


def test_collecting_waits_for_earlier_files_before_raising() -> None:
    """Completion order 2 (fails), 0, 1 (fails): file 1's error is raised, as jobs=1 would."""
    trace = parallel._Done(traceq.trace.load(SAMPLES / "ranks" / "rank0.pt.trace.json.gz"))
    paths = [Path("a"), Path("b"), Path("c")]
    done = [(2, _finished(ValueError("c"))), (0, _finished(trace)), (1, _finished(KeyError("b")))]
    with pytest.raises(KeyError, match="b"):
        parallel._in_input_order(done, paths, lost=(BrokenProcessPool,), lost_hint="fewer jobs")  # type: ignore[arg-type]


def test_a_dead_worker_is_a_one_line_error() -> None:
    done = [(0, _finished(BrokenProcessPool("terminated abruptly")))]
    error = _error_of(
        lambda: parallel._in_input_order(done, [Path("r0.json")], lost=(BrokenProcessPool,), lost_hint="use fewer jobs")  # type: ignore[arg-type]
    )
    assert str(error) == "r0.json: a worker process exited abruptly before this file was imported. Use fewer jobs."
    assert isinstance(error.__cause__, BrokenProcessPool)


def test_missing_dask_names_the_extra(monkeypatch: pytest.MonkeyPatch, job_files: list[Path]) -> None:
    monkeypatch.setitem(sys.modules, "distributed", None)  # makes `import distributed` fail
    error = _error_of(lambda: import_sources(job_files, scheduler="tcp://127.0.0.1:8786"))
    assert str(error) == (
        "running on a Dask cluster needs Dask distributed, which is not installed. pip install 'traceq[dask]'."
    )


def test_unreachable_scheduler_is_a_one_line_error(job_files: list[Path]) -> None:
    pytest.importorskip("distributed")
    import dask

    with dask.config.set({"distributed.comm.timeouts.connect": "0.5s"}):
        error = _error_of(lambda: import_sources(job_files, scheduler="tcp://127.0.0.1:1"))
    assert str(error).startswith("cannot reach the Dask scheduler at tcp://127.0.0.1:1 (")
    assert "\n" not in str(error)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"jobs": 0}, "jobs must be at least 1, got 0"),
        ({"client": object(), "scheduler": "tcp://h:8786"}, "both a Dask client and a scheduler address were given"),
        ({"jobs": 2, "scheduler": "tcp://h:8786"}, "jobs sets the size of the local process pool"),
    ],
)
def test_bad_arguments(kwargs: dict[str, Any], message: str, job_files: list[Path]) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        import_sources(job_files, **kwargs)


# --------------------------------------------------------------------------- plumbing


def test_load_kwargs_reach_load(monkeypatch: pytest.MonkeyPatch, reference: list[Trace]) -> None:
    seen: list[tuple[list[Path], dict[str, object]]] = []

    def recording(paths: list[Path], **kwargs: object) -> Trace:
        seen.append((paths, kwargs))
        return reference[len(seen) - 1]

    monkeypatch.setattr(traceq.trace, "load", recording)
    got = import_sources(["x.json", "y.json"], jobs=1, fmt="kineto-json", load_kwargs={"cache": False})
    assert seen == [
        ([Path("x.json")], {"fmt": "kineto-json", "cache": False}),
        ([Path("y.json")], {"fmt": "kineto-json", "cache": False}),
    ]
    assert all(g is w for g, w in zip(got, reference[:2], strict=True))


def test_pool_worker_warnings_are_replayed_in_the_driver(
    monkeypatch: pytest.MonkeyPatch, reference: list[Trace]
) -> None:
    """What a worker's import warns reaches the driver's filters (the CLI prints cache warnings)."""

    def warning(paths: list[Path], **_: object) -> Trace:
        warnings.warn(UserWarning(f"cache not writable for {paths[0]}"), stacklevel=1)
        return reference[0]

    monkeypatch.setattr(traceq.trace, "load", warning)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing is shown while the task runs
        imported = parallel._import_one(Path("r0.json"), None, {}, keep_warnings=True)
    shipped = pickle.loads(pickle.dumps(imported))  # as it travels back from a pool worker
    with pytest.warns(UserWarning, match="cache not writable for r0.json"):
        got = parallel._in_input_order([(0, lambda: shipped)], [Path("r0.json")], lost=(), lost_hint="")
    assert got[0].events.equals(reference[0].events)


def test_reentry_from_a_task_is_refused(monkeypatch: pytest.MonkeyPatch, job_files: list[Path]) -> None:
    """A load() that sent its single file back to import_sources would recurse forever."""

    def looping(paths: list[Path], **kwargs: Any) -> Trace:
        return import_sources(paths)[0]

    monkeypatch.setattr(traceq.trace, "load", looping)
    with pytest.raises(RuntimeError, match="re-entered"):
        import_sources(job_files[:2], jobs=1)


def test_pool_size(monkeypatch: pytest.MonkeyPatch, job_files: list[Path]) -> None:
    assert parallel._pool_size(job_files[:1], None) == 1
    assert parallel._pool_size(job_files[:1], 4) == 1
    assert parallel._pool_size(job_files[:3], 8) == 3
    assert parallel._pool_size(job_files, 2) == 2
    assert parallel._pool_size(job_files, None) == 1  # a few small files: not worth starting workers
    monkeypatch.setattr(parallel, "AUTO_POOL_MIN_BYTES", 0)
    monkeypatch.setattr(parallel, "available_cores", lambda: 5)
    assert parallel._pool_size(job_files, None) == 5


def test_no_files_no_work() -> None:
    assert import_sources([], jobs=2) == []


def test_available_cores_is_positive() -> None:
    assert parallel.available_cores() >= 1
