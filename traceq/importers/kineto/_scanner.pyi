"""Types of the compiled scanner (``_scanner.c``); see :mod:`traceq.importers.kineto.scanner`."""

from collections.abc import Sequence
from typing import Final

from typing_extensions import Buffer

FLOAT: Final[int]
INT: Final[int]
TEXT: Final[int]
TRIPLE: Final[int]
PART: Final[int]
ARGS: Final[int]
TOP: Final[int]
IN_ARGS: Final[int]
MORE: Final[int]
CLOSED: Final[int]
OPEN_END: Final[int]
MAX_TEXT_BYTES: Final[int]
SSE2: Final[int]
"""1 where the 16-byte SSE2 loops were built in (``_bits.h``), 0 where the byte-by-byte ones run."""
PAGE_MOVES: Final[int]
"""1 where :func:`move_pages` was built with Linux's mremap, 0 where it always declines."""

Column = tuple[Buffer, Buffer, int] | None
"""A field's values, validity bitmap and null count (None for the ``args`` holder)."""

def scan(
    buffer: Buffer,
    begin: int,
    limit: int,
    first: bool,
    fields: Sequence[tuple[str, bytes, int, int]],
    rows_hint: int = 0,
    /,
) -> tuple[int, int, int, list[Column], Buffer, Buffer, int] | str: ...
def trim() -> None: ...
def encode(
    views: Buffer, rows: int, validity: Buffer | None, data0: Buffer, data1: Buffer, /
) -> tuple[Buffer, Buffer, int]: ...
def move_pages(buffer: Buffer, begin: int, end: int, target: int, /) -> bool: ...
def squeeze(buffer: Buffer, begin: int, end: int, state: Buffer, max_blank: int, max_string: int, /) -> int: ...
def nesting_depth(buffer: Buffer, limit: int, /) -> int: ...
