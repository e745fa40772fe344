"""Builds the optional C++ extension; pyproject.toml holds the package metadata.

``_replay_checks`` reads the data pointers a CUDA graph replay checks from the tensors
themselves; ``_buffers`` makes the generated wrappers' views and allocations. They need torch's
headers, so they are built only where torch imports during the build (``pip install
--no-build-isolation``, as the noxfile and the device scripts install); elsewhere, or where one
fails to compile (both are optional), replays ask ``data_ptr()`` and wrappers call torch. The same recipe
builds danlu-dynamo's ``_tensor_checks`` (the packages are installed separately, so each
setup.py holds it).
"""

from setuptools import Extension, setup


def _torch_extensions() -> list[Extension]:
    try:
        import torch
        from torch.utils import cpp_extension
    except ImportError:
        return []
    abi = int(torch._C._GLIBCXX_USE_CXX11_ABI)
    libs = cpp_extension.library_paths()
    return [
        Extension(
            f"danlu_inductor._{name}",
            sources=[f"src/danlu_inductor/csrc/{name}.cpp"],
            depends=["src/danlu_inductor/csrc/extension.h"],
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
        for name in ("replay_checks", "buffers")
    ]


setup(ext_modules=_torch_extensions())
