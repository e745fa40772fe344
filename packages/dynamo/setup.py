"""Builds the frame hook's C extension; pyproject.toml holds the package metadata."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "danlu_dynamo._eval_frame",
            sources=["src/danlu_dynamo/csrc/eval_frame.c"],
            extra_compile_args=["-O2", "-Wall", "-Wno-missing-field-initializers"],
        )
    ]
)
