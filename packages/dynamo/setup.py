"""Builds the C extensions (the frame hook; the frequent guard tests); pyproject.toml holds the
package metadata.

``_tensor_checks`` (C++) reads a tensor's metadata from the tensor itself. It needs torch's
headers, so it is built only where torch imports during the build (``pip install
--no-build-isolation``, as the noxfile and the device scripts install); elsewhere, or where it
fails to compile (it is optional), the guards use the getter-based C test.
"""

from setuptools import Extension, setup


def _tensor_checks() -> list[Extension]:
    try:
        import torch
        from torch.utils import cpp_extension
    except ImportError:
        return []
    abi = int(torch._C._GLIBCXX_USE_CXX11_ABI)
    libs = cpp_extension.library_paths()
    return [
        Extension(
            "danlu_dynamo._tensor_checks",
            sources=["src/danlu_dynamo/csrc/tensor_checks.cpp"],
            include_dirs=cpp_extension.include_paths(),
            library_dirs=libs,
            runtime_library_dirs=libs,
            libraries=["c10", "torch", "torch_cpu", "torch_python"],
            language="c++",
            extra_compile_args=[
                "-O2",
                "-std=c++17",
                "-Wno-c++20-extensions",
                f"-D_GLIBCXX_USE_CXX11_ABI={abi}",
                f'-DDANLU_TORCH_VERSION="{torch.__version__}"',
            ],
            optional=True,
        )
    ]


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
        *_tensor_checks(),
    ]
)
