"""Loading inputs that are not regular files (``traceq.loading``): FIFOs, devices.

Specification: a FIFO, ``/dev/zero`` or another device is refused with one line naming it and
saying how to read it anyway, and it is refused from its ``stat`` -- never opened, so that a FIFO
without a writer cannot block the import (each test here opens the FIFO's other end itself if
traceq did not, so a wrong open fails the test instead of hanging it).  Asked to
(``special_files=True`` or ``$TRACEQ_READ_SPECIAL_FILES=1``), traceq copies the stream, up to a
bound, to a temporary file and reads that: the same trace as the regular file, its rows naming
the path given.
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import traceq
from traceq import loading
from traceq.errors import LimitExceededError, NotARegularFileError
from traceq.importers import SPECIAL_FILES_ENV, detect_format, read_file

POSIX_ONLY = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX")


@contextmanager
def _fifo_fed_with(folder: Path, name: str, data: bytes | None) -> Iterator[Path]:
    """A FIFO in ``folder`` and a thread that writes ``data`` to it once a reader opens it (None:
    writes nothing).  On the way out, a reader is opened here if nobody opened one, so the writer
    never waits forever, whatever the code under test did."""
    fifo = folder / name
    os.mkfifo(fifo)
    opened = threading.Event()

    def write() -> None:
        with fifo.open("wb") as fh:  # blocks until a reader opens the FIFO
            opened.set()
            if data:
                fh.write(data)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        yield fifo
    finally:
        if not opened.is_set():
            reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # lets the writer through
            writer.join()
            os.close(reader)
        writer.join()


@POSIX_ONLY
def test_a_fifo_is_refused_before_it_is_opened(tmp_path: Path) -> None:
    with _fifo_fed_with(tmp_path, "trace.json", None) as fifo:
        for read in (lambda: traceq.load(fifo), lambda: detect_format(fifo), lambda: read_file(fifo, "kineto-json")):
            with pytest.raises(NotARegularFileError) as caught:
                read()
            message = caught.value.one_line()
            assert message.startswith(f"{fifo}: is a FIFO (a named pipe), not a regular file")
            assert SPECIAL_FILES_ENV in message


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
def test_a_character_device_is_refused_even_with_its_format_forced() -> None:
    with pytest.raises(NotARegularFileError, match="is a character device"):
        traceq.load("/dev/zero", fmt="kineto-json", cache=False)


@POSIX_ONLY
@pytest.mark.parametrize("how", ["keyword", "environment"])
def test_asked_to_traceq_reads_a_fifo_through_a_temporary_copy(
    tmp_path: Path, samples: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    sample = samples / "training_step.pt.trace.json.gz"
    expected = traceq.load(sample, cache=False)
    if how == "environment":
        monkeypatch.setenv(SPECIAL_FILES_ENV, "1")
    with _fifo_fed_with(tmp_path, "piped.pt.trace.json.gz", sample.read_bytes()) as fifo:
        trace = traceq.load(fifo, special_files=True if how == "keyword" else None)
    assert trace.events.drop("source").equals(expected.events.drop("source"))
    assert set(trace.events["source"].cast(str)) == {str(fifo)}
    assert [s.path for s in trace.meta.sources] == [str(fifo)]
    assert {c.source for c in trace.import_stats.counts} == {str(fifo)}


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
def test_what_is_read_from_a_stream_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loading, "SPECIAL_FILE_MAX_BYTES", 4 << 20)
    with pytest.raises(LimitExceededError, match="/dev/zero: holds more than"):
        traceq.load("/dev/zero", fmt="kineto-json", special_files=True)


@POSIX_ONLY
def test_errors_about_a_stream_read_through_a_copy_name_the_stream(tmp_path: Path) -> None:
    with (
        _fifo_fed_with(tmp_path, "garbage.json", b"this is not json at all") as fifo,
        pytest.raises(traceq.errors.TraceqError) as caught,
    ):
        traceq.load(fifo, special_files=True)
    assert caught.value.path == str(fifo)


@POSIX_ONLY
def test_a_directory_scan_skips_what_is_not_a_regular_file(tmp_path: Path, samples: Path) -> None:
    shutil.copyfile(samples / "training_step.pt.trace.json.gz", tmp_path / "rank0.pt.trace.json.gz")
    os.mkfifo(tmp_path / "rank1.pt.trace.json.gz")
    assert loading.expand_paths(tmp_path) == [tmp_path / "rank0.pt.trace.json.gz"]
