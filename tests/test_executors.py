"""Where work runs (traceq.executors): the same single-file traces, in input order, on every executor.

In-process (``1``), a spawned process pool (``2``) and a Dask ``LocalCluster`` (a client, or its
scheduler's address) must give identical events, import statistics and metadata for the shipped
ranks and for generated 8-rank jobs in both formats, and the same reports; a worker's error is the
driver's one-line error.
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
import traceq.loading
from tracegen import Scenario, build_timeline, write_kineto_ranks, write_nsys_per_rank
from traceq import executors
from traceq.errors import InvalidArgumentError, TraceqError, UnsupportedFormatError
from traceq.executors import ExecutorSpec, open_executor
from traceq.loading import combine, iter_trace_files
from traceq.trace import Trace

from .conftest import REPO, SAMPLES


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
    return [traceq.load(f) for f in job_files]


def load_each(files: list[Path] | list[str], executor: ExecutorSpec) -> list[Trace]:
    """Each file imported by the loader's task on ``executor``, in input order."""
    with open_executor(executor, files) as tasks:
        return tasks.map(traceq.loading._load_task, [(Path(f), (None, True)) for f in files])


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
    assert_same(load_each(job_files, 1), reference)


def test_pool_matches_in_process(job_files: list[Path], reference: list[Trace]) -> None:
    got = load_each(job_files, 2)
    assert [t.meta.sources[0].path for t in got] == [str(f) for f in job_files]
    assert_same(got, reference)


def test_pool_results_combine_to_the_same_job(job_files: list[Path], reference: list[Trace]) -> None:
    """Categorical columns made in other processes concatenate to the same table."""
    kineto = [f for f in job_files if f.parent.name == "kineto"]
    want = combine([r for r, f in zip(reference, job_files, strict=True) if f.parent.name == "kineto"])
    got = combine(load_each(kineto, 2))
    assert got.meta == want.meta
    assert got.import_stats == want.import_stats
    assert got.events.equals(want.events)


def test_dask_matches_in_process(dask_client: Any, job_files: list[Path], reference: list[Trace]) -> None:
    assert_same(load_each(job_files, dask_client), reference)


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
        assert report_json(traceq.report(files, executor=1)) == report_reference[name], name
        assert report_json(traceq.report(files, executor=2, cache=False)) == report_reference[name], name


def test_the_report_by_rank_is_the_same_on_dask(
    dask_client: Any, job_files: list[Path], report_reference: dict[str, str]
) -> None:
    jobs = jobs_of(job_files)
    assert report_json(traceq.report(jobs["shipped"], executor=dask_client)) == report_reference["shipped"]
    assert report_json(traceq.report(jobs["kineto"], executor=dask_client, cache=False)) == report_reference["kineto"]
    address = dask_client.scheduler.address
    assert report_json(traceq.report(jobs["nsys"], executor=address)) == report_reference["nsys"]


def test_dask_by_scheduler_address(dask_client: Any, job_files: list[Path], reference: list[Trace]) -> None:
    address = dask_client.scheduler.address
    assert_same(load_each(job_files[:3], address), reference[:3])


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


_GUARD_S = 120.0
"""How long the test below waits for something that must happen: a guard against a hang, far
beyond any load, never a measurement (workers notice their driver is gone within a second)."""


def _wait_for(condition: Callable[[], bool]) -> bool:
    deadline = time.monotonic() + _GUARD_S
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


@pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="reads process states from /proc")
def test_pool_workers_exit_when_the_driver_is_killed(tmp_path: Path) -> None:
    """A SIGKILLed driver cannot shut its pool down; its workers must not linger.  Both workers
    run a task that never ends (tests/executor_tasks.py), so the driver is killed mid-way however
    fast the machine, and the test knows the workers' pids from the tasks themselves."""
    driver_code = (
        "import sys\nfrom pathlib import Path\nfrom traceq.executors import open_executor\n"
        "from tests.executor_tasks import announce_and_block\n"
        "folders = [Path(sys.argv[1])] * 2\n"
        "with open_executor(2, folders) as tasks:\n"
        "    tasks.map(announce_and_block, [(f, ()) for f in folders])\n"
    )
    driver = subprocess.Popen([sys.executable, "-c", driver_code, str(tmp_path)], cwd=REPO)
    try:
        assert _wait_for(lambda: len(list(tmp_path.glob("*.running"))) == 2), "the pool did not start"
    finally:
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait()
    workers = [int(p.name.split(".")[0]) for p in tmp_path.glob("*.running")]
    assert driver.pid not in workers
    _wait_for(lambda: not any(_alive(p) for p in workers))
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
    in_process = _error_of(lambda: load_each(with_bad_files, 1))
    pooled = _error_of(lambda: load_each(with_bad_files, 2))
    assert isinstance(in_process, UnsupportedFormatError)
    assert type(pooled) is type(in_process)
    assert (
        str(pooled)
        == str(in_process)
        == f"{with_bad_files[3]}: file is empty. The capture produced no data; profile again."
    )
    assert "\n" not in str(pooled)


def test_dask_worker_error_is_the_drivers_error(dask_client: Any, with_bad_files: list[Path]) -> None:
    in_process = _error_of(lambda: load_each(with_bad_files, 1))
    on_dask = _error_of(lambda: load_each(with_bad_files, dask_client))
    assert type(on_dask) is type(in_process)
    assert str(on_dask) == str(in_process)
    assert on_dask.path == str(with_bad_files[3])
    # the cluster is still usable afterwards (unfinished tasks were cancelled, not left running)
    assert len(load_each(with_bad_files[:2], dask_client)) == 2


def test_error_without_a_path_is_given_the_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def fails(path: Path, **_: object) -> Trace:
        raise InvalidArgumentError("unknown kind 'x'", hint="choose another")

    monkeypatch.setattr(traceq.loading, "load_file", fails)
    error = _error_of(lambda: load_each([tmp_path / "a.json", tmp_path / "b.json"], 1))
    assert str(error) == f"{tmp_path / 'a.json'}: unknown kind 'x'. Choose another."


def _finished(value: object) -> Callable[[], object]:
    def result() -> object:
        if isinstance(value, BaseException):
            raise value
        return value

    return result


def test_collecting_waits_for_earlier_files_before_raising() -> None:
    """Completion order 2 (fails), 0, 1 (fails): file 1's error is raised, as jobs=1 would."""
    trace = executors._Done(traceq.load(SAMPLES / "ranks" / "rank0.pt.trace.json.gz"))
    paths = [Path("a"), Path("b"), Path("c")]
    done = [(2, _finished(ValueError("c"))), (0, _finished(trace)), (1, _finished(KeyError("b")))]
    with pytest.raises(KeyError, match="b"):
        executors._in_input_order(done, paths, lost=(BrokenProcessPool,), lost_hint="fewer jobs")  # type: ignore[arg-type]


def test_a_dead_worker_is_a_one_line_error() -> None:
    done = [(0, _finished(BrokenProcessPool("terminated abruptly")))]
    paths = [Path("r0.json")]
    error = _error_of(
        lambda: executors._in_input_order(done, paths, lost=(BrokenProcessPool,), lost_hint="use fewer jobs")  # type: ignore[arg-type]
    )
    assert str(error) == "r0.json: a worker process exited abruptly before this file was imported. Use fewer jobs."
    assert isinstance(error.__cause__, BrokenProcessPool)


def test_missing_dask_names_the_extra(monkeypatch: pytest.MonkeyPatch, job_files: list[Path]) -> None:
    monkeypatch.setitem(sys.modules, "distributed", None)  # makes `import distributed` fail
    error = _error_of(lambda: load_each(job_files, "tcp://127.0.0.1:8786"))
    assert str(error) == (
        "running on a Dask cluster needs Dask distributed, which is not installed. pip install 'traceq[dask]'."
    )


def test_unreachable_scheduler_is_a_one_line_error(job_files: list[Path]) -> None:
    pytest.importorskip("distributed")
    import dask

    with dask.config.set({"distributed.comm.timeouts.connect": "0.5s"}):
        error = _error_of(lambda: load_each(job_files, "tcp://127.0.0.1:1"))
    assert str(error).startswith("cannot reach the Dask scheduler at tcp://127.0.0.1:1 (")
    assert "\n" not in str(error)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (0, "jobs must be at least 1, got 0"),
        (2.5, "cannot run work on 2.5"),
        (True, "cannot run work on True"),
        (object(), "cannot run work on <object object"),
    ],
)
def test_bad_executors(spec: Any, message: str, job_files: list[Path]) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        load_each(job_files, spec)


# --------------------------------------------------------------------------- plumbing


def test_the_format_and_cache_reach_each_files_load(monkeypatch: pytest.MonkeyPatch, reference: list[Trace]) -> None:
    seen: list[tuple[Path, dict[str, object]]] = []

    def recording(path: Path, **kwargs: object) -> Trace:
        seen.append((path, kwargs))
        return reference[len(seen) - 1]

    monkeypatch.setattr(traceq.loading, "load_file", recording)
    with open_executor(1, ["x.json", "y.json"]) as tasks:
        got = tasks.map(traceq.loading._load_task, [(Path(f), ("kineto-json", False)) for f in ("x.json", "y.json")])
    options = {"fmt": "kineto-json", "cache": False, "special_files": None, "max_inflate_ratio": None}
    assert seen == [(Path("x.json"), options), (Path("y.json"), options)]
    assert all(g is w for g, w in zip(got, reference[:2], strict=True))


def test_pool_worker_warnings_are_replayed_in_the_driver(
    monkeypatch: pytest.MonkeyPatch, reference: list[Trace]
) -> None:
    """What a worker's import warns reaches the driver's filters (the CLI prints cache warnings)."""

    def warning(path: Path, **_: object) -> Trace:
        warnings.warn(UserWarning(f"cache not writable for {path}"), stacklevel=1)
        return reference[0]

    monkeypatch.setattr(traceq.loading, "load_file", warning)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing is shown while the task runs
        imported = executors._run(traceq.loading._load_task, Path("r0.json"), (None, True), keep_warnings=True)
    shipped = pickle.loads(pickle.dumps(imported))  # as it travels back from a pool worker
    with pytest.warns(UserWarning, match="cache not writable for r0.json"):
        got = executors._in_input_order([(0, lambda: shipped)], [Path("r0.json")], lost=(), lost_hint="")
    assert got[0].events.equals(reference[0].events)


def test_loading_one_file_starts_no_executor(monkeypatch: pytest.MonkeyPatch, job_files: list[Path]) -> None:
    """A single file is read where ``load`` runs: no pool, whatever the executor asked for."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("an executor was opened")

    monkeypatch.setattr(traceq.loading, "open_executor", refuse)
    for spec in (None, 1, 4):
        assert traceq.load(job_files[0], executor=spec).events.height > 0


def test_pool_size(monkeypatch: pytest.MonkeyPatch, job_files: list[Path]) -> None:
    assert executors._pool_size(job_files[:1], None) == 1
    assert executors._pool_size(job_files[:1], 4) == 1
    assert executors._pool_size(job_files[:3], 8) == 3
    assert executors._pool_size(job_files, 2) == 2
    assert executors._pool_size(job_files, None) == 1  # a few small files: not worth starting workers
    monkeypatch.setattr(executors, "AUTO_POOL_MIN_BYTES", 0)
    monkeypatch.setattr(executors, "available_cores", lambda: 5)
    assert executors._pool_size(job_files, None) == 5


def test_no_files_no_work() -> None:
    assert load_each([], 2) == []


def test_available_cores_is_positive() -> None:
    assert executors.available_cores() >= 1
