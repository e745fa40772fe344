"""Symbolic values the interpreter works on: one file per kind of Python value."""

from .base import ConstVar, NullVar, Var  # noqa: F401
