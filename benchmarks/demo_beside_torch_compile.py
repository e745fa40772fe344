"""`nox -s demo`: danlu's demo (`python -m danlu.demo`) with torch.compile trained and timed
beside danlu. torch.compile is the anchor we measure against; it lives here, outside the
packages, which never call torch's own compiler (DESIGN.md).

    python benchmarks/demo_beside_torch_compile.py [--steps N] [--device cpu|cuda] [--no-references]
"""

from __future__ import annotations

import runpy
import types

import torch


def _unavailable(device) -> str | None:
    try:
        import torch._dynamo  # noqa: F401
    except Exception as e:  # a torch build without the compiler
        return f"torch.compile is not available ({type(e).__name__})"
    if device.type == "cuda":
        try:
            import triton  # noqa: F401
        except ImportError:
            return "torch.compile needs triton on CUDA"
    return None


def _reset() -> None:
    import torch._dynamo

    torch._dynamo.reset()


TORCH_COMPILE = types.SimpleNamespace(
    name="torch.compile", compile=torch.compile, reset=_reset, unavailable=_unavailable
)

if __name__ == "__main__":
    # as __main__, so that its model is user code to danlu's frame hook (see danlu/demo.py)
    runpy.run_module(
        "danlu.demo", run_name="__main__", init_globals={"REFERENCES": (TORCH_COMPILE,)}
    )
