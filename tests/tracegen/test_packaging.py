"""tracegen stays out of traceq's wheel: setuptools' package selection matches none of its packages.

(That traceq never imports tracegen is import-linter's last contract in ``pyproject.toml``.)
"""

from __future__ import annotations

import tomllib
from fnmatch import fnmatchcase

from .planted import REPO


def test_the_wheel_selects_traceq_and_leaves_the_generator_out() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    include: list[str] = config["tool"]["setuptools"]["packages"]["find"]["include"]
    generator = [
        ".".join(init.parent.relative_to(REPO).parts) for init in sorted((REPO / "tracegen").rglob("__init__.py"))
    ]
    assert "tracegen.nsys" in generator
    assert any(fnmatchcase("traceq", pattern) for pattern in include)
    assert [name for name in generator if any(fnmatchcase(name, pattern) for pattern in include)] == []
