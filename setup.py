"""Build the compiled modules (see traceq/importers/_kineto_scan.c and _nsys_read.c); everything else is in
pyproject.toml."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        # _nsys_read needs no SQLite header or library: Python hands it the sqlite3 functions' addresses.
        Extension(
            f"traceq.importers.{name}",
            sources=[f"traceq/importers/{name}.c"],
            depends=["traceq/importers/_buffers.h"],
            extra_compile_args=["-O3", "-std=c11", "-Wall", "-Wextra", "-Werror=implicit-function-declaration"],
        )
        for name in ("_kineto_scan", "_nsys_read")
    ]
)
