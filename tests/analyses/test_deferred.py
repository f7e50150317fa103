"""Deferred calls: run once, by the first thread that calls them, their answer (or error) to any thread."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from traceq.analyses.breakdown import analyze_flagged
from traceq.analyses.comm import with_comm_flags
from traceq.analyses.deferred import Deferred, run_all
from traceq.analyses.options import Options

from ..builders import kernel, launch, step, trace


def test_many_threads_calling_run_it_once_and_all_read_its_answer() -> None:
    runs: list[int] = []
    gate = threading.Event()

    def work(x: int) -> int:
        gate.wait(5)
        runs.append(x)
        return x * 2

    call = Deferred(work, 21)
    with ThreadPoolExecutor(max_workers=4) as pool:
        callers = [pool.submit(call) for _ in range(4)]
        gate.set()
        answers = [pool.submit(call.result) for _ in range(4)]
        assert [f.result(5) for f in callers] == [None] * 4
        assert [f.result(5) for f in answers] == [42] * 4
    assert runs == [21]


def test_a_call_while_another_thread_runs_it_returns_at_once_and_result_waits() -> None:
    started, release = threading.Event(), threading.Event()

    def slow() -> str:
        started.set()
        release.wait(5)
        return "done"

    call = Deferred(slow)
    with ThreadPoolExecutor(max_workers=1) as pool:
        running = pool.submit(call)
        assert started.wait(5)
        call()  # (claimed by the pool's thread: returns without running it)
        waiting = pool.submit(call.result)  # (queued behind the running call)
        assert not waiting.done()
        release.set()
        assert running.result(5) is None and call.result() == "done"


def test_result_runs_it_where_no_thread_has() -> None:
    assert Deferred(sorted, [3, 1, 2]).result() == [1, 2, 3]


def test_an_error_on_the_thread_that_ran_it_is_raised_by_result_on_another() -> None:
    def broken() -> None:
        raise KeyError("lost?")

    call = Deferred(broken)
    with ThreadPoolExecutor(max_workers=1) as pool:
        assert pool.submit(call).result(5) is None  # (kept, not raised on the worker)
    with pytest.raises(KeyError, match="lost"):
        call.result()


def test_run_all_runs_each_call_not_yet_begun_once() -> None:
    seen: list[str] = []
    first = Deferred(seen.append, "a")
    first()
    run_all([first, Deferred(seen.append, "b"), Deferred(seen.append, "c")])
    assert seen == ["a", "b", "c"]


def test_the_analysis_has_run_the_spare_work_when_it_returns_and_keeps_its_error() -> None:
    """The breakdown's two threads run the caller's spare work; an error in it is the caller's to
    read (the analysis itself returns)."""
    events = with_comm_flags(
        trace(step(0, 1_000_000), launch(10_000, 12_000, 1), kernel(20_000, 80_000, corr=1)).events, Options()
    )
    threads: list[str] = []

    def note() -> str:
        threads.append(threading.current_thread().name)
        return "noted"

    def broken() -> None:
        raise RuntimeError("spare failed")

    done, failed = Deferred(note), Deferred(broken)
    analysis = analyze_flagged(events, Options(), spare=(done, failed))
    assert analysis.devices and len(threads) == 1
    assert done.result() == "noted" and len(threads) == 1  # (run once, by the analysis)
    with pytest.raises(RuntimeError, match="spare failed"):
        failed.result()
