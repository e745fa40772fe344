"""Graph capture for PyTorch programs: a PEP 523 frame hook, a symbolic bytecode interpreter, guards and graph breaks.

Importing this package does not import torch; the capture API (``optimize``, ``explain``,
``reset``, ``backends``) loads on first use.
"""

__version__ = "0.2.0.dev0"

_LAZY = {
    "optimize": ("danlu_dynamo.optimizer", "optimize"),
    "reset": ("danlu_dynamo.optimizer", "reset"),
    "OptimizedModule": ("danlu_dynamo.optimizer", "OptimizedModule"),
    "explain": ("danlu_dynamo.explain_report", "explain"),
    "ExplainOutput": ("danlu_dynamo.explain_report", "ExplainOutput"),
    "GraphBreakError": ("danlu_dynamo.capture.exc", "GraphBreakError"),
    "backends": ("danlu_dynamo.backends", None),
    "mark_dynamic": ("danlu_dynamo.capture.dynamic", "mark_dynamic"),
    "mark_static": ("danlu_dynamo.capture.dynamic", "mark_static"),
}


def __getattr__(name):
    if name in _LAZY:
        import importlib

        mod_name, attr = _LAZY[name]
        mod = importlib.import_module(mod_name)
        value = mod if attr is None else getattr(mod, attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'danlu_dynamo' has no attribute {name!r}")


def __dir__():
    return sorted([*globals(), *_LAZY])
