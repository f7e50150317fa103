"""Build the one compiled module (see traceq/importers/_kineto_scan.c); everything else is in pyproject.toml."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "traceq.importers._kineto_scan",
            sources=["traceq/importers/_kineto_scan.c"],
            extra_compile_args=["-O3", "-std=c11", "-Wall", "-Wextra", "-Werror=implicit-function-declaration"],
        )
    ]
)
