"""Build the compiled readers (traceq/importers/kineto/_scanner.c and nsys/_column_reader.c) and the
interval kernel (traceq/_interval_kernels.c); everything else is in pyproject.toml.

They are optional: where they cannot be built (no C compiler, no Python headers) the install goes
on without them, with setuptools' warning, and traceq reads traces with its pure-Python readers
(the same tables, slower: docs/performance.md; traceq warns once when it reads that way) and
merges intervals with NumPy (the same results, with more temporary memory).  Settings,
read from the environment at build time:

* ``TRACEQ_REQUIRE_EXTENSIONS=1``: a reader that fails to build fails the install (CI and the wheel
  builds set it, so a wheel never ships without them by accident);
* ``TRACEQ_NO_EXTENSIONS=1``: build none (a pure-Python install);
* ``TRACEQ_PORTABLE_C=1``: build them with the plain-C choices of ``traceq/importers/_bits.h`` (no
  SSE2, no Linux page moves, no compiler builtins), the code an ARM or non-Linux build runs, to test
  it on Linux.
"""

import os

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

GCC_LIKE_ARGS = ["-O3", "-std=c11", "-Wall", "-Wextra", "-Werror=implicit-function-declaration"]
MSVC_ARGS = ["/O2", "/std:c11"]


def _flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in {"1", "true", "yes", "on"}


class BuildExt(build_ext):
    """build_ext with the compiler's own spelling of the flags (GCC and Clang, or MSVC)."""

    def build_extensions(self) -> None:
        args = MSVC_ARGS if self.compiler.compiler_type == "msvc" else GCC_LIKE_ARGS
        for ext in self.extensions:
            ext.extra_compile_args = [*args, *ext.extra_compile_args]
        super().build_extensions()


def _extensions() -> list[Extension]:
    if _flag("TRACEQ_NO_EXTENSIONS"):
        return []
    return [
        # _column_reader needs no SQLite header or library: Python hands it the sqlite3 functions' addresses.
        Extension(
            f"traceq.importers.{module}",
            sources=[f"traceq/importers/{module.replace('.', '/')}.c"],
            # Both include the buffer pool the two readers share, which lies beside their subpackages.
            include_dirs=["traceq/importers"],
            depends=["traceq/importers/_buffers.h", "traceq/importers/_bits.h"],
            define_macros=[("TRACEQ_PORTABLE", "1")] if _flag("TRACEQ_PORTABLE_C") else [],
            optional=not _flag("TRACEQ_REQUIRE_EXTENSIONS"),
        )
        for module in ("kineto._scanner", "nsys._column_reader")
    ] + [
        # The interval engine's one-pass union of sorted intervals (traceq/interval_union.py).
        Extension(
            "traceq._interval_kernels",
            sources=["traceq/_interval_kernels.c"],
            optional=not _flag("TRACEQ_REQUIRE_EXTENSIONS"),
        )
    ]


setup(ext_modules=_extensions(), cmdclass={"build_ext": BuildExt})
