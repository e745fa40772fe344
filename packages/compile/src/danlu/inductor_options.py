"""`mode=` and `options=` of `danlu.compile`, checked by danlu-inductor, which owns both.

danlu-inductor names its modes and options (`danlu_inductor.options`: `MODES`, `OPTIONS`) and
checks them (`check_mode`, `validate_options`); a mode is one of those options
("reduce-overhead" turns on CUDA graphs, "max-autotune" also times every Triton launch
configuration). Both act on CUDA graphs only: on the CPU the C++ backend compiles the same
code in every mode, and a warning says so.
"""

from __future__ import annotations

import warnings


def check_mode(mode) -> None:
    from danlu_inductor.options import check_mode as inductor_check_mode

    inductor_check_mode(mode)


def resolve(mode, options) -> dict:
    """The options dict to hand `danlu_inductor.compile_fx` (validated; {} for defaults)."""
    import torch

    from danlu_inductor.options import MODE_MEANING, validate_options

    check_mode(mode)
    settings = dict(options or {})
    if mode not in (None, "default"):
        if "mode" in settings and settings["mode"] != mode:
            raise ValueError(f"mode={mode!r} and options['mode']={settings['mode']!r} disagree")
        settings["mode"] = mode
    validate_options(settings)  # raises ValueError naming the valid options
    if mode in MODE_MEANING and not torch.cuda.is_available():
        warnings.warn(
            f"mode={mode!r} ({MODE_MEANING[mode]}) has no effect on the CPU: danlu-inductor's "
            "C++ backend compiles the same code in every mode",
            UserWarning,
            stacklevel=5,
        )
    return settings
