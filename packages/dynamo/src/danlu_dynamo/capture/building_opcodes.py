"""Opcodes that build and unpack Python containers and strings (a mixin of the Translator)."""

from __future__ import annotations

from .exc import Unsupported
from .variables.base import ConstVar
from .variables.containers import DictVar, ListVar, SetVar, TupleVar
from .variables.dict_views import dict_key
from .variables.symbolic import SliceVar, SymNumVar


def _slice(start, stop, step):
    if any(isinstance(p, SymNumVar) for p in (start, stop, step)):
        return SliceVar([start, stop, step])  # symbolic bounds (dynamic shapes)
    for p in (start, stop, step):
        if not p.is_const():
            raise Unsupported("slice with non-constant bounds")
    return ConstVar(slice(start.const(), stop.const(), step.const()))


class BuildingOpcodes:
    # ------------------------------------------------------------------ building
    def BUILD_TUPLE(self, inst):
        self.push(TupleVar(self.popn(inst.arg)))

    def BUILD_LIST(self, inst):
        self.push(ListVar(self.popn(inst.arg)))

    def BUILD_SET(self, inst):
        self.push(SetVar(self.popn(inst.arg)))

    def BUILD_MAP(self, inst):
        vals = self.popn(2 * inst.arg)
        d = {}
        for k, v in zip(vals[::2], vals[1::2]):
            d[dict_key(self, k)] = v
        self.push(DictVar(d))

    def BUILD_CONST_KEY_MAP(self, inst):
        keys = self.pop().const()
        vals = self.popn(inst.arg)
        self.push(DictVar(dict(zip(keys, vals))))

    def BUILD_SLICE(self, inst):
        parts = self.popn(inst.arg)
        if len(parts) == 2:
            parts.append(ConstVar(None))
        self.push(_slice(*parts))

    def BUILD_STRING(self, inst):
        parts = self.popn(inst.arg)
        self.push(ConstVar("".join(p.const() for p in parts)))

    def FORMAT_VALUE(self, inst):
        fmt = self.pop().const() if (inst.arg & 0x04) else ""
        v = self.pop()
        if not v.is_const():
            raise Unsupported("f-string of a non-constant")
        conv = inst.arg & 0x03
        val = v.const()
        val = {0: val, 1: str(val), 2: repr(val), 3: ascii(val)}[conv] if conv else val
        self.push(ConstVar(format(val, fmt)))

    # A comprehension's container comes from the frame state (with a source) in a resume
    # function after a break inside the comprehension: its additions are side effects on the
    # real object, recorded and replayed like the method calls.
    def LIST_APPEND(self, inst):
        v = self.pop()
        target = self.stack[-inst.arg]
        if target.source is not None:
            target.call_method(self, "append", [v], {})
        else:
            target.items.append(v)

    def SET_ADD(self, inst):
        v = self.pop()
        target = self.stack[-inst.arg]
        if target.source is not None:
            target.call_method(self, "add", [v], {})
        else:
            target.add(v)

    def MAP_ADD(self, inst):
        v = self.pop()
        k = self.pop()
        target = self.stack[-inst.arg]
        if target.source is not None:
            target.call_method(self, "__setitem__", [k, v], {})
        else:
            target.items[dict_key(self, k)] = v

    def LIST_EXTEND(self, inst):
        v = self.pop()
        self.stack[-inst.arg].items.extend(v.unpack(self))

    def SET_UPDATE(self, inst):
        v = self.pop()
        self.stack[-inst.arg].update_from(self, v)

    def DICT_UPDATE(self, inst):
        v = self.pop()
        if not isinstance(v, DictVar):
            raise Unsupported("dict update from a non-dict")
        self.stack[-inst.arg].items.update(v.items)

    DICT_MERGE = DICT_UPDATE

    def LIST_TO_TUPLE(self, inst):
        self.push(TupleVar(self.pop().items))

    def UNPACK_SEQUENCE(self, inst):
        seq = self.pop()
        items = seq.unpack(self)
        if len(items) != inst.arg:
            raise Unsupported("ValueError: unpacking length mismatch")
        for v in reversed(items):
            self.push(v)

    def UNPACK_EX(self, inst):
        seq = self.pop()
        items = seq.unpack(self)
        before = inst.arg & 0xFF
        after = inst.arg >> 8
        if len(items) < before + after:
            raise Unsupported("ValueError: not enough values to unpack")
        vals = (
            items[:before]
            + [ListVar(items[before : len(items) - after])]
            + items[len(items) - after :]
        )
        for v in reversed(vals):
            self.push(v)
