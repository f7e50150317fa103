"""How a page names its trace files: by file name, not by the path they were read from.

A report attached to a ticket should not show ``/home/<user>/...``.  :func:`display_names` maps
each path to the part below the deepest folder the paths share (one file: its name; a job's
ranks, or two files in one folder: that folder's name and theirs, ``ranks/rank0.pt.trace.json.gz``;
``a/t.json`` and ``b/t.json`` for two files in different folders), and :func:`with_display_paths` rewrites
every string of a result (a :class:`~traceq.report.model.Report` or a diff, any frozen
dataclass tree) that holds one of the paths.  The HTML and text renderers show the result so
rewritten unless ``--full-paths``; the JSON report keeps the paths as read (it is data).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import fields, is_dataclass, replace
from functools import cache
from typing import Any, Final, TypeVar

T = TypeVar("T")


def display_names(paths: Iterable[str]) -> dict[str, str]:
    """Each path (as given) -> its name below the folder the paths share (their own folder's name kept
    when they all lie in one)."""
    given = sorted(set(paths))
    if not given:
        return {}
    absolute = {p: os.path.abspath(p) for p in given}
    try:
        common = os.path.commonpath(list(absolute.values()))
    except ValueError:  # paths on different drives (Windows): name each by its file name
        return {p: os.path.basename(a) or p for p, a in absolute.items()}
    # Files in one folder keep its name (``ranks/rank0...``); files in different folders, the part that differs.
    one_folder = len({os.path.dirname(a) for a in absolute.values()}) == 1
    base = os.path.dirname(common) if one_folder else common
    return {p: os.path.relpath(a, base) if base else a for p, a in absolute.items()}


def with_display_paths(result: T, paths: Iterable[str]) -> T:
    """``result`` with every occurrence of one of ``paths`` in its strings replaced by its display name."""
    names = {p: n for p, n in display_names(paths).items() if p != n}
    if not names:
        return result
    # Longest first: a path that contains another (a folder and its files) is replaced whole.
    ordered = sorted(names.items(), key=lambda item: len(item[0]), reverse=True)
    out: T = _Renamer(ordered).rewrite(result)
    return out


_LEAVES: Final = frozenset({int, float, bool, type(None), bytes})
"""Types whose values hold no string: returned as they are, without a call (exact types; a
subclass takes the general path, which returns it as it is too)."""


class _Renamer:
    """Walks a result and renames the paths in its strings (``names``: path -> name, longest first).

    A report holds hundreds of thousands of values: numbers (:data:`_LEAVES`) and strings shorter
    than the shortest path (step names, cause names) are passed over without a call."""

    def __init__(self, names: list[tuple[str, str]]) -> None:
        self.names = names
        self.shortest = min(len(path) for path, _ in names)

    def holds_none(self, value: Any) -> bool:
        """Whether ``value`` cannot hold a path, told by its type and length alone."""
        kind = type(value)
        return kind in _LEAVES or (kind is str and len(value) < self.shortest)

    def rewrite(self, value: Any) -> Any:
        """``value`` with the paths in its strings renamed; a part that holds none is returned as it
        is (the same object), so that a large report is walked, not rebuilt."""
        kind: type = type(value)
        if kind in _LEAVES:
            return value
        if isinstance(value, str):
            for path, name in self.names:
                if path in value:
                    value = value.replace(path, name)
            return value
        fields_of = _init_fields(kind)
        if fields_of is not None:
            changes = {}
            for name in fields_of:
                old = getattr(value, name)
                if self.holds_none(old):
                    continue
                new = self.rewrite(old)
                if new is not old:
                    changes[name] = new
            return replace(value, **changes) if changes else value
        if isinstance(value, tuple) and not hasattr(value, "_fields"):
            items = tuple(v if self.holds_none(v) else self.rewrite(v) for v in value)
            return value if all(a is b for a, b in zip(items, value, strict=True)) else items
        if isinstance(value, list):
            return [self.rewrite(v) for v in value]
        if isinstance(value, Mapping):
            pairs = [
                (k, v, k if self.holds_none(k) else self.rewrite(k), v if self.holds_none(v) else self.rewrite(v))
                for k, v in value.items()
            ]
            if all(k is new_k and v is new_v for k, v, new_k, new_v in pairs):
                return value
            return {new_k: new_v for _, _, new_k, new_v in pairs}
        return value


@cache
def _init_fields(cls: type) -> tuple[str, ...] | None:
    """The fields ``replace`` takes of dataclass ``cls``; ``None`` for a type that is not a dataclass."""
    if not is_dataclass(cls):
        return None
    return tuple(f.name for f in fields(cls) if f.init)
