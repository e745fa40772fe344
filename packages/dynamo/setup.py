"""Builds the C extensions (the frame hook; the frequent guard tests); pyproject.toml holds the
package metadata."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "danlu_dynamo._eval_frame",
            sources=["src/danlu_dynamo/csrc/eval_frame.c"],
            extra_compile_args=["-O2", "-Wall", "-Wno-missing-field-initializers"],
        ),
        Extension(
            "danlu_dynamo._guard_checks",
            sources=["src/danlu_dynamo/csrc/guard_checks.c"],
            extra_compile_args=["-O2", "-Wall"],
        ),
    ]
)
