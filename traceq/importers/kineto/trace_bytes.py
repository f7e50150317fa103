"""Byte-level work of the Kineto importer, its first stage: reading the file, inflating gzip.

:func:`read_trace_bytes` returns the file's JSON bytes (:data:`Raw`: gunzipped into one
preallocated buffer when the content is gzip), :func:`open_trace` the same but a gzip file as it
starts inflating on a helper thread (:class:`Inflating`), whose pages the parser gives back as it
goes (:func:`move_pages`).  What the bytes hold is the parsers' business
(:mod:`traceq.importers.kineto.fast_parser`, :mod:`traceq.importers.kineto.lenient_parser`).

Gzip bombs: inflating more than :func:`inflate_limit` bytes (``max_inflate_ratio`` times the
compressed size, :data:`DEFAULT_MAX_INFLATE_RATIO` unless ``$TRACEQ_MAX_INFLATE_RATIO`` says
otherwise, and never less than :data:`MIN_INFLATE_LIMIT_BYTES`) is refused with
:class:`~traceq.errors.LimitExceededError`.  Below the limit, what no parser needs is dropped as it
inflates (the compiled ``squeeze``): runs of whitespace keep their first :data:`MAX_BLANK_RUN_BYTES`
bytes and strings their first :data:`MAX_STRING_BYTES`, so that the memory an inflated file takes is
that of its content, not of its padding.
"""

from __future__ import annotations

import gzip
import mmap
import os
import threading
import zlib
from pathlib import Path
from typing import Final

from traceq.errors import CorruptTraceError, InputNotFoundError, InvalidArgumentError, LimitExceededError

try:
    # The compiled scanner's module also holds move_pages, which this stage needs (one C module
    # keeps the build simple); the scanner itself is traceq.importers.kineto.scanner's business.
    from traceq.importers.kineto import _scanner
except ImportError:  # a source tree imported without its compiled module (pip install . builds it)
    _scanner = None  # type: ignore[assignment]

Raw = bytes | bytearray | mmap.mmap
"""The file's bytes as the parsers read them."""

_GZIP_MAGIC: Final = b"\x1f\x8b"
_GZIP_MIN_BYTES: Final = 18
"""A gzip member is at least a 10-byte header, an empty deflate block and an 8-byte trailer."""
_MAX_DEFLATE_RATIO: Final = 1032
_READ_STEP_BYTES: Final = 4 << 20
"""Gzip is inflated this many bytes at a time, so no temporary ever holds the whole file."""

MAX_INFLATE_RATIO_ENV: Final = "TRACEQ_MAX_INFLATE_RATIO"
"""Environment variable that sets the inflation limit's ratio where ``max_inflate_ratio`` is not given."""
DEFAULT_MAX_INFLATE_RATIO: Final = 100
"""Real Kineto traces inflate 8 to 30 times; a whitespace bomb about 1000 times."""
MIN_INFLATE_LIMIT_BYTES: Final = 64 << 20
"""A small file may always inflate this far (its ratio says little, and this much costs little)."""
MAX_BLANK_RUN_BYTES: Final = 64 << 10
"""A run of whitespace outside strings keeps this many bytes; the rest is dropped as it inflates."""
MAX_STRING_BYTES: Final = 8 << 20
"""A string keeps this many bytes as written (and its closing quote); the rest is dropped as it
inflates.  Above six times the longest text value a field keeps (``MAX_TEXT_BYTES`` of the scanner,
1 MiB: a ``\\uXXXX`` escape is six bytes for one), so that no kept value is changed by it."""

MAP_MIN_BYTES: Final = 1 << 20
_PRIVATE_ANONYMOUS: Final = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS
"""Memory of this process alone (Python's default for -1 is shared memory, whose pages
``MADV_DONTNEED`` only unmaps: they would stay allocated)."""


def inflate_limit(compressed_bytes: int, max_inflate_ratio: float | None = None) -> tuple[int, float]:
    """The most bytes a gzip file of ``compressed_bytes`` may inflate to, and the ratio that says so:
    ``max_inflate_ratio`` (else ``$TRACEQ_MAX_INFLATE_RATIO``, else :data:`DEFAULT_MAX_INFLATE_RATIO`)
    times the compressed size, at least :data:`MIN_INFLATE_LIMIT_BYTES`."""
    ratio = max_inflate_ratio
    if ratio is None:
        setting = os.environ.get(MAX_INFLATE_RATIO_ENV, "").strip()
        try:
            ratio = float(setting) if setting else DEFAULT_MAX_INFLATE_RATIO
        except ValueError:
            raise InvalidArgumentError(
                f"${MAX_INFLATE_RATIO_ENV} is {setting!r}, not a number", hint="set it to a ratio such as 1000"
            ) from None
    if not ratio > 0:
        raise InvalidArgumentError(f"the inflation limit's ratio must be positive, not {ratio}")
    return max(MIN_INFLATE_LIMIT_BYTES, int(min(ratio * compressed_bytes, 2.0**62))), ratio


def read_trace_bytes(path: Path, *, max_inflate_ratio: float | None = None) -> Raw:
    """The file's JSON bytes, gunzipped when the content starts with the gzip magic (not by suffix).

    A plain file of at least :data:`MAP_MIN_BYTES` is memory-mapped read-only (no copy: its pages
    are the page cache's); a gzip file is inflated into one preallocated ``bytearray``, squeezed
    and bounded as the module docstring says (``max_inflate_ratio``: see :func:`inflate_limit`).
    """
    opened = open_trace(path, max_inflate_ratio=max_inflate_ratio)
    return opened.whole() if isinstance(opened, Inflating) else opened


def open_trace(path: Path, *, max_inflate_ratio: float | None = None) -> Raw | Inflating:
    """:func:`read_trace_bytes`, except that a gzip file comes back as it starts inflating (an
    :class:`Inflating`), so that its first events can be parsed while the rest inflates."""
    try:
        with path.open("rb") as fh:
            magic = fh.read(2)
            if magic != _GZIP_MAGIC:
                size = fh.seek(0, 2)
                fh.seek(0)
                if size < MAP_MIN_BYTES:
                    return fh.read()
                mapped = mmap.mmap(fh.fileno(), 0, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ)
                mapped.madvise(mmap.MADV_SEQUENTIAL)  # read ahead; the parser gives pages back as it goes
                return mapped
            compressed_size = fh.seek(0, 2)
            if compressed_size < _GZIP_MIN_BYTES:
                raise CorruptTraceError(
                    f"gzip stream is damaged (only {compressed_size} bytes)",
                    path=path,
                    hint="the file is truncated or not gzip; copy it again",
                )
            fh.seek(-4, 2)
            limit, ratio = inflate_limit(compressed_size, max_inflate_ratio)
            # ISIZE (uncompressed size mod 2**32) is only a hint: multi-member files and files
            # over 4 GiB break it (see Inflating.whole).  Deflate cannot expand more than
            # ~1032:1, and the limit bounds it further: a damaged or hostile trailer cannot make
            # us allocate more.
            size_hint = min(int.from_bytes(fh.read(4), "little"), compressed_size * _MAX_DEFLATE_RATIO, limit)
    except FileNotFoundError as exc:
        raise InputNotFoundError("no such file", path=path, hint="check the path") from exc
    except OSError as exc:
        raise InputNotFoundError(f"cannot be read ({exc.strerror})", path=path, hint="check permissions") from exc
    return Inflating(path, size_hint, limit=(limit, ratio))


class _InflatedPastLimit(Exception):
    """The inflater's signal that the stream holds more than the limit allows."""


class InflatedPastHint(Exception):
    """The gzip stream holds more than its trailer said (several members, or over 4 GiB): the bytes
    seen so far are not the whole file, so a parse that started on them must start again."""


class Inflating:
    """A gzip file inflating on a helper thread into one preallocated buffer (the inflater, ISA-L's
    or zlib's, lets the GIL go while it works), read as it fills: :meth:`available` waits for the
    bytes asked for.

    Memory: a parser that gives back what it has parsed (:meth:`release`) can also hold the inflater
    to a distance ahead of it (:meth:`keep_ahead`), so that only that much inflated text is ever
    resident.  Released pages are moved to where the inflater will write next rather than freed
    (:func:`move_pages`): fresh memory is dear (each new page is a
    fault the kernel zero-fills), memory already faulted in is not.
    """

    def __init__(self, path: Path, size_hint: int, *, limit: tuple[int, float] | None = None):
        """Start inflating ``path`` into a buffer of ``size_hint`` bytes; ``limit`` is the most bytes
        the stream may inflate to and the ratio that set it (:func:`inflate_limit`; None: none)."""
        self.path = path
        self._limit = limit
        self._inflated = 0
        """Bytes inflated so far, before squeezing."""
        self._squeeze_state = bytearray(64)
        # Anonymous memory, so that the parser can give back the pages it is done with (release).
        self._data: bytearray | mmap.mmap = (
            mmap.mmap(-1, size_hint, flags=_PRIVATE_ANONYMOUS) if size_hint >= MAP_MIN_BYTES else bytearray(size_hint)
        )
        self._filled = 0
        self._writing_to = 0
        """End of the range the inflater may be writing now (set before it writes, under the lock)."""
        self._recycled_to = 0
        """End of the pages moved ahead of the inflater (already faulted in)."""
        self._parsed_to = 0
        """End of the bytes given back by release (the parser is past them); 0 until the first."""
        self._ahead: int | None = None
        self._wanted = 0
        self._rest = b""
        self._done = False
        self._error: BaseException | None = None
        self._ready = threading.Condition()
        self._thread = threading.Thread(target=self._inflate, name="traceq-gunzip", daemon=True)
        self._thread.start()

    def _inflate(self) -> None:
        try:
            with _gunzip(self.path) as gz, memoryview(self._data) as view:
                while True:
                    with self._ready:
                        while self._held_back():
                            self._ready.wait()
                        at = self._filled
                        if at >= len(self._data):
                            break
                        self._writing_to = min(at + _READ_STEP_BYTES, len(self._data))
                    got = gz.readinto(view[at : self._writing_to])
                    if not got:
                        break
                    end = self._squeezed(self._data, at, at + got)
                    with self._ready:
                        self._filled = end
                        self._ready.notify_all()
                rest = bytearray()
                while self._filled == len(self._data):  # more than the trailer said: kept aside
                    piece = bytearray(gz.read(_READ_STEP_BYTES))
                    if not piece:
                        break
                    rest += memoryview(piece)[: self._squeezed(piece, 0, len(piece))]
            self._rest = bytes(rest)
        except _INFLATE_ERRORS as exc:
            self._error = exc
        finally:
            with self._ready:
                self._done = True
                self._ready.notify_all()

    def _squeezed(self, buf: bytearray | mmap.mmap, begin: int, end: int) -> int:
        """Count ``buf[begin:end]`` (just inflated) against the limit and squeeze it; the end of
        what is kept.  Runs on the inflater's thread (the compiled ``squeeze`` lets the GIL go)."""
        self._inflated += end - begin
        if self._limit is not None and self._inflated > self._limit[0]:
            raise _InflatedPastLimit
        if _scanner is None:
            return end
        return _scanner.squeeze(buf, begin, end, self._squeeze_state, MAX_BLANK_RUN_BYTES, MAX_STRING_BYTES)

    @property
    def strings_cut(self) -> int:
        """Strings cut to :data:`MAX_STRING_BYTES` so far."""
        return int.from_bytes(self._squeeze_state[40:48], "little", signed=True)

    def squeeze_warnings(self) -> tuple[str, ...]:
        """What squeezing changed that a reader should know (whitespace dropped changes nothing)."""
        if not self.strings_cut:
            return ()
        return (
            f"{self.strings_cut} strings longer than {MAX_STRING_BYTES >> 20} MiB were cut to their first "
            f"{MAX_STRING_BYTES >> 20} MiB as the file inflated",
        )

    def _held_back(self) -> bool:
        """Whether the inflater is as far ahead of the parser as :meth:`keep_ahead` allows and
        nobody waits for more (called under the lock)."""
        return (
            self._ahead is not None and self._filled - self._parsed_to >= self._ahead and self._wanted <= self._filled
        )

    def keep_ahead(self, limit: int | None) -> None:
        """Inflate at most ``limit`` bytes past the last :meth:`release` (None: no limit), except
        as far as :meth:`available` is asked for.  A parser sets it while it releases as it goes,
        and lifts it when it stops (else the inflater waits for a parser that is gone)."""
        with self._ready:
            self._ahead = limit
            self._ready.notify_all()

    @property
    def expected_size(self) -> int:
        """The inflated size the gzip trailer gives (a hint: see :meth:`whole`)."""
        return len(self._data)

    def available(self, offset: int) -> memoryview:
        """The inflated bytes, once ``offset`` of them are there or the stream has ended.

        Raises :class:`CorruptTraceError` for a damaged stream and :class:`InflatedPastHint` when
        the whole stream is asked for and it is longer than its trailer said.
        """
        with self._ready:
            self._wanted = max(self._wanted, offset)
            self._ready.notify_all()
            while self._filled < offset and not self._done:
                self._ready.wait()
            self._check()
            if self._done and self._rest and offset > self._filled:
                raise InflatedPastHint(str(self.path))
            return memoryview(self._data)[: self._filled]

    def complete(self, size: int) -> bool:
        """Whether ``size`` bytes are the whole inflated file."""
        with self._ready:
            return self._done and self._error is None and not self._rest and size == self._filled

    def whole(self) -> bytearray | mmap.mmap:
        """All the inflated bytes (waits for the end; raises for a damaged stream).  Pages given back
        by :meth:`release` read as zeros: after a release, only the bytes outside the released
        ranges are the file's."""
        self.keep_ahead(None)
        self._thread.join()
        self._check()
        if self._filled < len(self._data) or self._rest:
            # A trailer that overstated or understated the size, or squeezed bytes: a copy
            # (resizing could not be while views are held).
            data = bytearray(memoryview(self._data)[: self._filled])
            data += self._rest
            self._data, self._rest = data, b""
        return self._data

    def inflated(self) -> memoryview:
        """All the inflated bytes without a copy, once the stream has ended (raises for a damaged
        stream, and :class:`InflatedPastHint` when it is longer than its trailer said)."""
        self.keep_ahead(None)
        self._thread.join()
        self._check()
        if self._rest:
            raise InflatedPastHint(str(self.path))
        return memoryview(self._data)[: self._filled]

    @property
    def released(self) -> bool:
        """Whether :meth:`release` gave back any pages (then :meth:`whole` is no longer the file)."""
        return self._parsed_to > 0

    def release(self, begin: int, end: int) -> None:
        """Give back the memory of inflated bytes ``begin:end`` (page-aligned, already parsed; bytes
        not inflated yet are left alone): its pages move to just past the inflater's write range
        where that fits, else go back to the system.  Either way ``begin:end`` then reads as zeros."""
        if not isinstance(self._data, mmap.mmap):
            return
        with self._ready:
            end = min(end, self._filled - self._filled % mmap.PAGESIZE)  # only bytes that were there
            if end <= begin:
                return
            target = max(self._recycled_to, -(-self._writing_to // mmap.PAGESIZE) * mmap.PAGESIZE)
            room = len(self._data) - target
            moving = min(end - begin, room - room % mmap.PAGESIZE)
            if moving > 0 and move_pages(self._data, begin, begin + moving, target):
                self._recycled_to = target + moving
                begin += moving
            if end > begin:
                self._data.madvise(mmap.MADV_DONTNEED, begin, end - begin)
            self._parsed_to = max(self._parsed_to, end)
            self._ready.notify_all()

    def _check(self) -> None:
        if isinstance(self._error, _InflatedPastLimit) and self._limit is not None:
            limit, ratio = self._limit
            raise LimitExceededError(
                f"gzip content inflates to more than {limit >> 20:,} MiB, the limit for a file of its size "
                f"({ratio:g} times the size, at least {MIN_INFLATE_LIMIT_BYTES >> 20} MiB): a gzip bomb, or a "
                "trace far more repetitive than profilers write",
                path=self.path,
                hint=f"if the trace is genuine, raise the limit: {MAX_INFLATE_RATIO_ENV}={10 * ratio:g} "
                "(max_inflate_ratio= in Python)",
            )
        if self._error is not None:
            raise CorruptTraceError(
                f"gzip stream is damaged ({self._error})",
                path=self.path,
                hint="the file is truncated or not gzip; copy it again",
            ) from self._error


def _gunzip(path: Path) -> gzip.GzipFile:
    """``path`` opened for gunzipping: by ISA-L (python-isal), whose inflate is about three times
    zlib's speed with the same gzip semantics (members, CRC and size checks), else by the
    standard library (a platform without isal's wheels)."""
    try:
        from isal import igzip
    except ImportError:
        return gzip.GzipFile(path, "rb")
    return igzip.IGzipFile(path, "rb")  # type: ignore[no-untyped-call]


def _inflate_errors() -> tuple[type[BaseException], ...]:
    try:
        from isal.igzip_lib import IsalError
    except ImportError:
        return (OSError, EOFError, zlib.error)
    return (OSError, EOFError, zlib.error, IsalError)  # type: ignore[return-value]  # its stub types the class as an instance


_INFLATE_ERRORS: Final[tuple[type[BaseException], ...]] = (*_inflate_errors(), _InflatedPastLimit)
"""What a damaged gzip stream raises while it inflates (and the inflater's own limit)."""


def move_pages(buf: mmap.mmap, begin: int, end: int, target: int) -> bool:
    """Move the memory pages of ``buf[begin:end]`` to ``buf[target:]`` (the compiled
    ``move_pages``); False where that cannot be done (not built, not Linux 5.7+)."""
    return _scanner is not None and _scanner.move_pages(buf, begin, end, target)
