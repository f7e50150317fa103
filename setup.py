"""Build the compiled modules (see traceq/importers/kineto/_scanner.c and nsys/_column_reader.c); everything
else is in pyproject.toml."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        # _column_reader needs no SQLite header or library: Python hands it the sqlite3 functions' addresses.
        Extension(
            f"traceq.importers.{module}",
            sources=[f"traceq/importers/{module.replace('.', '/')}.c"],
            # Both include the buffer pool the two readers share, which lies beside their subpackages.
            include_dirs=["traceq/importers"],
            depends=["traceq/importers/_buffers.h"],
            extra_compile_args=["-O3", "-std=c11", "-Wall", "-Wextra", "-Werror=implicit-function-declaration"],
        )
        for module in ("kineto._scanner", "nsys._column_reader")
    ]
)
