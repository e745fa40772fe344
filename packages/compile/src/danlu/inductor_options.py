"""`mode=` and `options=` of `danlu.compile`, checked against what danlu-inductor accepts.

danlu-inductor names its options (`danlu_inductor.OPTIONS`) and checks them
(`danlu_inductor.validate_options`); a mode is one of those options ("reduce-overhead" turns on
CUDA graphs, "max-autotune" also times every Triton launch configuration). Both act on CUDA
graphs only: on the CPU the C++ backend compiles the same code in every mode, and a warning
says so. A danlu-inductor too old to publish options accepts none.
"""

from __future__ import annotations

import warnings

MODES = (None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")

MODE_MEANING = {
    "reduce-overhead": "CUDA graphs around the compiled calls",
    "max-autotune": "CUDA graphs, and Triton launch configurations chosen by timing",
    "max-autotune-no-cudagraphs": "Triton launch configurations chosen by timing",
}


def check_mode(mode) -> None:
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; valid modes: {', '.join(map(repr, MODES))}")


def resolve(mode, options) -> dict:
    """The options dict to hand `danlu_inductor.compile_fx` (validated; {} for defaults)."""
    import torch

    import danlu_inductor

    check_mode(mode)
    settings = dict(options or {})
    if mode not in (None, "default"):
        if "mode" in settings and settings["mode"] != mode:
            raise ValueError(f"mode={mode!r} and options['mode']={settings['mode']!r} disagree")
        settings["mode"] = mode
    validate = getattr(danlu_inductor, "validate_options", None)
    if validate is None:
        unknown = sorted(k for k in settings if k != "mode")
        if unknown:
            raise ValueError(
                f"unknown inductor option(s) {unknown}; danlu-inductor "
                f"{danlu_inductor.__version__} accepts no options yet (valid options: none)"
            )
        settings = {}  # nothing to pass: this danlu-inductor has no modes either
    else:
        validate(settings)  # raises ValueError naming the valid options
    if mode in MODE_MEANING and not torch.cuda.is_available():
        warnings.warn(
            f"mode={mode!r} ({MODE_MEANING[mode]}) has no effect on the CPU: danlu-inductor's "
            "C++ backend compiles the same code in every mode",
            UserWarning,
            stacklevel=5,
        )
    return settings
