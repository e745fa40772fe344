"""Symbolic sizes: a ShapeEnv on sympy, the SymNode behind ``torch.SymInt``, guards."""

from .functions import FloorDiv
from .shape_env import Guard, GuardCheckError, InputCheck, ShapeEnv, sym_expr
from .sym_node import SymNode

__all__ = [
    "FloorDiv",
    "Guard",
    "GuardCheckError",
    "InputCheck",
    "ShapeEnv",
    "SymNode",
    "sym_expr",
]
