"""How an nsys export numbers things: serialized thread and process ids, and interned strings.

nsys packs the virtual machine, process and thread into one integer (:func:`global_tid`,
:func:`global_pid`) and stores every repeated string once in ``StringIds``, referring to it by id
(:class:`StringTable`).  Shared by the activity rows and the target-information tables.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

VM: Final = 1
"""The virtual-machine id nsys gives a local capture."""
VM_GLOBAL_ID: Final = VM << 48
"""``VM`` in the top 16 bits: the part every global id of the capture shares."""


def global_tid(pid: int, tid: int) -> int:
    """nsys's serialized thread id: ``(vm << 48) | (pid << 24) | tid``."""
    return VM_GLOBAL_ID | (pid << 24) | tid


def global_pid(pid: int) -> int:
    """nsys's serialized process id (``global_tid`` with ``tid = 0``)."""
    return VM_GLOBAL_ID | (pid << 24)


class StringTable:
    """StringIds: ids handed out in first-use order, from 0."""

    def __init__(self) -> None:
        self._ids: dict[str, int] = {}

    def __call__(self, value: str) -> int:
        found = self._ids.get(value)
        if found is None:
            found = self._ids[value] = len(self._ids)
        return found

    def rows(self) -> Iterator[tuple[int, str]]:
        return ((i, v) for v, i in self._ids.items())
