"""Comparison ops shared by the code generators: both C++ and Triton spell them as infix
operators, so a backend only provides `_bin(fmt, a, b, out_dtype)`."""

from __future__ import annotations

import torch


class ComparisonOps:
    def _cmp(self, op, a, b):
        return self._bin("({} " + op + " {})", a, b, torch.bool)

    def eq(self, a, b):
        return self._cmp("==", a, b)

    def ne(self, a, b):
        return self._cmp("!=", a, b)

    def lt(self, a, b):
        return self._cmp("<", a, b)

    def le(self, a, b):
        return self._cmp("<=", a, b)

    def gt(self, a, b):
        return self._cmp(">", a, b)

    def ge(self, a, b):
        return self._cmp(">=", a, b)
