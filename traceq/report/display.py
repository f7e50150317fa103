"""How traceq's results show themselves in a Jupyter cell: the HTML each ``_repr_html_`` returns.

``Report._repr_html_`` (and any result's, such as a diff's) calls :func:`html`, which asks the
renderer registered for the object's type.  The indirection exists because a result's model may
not import its renderer (the HTML renderer imports the model; the import graph has no cycles):
:mod:`traceq.report.notebook` registers the report's renderer when traceq is imported
(``traceq.api`` imports it).  A new result type registers its own with :func:`register` and gives
itself ``def _repr_html_(self): return display.html(self)``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_RENDERERS: dict[type, Callable[[Any], str]] = {}


def register(kind: type, render: Callable[[Any], str]) -> None:
    """Show objects of ``kind`` (and its subclasses) in a notebook as ``render(obj)``."""
    _RENDERERS[kind] = render


def html(obj: object) -> str | None:
    """The notebook HTML of ``obj``; None (the plain repr) where no renderer is registered."""
    for kind in type(obj).__mro__:
        if kind in _RENDERERS:
            return _RENDERERS[kind](obj)
    return None
