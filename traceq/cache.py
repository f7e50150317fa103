"""The columnar cache: each source file's imported event table, kept as Parquet until the source changes.

An entry is a traceq Parquet file -- the format of :meth:`traceq.trace.Trace.to_parquet` (zstd,
the sources and import statistics under the ``traceq`` metadata key) -- with three more metadata
keys: ``traceq.cache``, the :class:`SourceKey` the entry was made from,
``traceq.cache.sha256``, a digest of the entry's own bytes, and ``traceq.cache.literals``, the
value of each column that holds one value in every row (:data:`ENTRY_LITERALS_KEY`): a hit
has those columns as literal columns, which hold no rows (:mod:`traceq.literal_columns`), and
does not decode them (the entry stores them too, so that it stays a traceq Parquet file).  This
module moves tables in and out of the directory; :mod:`traceq.trace` encodes and decodes them.

**An entry is never served damaged.**  Its digest is a SHA-256 of the whole file as written (its
first 128 bits, with the digest's own 32 characters read as zeros; :mod:`traceq.sealed_parquet`);
:meth:`Cache.get` reads the entry's bytes, checks the digest, and decodes the table from the bytes
it checked.  A bit flipped anywhere in the entry -- data pages, footer, metadata, the digest
itself -- fails the check: the entry is discarded with one :class:`CacheWarning`, and the source
is imported again.

**An entry is used only when the key of the source as it is now equals the stored key**:

* the source's resolved absolute path, its size and mtime (ns), and a SHA-256 digest of its size
  and its first and last :data:`~traceq.fingerprints.HASHED_SPAN_BYTES` (1 MiB; the whole file up
  to 2 MiB).  This *sampled* check reads at most 2 MiB: an edit that keeps the size and restores
  the mtime is caught when it touches the first or last MiB, **not** when it is confined to the
  middle of a larger file.  ``verify="full"`` (:class:`Cache`; ``--cache-verify full``;
  ``TRACEQ_CACHE_VERIFY=full``) adds a SHA-256 of every byte of the source, which catches any
  edit at the price of reading the whole source on each open (about 0.7 s per GB);
* the format it was read as (``--input-format`` can change it);
* :data:`traceq.schema.SCHEMA_VERSION`, the traceq version, and a digest of traceq's own source
  code, so that an upgrade -- or an edit of a development checkout -- never serves a table made by
  other importer code.

The cache speeds things up and never causes an error: a missing or stale entry is a miss (the
source is imported again and the entry rewritten), a damaged one a miss with a warning, and a
cache directory that cannot be created or written degrades to no caching with one
:class:`CacheWarning`.  Entries are written to a temporary file in the cache directory and renamed
into place, so readers never see half an entry and concurrent writers cannot corrupt one.  There
is one entry per source path (a changed source replaces its entry), named
``<digest of the path>-<file name>.parquet``.

**A first run does not wait for its entry.**  Entries are encoded by polars' Parquet writer (on
every core; three times faster than pyarrow's one-threaded ``write_table`` on a 1 GB trace's 2.5 M
rows), and the CLI's caches write behind (``Cache(..., write_behind=True)``): the entry of a fresh
import is written once the command's output is out (:meth:`Cache.wait`), not beside the report --
the writer keeps polars' threads busy, and every parallel step of the report would queue behind
it (``docs/performance.md``, "The columnar cache").
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import importlib.metadata
import json
import logging
import os
import re
import tempfile
import threading
import time
import warnings
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path
from typing import Any, Final, Literal, get_args

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from traceq import schema, sealed_parquet
from traceq.errors import InvalidArgumentError
from traceq.fingerprints import content_sha256, head_tail_sha256, traceq_code_sha256
from traceq.literal_columns import literal_values, with_literals

CACHE_DIR_ENV = "TRACEQ_CACHE_DIR"
"""Environment variable naming the cache directory (``--cache-dir`` overrides it)."""

CACHE_VERIFY_ENV = "TRACEQ_CACHE_VERIFY"
"""Environment variable giving the default :data:`VerifyMode` (``--cache-verify`` overrides it)."""

VerifyMode = Literal["sampled", "full"]
"""How much of a source is read to tell that it is unchanged: ``sampled`` (size, mtime, first and
last MiB) or ``full`` (every byte)."""
VERIFY_MODES: Final[tuple[VerifyMode, ...]] = get_args(VerifyMode)

ENTRY_METADATA_KEY = b"traceq.cache"
"""Parquet key-value metadata key of an entry's :class:`SourceKey` (JSON)."""

ENTRY_SEAL_PREFIX = ENTRY_METADATA_KEY
"""Prefix of the Parquet key-value metadata key of the digest of the entry's own bytes
(``traceq.cache.sha256``, 32 hex characters; :mod:`traceq.sealed_parquet`)."""

ENTRY_LITERALS_KEY = b"traceq.cache.literals"
"""Parquet key-value metadata key of the table's columns that hold one value in every row (JSON:
``{"columns": [every column, in order], "values": {name: value}}``): a hit has them as literal
columns (:mod:`traceq.literal_columns`) instead of decoding their rows."""
_ROW_GROUP_ROWS = 1 << 18
"""Rows per Parquet row group: small enough that a re-open decodes row groups on every core."""
_STALE_TEMP_S = 24 * 3600.0
_TEMP_PREFIX = ".tmp-"
_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")

_log = logging.getLogger(__name__)


class CacheWarning(UserWarning):
    """A cache problem traceq works around: a directory that cannot be written (traceq carries on
    without the cache) or a damaged entry (discarded; the source is imported again)."""


def default_cache_dir() -> Path:
    """``$TRACEQ_CACHE_DIR``, else ``$XDG_CACHE_HOME/traceq``, else ``~/.cache/traceq``."""
    configured = os.environ.get(CACHE_DIR_ENV)
    if configured:
        return Path(configured).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg and Path(xdg).is_absolute():  # the XDG spec says to ignore relative values
        return Path(xdg) / "traceq"
    return Path.home() / ".cache" / "traceq"


def default_verify_mode() -> VerifyMode:
    """``$TRACEQ_CACHE_VERIFY`` (``sampled`` or ``full``), else ``sampled``."""
    configured = os.environ.get(CACHE_VERIFY_ENV, "").strip().lower() or "sampled"
    for mode in VERIFY_MODES:
        if configured == mode:
            return mode
    raise InvalidArgumentError(
        f"{CACHE_VERIFY_ENV}={configured!r} is not a cache verification mode",
        hint=f"set it to one of {', '.join(VERIFY_MODES)}, or unset it",
    )


@dataclass(frozen=True)
class SourceKey:
    """Everything an entry depends on; an entry is used only when all fields are equal."""

    path: str
    """The source's resolved absolute path."""
    size: int
    mtime_ns: int
    head_tail_sha256: str
    """Hex SHA-256 digest of the size and the first and last
    :data:`~traceq.fingerprints.HASHED_SPAN_BYTES` (:func:`~traceq.fingerprints.head_tail_sha256`)."""
    format: str
    schema_version: int
    traceq_version: str
    code_sha256: str
    """Hex SHA-256 digest of traceq's code: its ``*.py`` files and its compiled modules."""
    content_sha256: str | None = None
    """Hex SHA-256 digest of every byte of the source; only in a key made with ``full=True``."""

    @classmethod
    def of(cls, source: Path, fmt: str, *, full: bool = False) -> SourceKey:
        """The key of ``source`` as it is now, read as ``fmt`` (``full``: with the digest of every
        byte); raises :class:`OSError` if unreadable."""
        resolved = source.resolve()
        with resolved.open("rb") as fh:
            stat = os.fstat(fh.fileno())
            digest = head_tail_sha256(fh, stat.st_size)
            content = content_sha256(fh) if full else None
        return cls(
            path=str(resolved),
            size=stat.st_size,
            mtime_ns=stat.st_mtime_ns,
            head_tail_sha256=digest,
            format=fmt,
            schema_version=schema.SCHEMA_VERSION,
            traceq_version=_traceq_version(),
            code_sha256=traceq_code_sha256(),
            content_sha256=content,
        )

    def matches(self, stored: Any) -> bool:
        """Whether a stored key (decoded JSON) is this one.  The full-content digest counts when this
        key has one (then an entry stored without it does not match); otherwise it is not compared."""
        if not isinstance(stored, dict):
            return False
        mine = asdict(self)
        if self.content_sha256 is None:
            mine.pop("content_sha256")
            stored = {k: v for k, v in stored.items() if k != "content_sha256"}
        return bool(stored == mine)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    def source_unchanged(self) -> bool:
        """Whether the source still has this key's size and mtime (cheap: one ``stat``)."""
        try:
            stat = os.stat(self.path)
        except OSError:
            return False
        return (stat.st_size, stat.st_mtime_ns) == (self.size, self.mtime_ns)


@dataclass(frozen=True)
class CachedTable:
    """An entry read back: the event table and the Parquet key-value metadata, decoded as text."""

    events: pl.DataFrame
    metadata: Mapping[str, str]


class Cache:
    """A cache directory of imported event tables.

    ``Cache(directory)`` uses that directory (created on the first write); :meth:`default` the
    one named by ``TRACEQ_CACHE_DIR`` or the user cache directory.  ``verify`` says how a source is
    checked to be unchanged (:data:`VerifyMode`; default ``$TRACEQ_CACHE_VERIFY``, else
    ``sampled``).  :meth:`get` and :meth:`put` never raise for cache problems: a stale entry is a
    miss, a damaged one a miss with one :class:`CacheWarning`, and an unwritable directory turns
    writing off for this object, with one :class:`CacheWarning`.  ``write_behind=True`` (what the
    CLI uses) has a fresh import's entry written later (:meth:`put_behind`), while the caller goes
    on to analyse and report: :meth:`wait` writes it, or the interpreter's exit does.
    """

    def __init__(self, directory: str | Path, *, verify: VerifyMode | None = None, write_behind: bool = False) -> None:
        if verify is not None and verify not in VERIFY_MODES:
            raise InvalidArgumentError(f"verify={verify!r} is not one of {', '.join(VERIFY_MODES)}")
        self.directory = Path(directory).expanduser()
        self.verify: VerifyMode = verify if verify is not None else default_verify_mode()
        self.write_behind = write_behind
        """Whether :func:`traceq.loading.load_file` stores entries with :meth:`put_behind`."""
        self._writable = True
        self._lock = threading.Lock()
        self._pending: list[tuple[SourceKey, pl.DataFrame, Mapping[str, str]]] = []
        self._at_exit = False

    def __getstate__(self) -> dict[str, Any]:
        """A copy sent to a worker process writes its entries itself, at once (no entry waits for
        the end of the process that imported it)."""
        return {"directory": self.directory, "verify": self.verify, "_writable": self._writable}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["directory"], verify=state["verify"])  # type: ignore[misc]
        self._writable = state["_writable"]

    @classmethod
    def default(cls) -> Cache:
        """The cache in :func:`default_cache_dir` (read from the environment now)."""
        return cls(default_cache_dir())

    def __repr__(self) -> str:
        behind = ", write_behind=True" if self.write_behind else ""
        return f"Cache({str(self.directory)!r}, verify={self.verify!r}{behind})"

    def key(self, source: Path, fmt: str) -> SourceKey | None:
        """The key of ``source`` now, or ``None`` when it cannot be read (the importer will say why)."""
        try:
            return SourceKey.of(source, fmt, full=self.verify == "full")
        except (OSError, RuntimeError):  # RuntimeError: a symbolic-link loop
            return None

    def entry_path(self, key: SourceKey) -> Path:
        """Where the entry for ``key``'s source lives (one per source path)."""
        digest = hashlib.blake2b(key.path.encode(), digest_size=12).hexdigest()
        name = _UNSAFE_NAME.sub("_", Path(key.path).name)[:60]
        return self.directory / f"{digest}-{name}.parquet"

    def get(self, key: SourceKey) -> CachedTable | None:
        """The entry for ``key``, or ``None`` when there is none, it is stale, or it is damaged (then
        it is deleted, with a :class:`CacheWarning`)."""
        entry = self.entry_path(key)
        try:
            with entry.open("rb") as fh:
                # One open file for the checks and the read: a concurrent writer's rename cannot
                # slip another entry in between, and what is decoded is the bytes that were checked.
                data = fh.read()
                identity = os.fstat(fh.fileno())
        except FileNotFoundError:
            _log.debug("cache miss for %s: no entry", key.path)
            return None
        except OSError as exc:
            _log.debug("cache miss for %s: unreadable entry %s (%s)", key.path, entry, exc)
            return None
        try:
            metadata = pq.read_metadata(pa.BufferReader(data)).metadata or {}
            damage = _damage(data, metadata, key)
            hit = (
                None
                if damage
                else CachedTable(
                    _decoded(data, metadata),
                    {k.decode(): v.decode() for k, v in metadata.items()},
                )
            )
        except (Exception, pl.exceptions.PanicException) as exc:  # pyarrow and polars raise many kinds
            damage, hit = f"it cannot be read: {type(exc).__name__}", None
        if damage == "stale":
            _log.debug("cache miss for %s: stale entry %s", key.path, entry)
        elif damage is not None:
            self._discard(entry, identity, key, damage)
        else:
            _log.debug("cache hit for %s: %s", key.path, entry)
        return hit

    def _discard(self, entry: Path, identity: os.stat_result, key: SourceKey, damage: str) -> None:
        """Delete a damaged entry (unless another writer has replaced it since) and say so, once."""
        with contextlib.suppress(OSError):
            now = entry.stat()
            if (now.st_dev, now.st_ino) == (identity.st_dev, identity.st_ino):
                entry.unlink()
        warnings.warn(
            f"cache entry {entry} of {key.path} is damaged ({damage}); discarded it, the source is imported again",
            CacheWarning,
            stacklevel=3,
        )

    def put(self, key: SourceKey, events: pl.DataFrame, metadata: Mapping[str, str]) -> Path | None:
        """Store ``events`` with ``metadata`` (a trace's event table and its ``traceq`` metadata,
        ``Trace.file_metadata``) as the entry for ``key``.

        Nothing is stored when the source changed while it was imported.  Returns the entry, or
        ``None`` when nothing was stored.
        """
        entry, problem = self._put(key, events, metadata)
        if problem is not None:
            warnings.warn(problem, CacheWarning, stacklevel=2)
        return entry

    def put_behind(self, key: SourceKey, events: pl.DataFrame, metadata: Mapping[str, str]) -> None:
        """:meth:`put`, left for :meth:`wait`, so that the caller goes on at once: a first run's
        report is neither held up by writing its entry nor slowed by it (polars' writer encodes on
        every core, and the report's own parallel steps would wait for its threads).  An entry
        nobody waits for is written when the interpreter exits."""
        with self._lock:
            self._pending.append((key, events, metadata))
            if not self._at_exit:
                atexit.register(self.wait)
                self._at_exit = True

    def wait(self) -> None:
        """Write the entries :meth:`put_behind` left (in the caller's thread); their problems
        become :class:`CacheWarning` here, one each."""
        while True:
            with self._lock:
                pending, self._pending = self._pending, []
            if not pending:
                return
            for key, events, metadata in pending:
                try:
                    _entry, problem = self._put(key, events, metadata)
                except Exception as exc:  # a cache must not end the command with a traceback
                    problem = f"cache entry of {key.path} was not written ({type(exc).__name__}: {exc})"
                if problem is not None:
                    warnings.warn(problem, CacheWarning, stacklevel=2)

    def _put(
        self, key: SourceKey, frame: pl.DataFrame, file_metadata: Mapping[str, str]
    ) -> tuple[Path | None, str | None]:
        """:meth:`put`'s work: the entry (or None) and the warning to give (or None)."""
        if not self._writable:
            return None, None
        if not key.source_unchanged():
            _log.debug("not caching %s: it changed while it was imported", key.path)
            return None, None
        entry = self.entry_path(key)
        metadata = dict(file_metadata)
        metadata[ENTRY_METADATA_KEY.decode()] = key.to_json()
        literals = literal_values(frame)
        metadata[ENTRY_LITERALS_KEY.decode()] = json.dumps({"columns": frame.columns, "values": literals})
        metadata[sealed_parquet.key(ENTRY_SEAL_PREFIX).decode()] = sealed_parquet.PLACEHOLDER.decode()
        temp: Path | None = None
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._sweep_stale_temps()
            fd, name = tempfile.mkstemp(dir=self.directory, prefix=_TEMP_PREFIX, suffix=".parquet")
            temp = Path(name)
            with os.fdopen(fd, "r+b") as out:
                # polars' writer: it encodes columns on every core, about 3x faster than pyarrow's
                # one-threaded write_table here, and its files read back faster too.
                frame.write_parquet(out, compression="zstd", row_group_size=_ROW_GROUP_ROWS, metadata=metadata)
                sealed = sealed_parquet.seal(out)
            if not sealed:
                _log.debug("not caching %s: the digest's place in the entry is ambiguous", key.path)
                temp.unlink()
                return None, None
            os.replace(temp, entry)
        except OSError as exc:
            if temp is not None:
                with contextlib.suppress(OSError):
                    temp.unlink()
            self._writable = False
            return None, (
                f"cache directory {self.directory} cannot be written ({exc.strerror or exc}); "
                "continuing without the cache. Pass --cache-dir with a writable folder, set "
                f"{CACHE_DIR_ENV}, or pass --no-cache"
            )
        _log.debug("cached %s as %s", key.path, entry)
        return entry, None

    def _sweep_stale_temps(self) -> None:
        """Remove temporary files left by writers that were killed (older than a day)."""
        cutoff = time.time() - _STALE_TEMP_S
        for temp in self.directory.glob(f"{_TEMP_PREFIX}*"):
            with contextlib.suppress(OSError):
                if temp.stat().st_mtime < cutoff:
                    temp.unlink()


def _damage(data: bytes, metadata: Mapping[bytes, bytes], key: SourceKey) -> str | None:
    """What is wrong with an entry of ``data`` (its Parquet metadata given) for ``key``: None when it
    is whole and made for ``key``, ``"stale"`` when it is whole but made for another key (an older
    source, another traceq), else the damage, for the warning."""
    sealed = sealed_parquet.check(data, metadata, ENTRY_SEAL_PREFIX)
    if sealed is False:
        return "its content does not match its digest"
    stored = metadata.get(ENTRY_METADATA_KEY)
    if stored is not None:
        try:
            if not key.matches(json.loads(stored)):
                return "stale"
        except ValueError:
            return "its key cannot be read"
    if sealed is None or stored is None:
        # Every entry this traceq writes has both; one of the same key without them is damaged.
        return "it has no digest" if stored is not None else "it has no key"
    return None


def _decoded(data: bytes, metadata: Mapping[bytes, bytes]) -> pl.DataFrame:
    """The table of an entry: the columns it names in :data:`ENTRY_LITERALS_KEY` as literal
    columns of their value, the others decoded.  Raises ``KeyError``, ``TypeError`` or
    ``ValueError`` when the entry says nothing of them, or something damaged."""
    literals = json.loads(metadata[ENTRY_LITERALS_KEY])
    values, columns = literals["values"], literals["columns"]
    stored = pl.read_parquet(data, columns=[c for c in columns if c not in values])
    return with_literals(stored, values, schema.POLARS_SCHEMA, columns)


@cache
def _traceq_version() -> str:
    try:
        return importlib.metadata.version("traceq")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"
