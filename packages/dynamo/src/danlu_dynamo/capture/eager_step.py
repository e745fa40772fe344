"""Runs bytecode instructions one at a time on real values.

Used after a graph break: the unsupported instruction runs here, and so does code that must
stay eager (inside ``try``/``with`` regions the trace cannot resume in, segments that failed
to trace).  Exceptions follow the code's exception table, as in CPython.  Calls to user
functions go back through capture, so nested frames are compiled as the frame hook would.
"""

from __future__ import annotations

import builtins
import dis
import operator
import sys
import types

from .runtime_values import NULL
from .translator import instructions_of
from .variables.builtins import BINARY, COMPARE, INPLACE

PY312 = sys.version_info >= (3, 12)
_exc_tables: dict = {}


def exception_table(code):
    t = _exc_tables.get(code)
    if t is None:
        t = list(dis.Bytecode(code).exception_entries)
        _exc_tables[code] = t
    return t


_try_offsets: dict = {}


def in_try_region(code, offset) -> bool:
    covered = _try_offsets.get(code)
    if covered is None:
        covered = frozenset(
            i.offset
            for i in dis.get_instructions(code)
            if any(e.start <= i.offset < e.end for e in exception_table(code))
        )
        _try_offsets[code] = covered
    return offset in covered


class FrameState:
    """The concrete state of a frame between graph segments."""

    __slots__ = (
        "code",
        "fn",
        "L",
        "G",
        "C",
        "K",
        "stack",
        "kw_names",
        "offset",
        "exc_stack",
        "entry",
    )

    def __init__(self, code, fn, L, G, C, K, stack, kw_names, offset):
        self.code, self.fn, self.L, self.G, self.C, self.K = code, fn, L, G, C, K
        self.stack, self.kw_names, self.offset = stack, kw_names, offset
        self.exc_stack = []
        self.entry = None  # (args, kwargs) of the call, while still at the function's entry

    def snapshot(self):
        """Locals plus stack slots (``___stack{i}``): what a resumed trace reads."""
        if not self.stack:
            return self.L
        d = dict(self.L)
        for i, v in enumerate(self.stack):
            d[f"___stack{i}"] = v
        return d


class Returned(Exception):
    def __init__(self, value):
        self.value = value


def step(fs: FrameState, call_hook):
    """Execute the instruction at ``fs.offset``; returns the return value via ``Returned``."""
    insts, index = instructions_of(fs.code)
    inst = insts[index[fs.offset]]
    nxt = insts[index[fs.offset] + 1].offset if index[fs.offset] + 1 < len(insts) else None
    try:
        target = _exec(fs, inst, call_hook)
    except Returned:
        raise
    except BaseException as e:  # noqa: BLE001 - routed through the exception table
        handler = None
        for entry in exception_table(fs.code):
            if entry.start <= inst.offset < entry.end:
                handler = entry
                break
        if handler is None:
            raise
        del fs.stack[handler.depth :]
        if handler.lasti:
            fs.stack.append(inst.offset)
        fs.stack.append(e)
        fs.offset = handler.target
        return
    fs.offset = nxt if target is None else target


def _call(fs, call_hook, fn, args, kwargs):
    if fn is super and not args:
        # Zero-argument super() reads the frame's __class__ cell and first argument.
        first = fs.code.co_varnames[0]
        obj = fs.L[first] if first in fs.L else fs.K[first].cell_contents
        return super(_cell(fs, "__class__").cell_contents, obj)
    return call_hook(fn, args, kwargs)


def _exec(fs: FrameState, inst, call_hook):  # noqa: C901 - one branch per opcode
    op = inst.opname
    s = fs.stack
    if op in ("NOP", "RESUME", "PRECALL", "COPY_FREE_VARS", "CACHE", "EXTENDED_ARG"):
        return None
    if op == "POP_TOP":
        s.pop()
    elif op == "PUSH_NULL":
        s.append(NULL)
    elif op == "COPY":
        s.append(s[-inst.arg])
    elif op == "SWAP":
        s[-1], s[-inst.arg] = s[-inst.arg], s[-1]
    elif op == "END_FOR":
        s.pop()
        s.pop()
    elif op == "LOAD_CONST":
        s.append(inst.argval)
    elif op == "RETURN_VALUE":
        raise Returned(s.pop())
    elif op == "RETURN_CONST":
        raise Returned(inst.argval)
    elif op in ("LOAD_FAST", "LOAD_FAST_CHECK"):
        if inst.argval not in fs.L:
            raise UnboundLocalError(f"cannot access local variable {inst.argval!r}")
        s.append(fs.L[inst.argval])
    elif op == "LOAD_FAST_AND_CLEAR":
        s.append(fs.L.pop(inst.argval, NULL))
    elif op == "STORE_FAST":
        v = s.pop()
        if v is NULL:
            fs.L.pop(inst.argval, None)
        else:
            fs.L[inst.argval] = v
    elif op == "DELETE_FAST":
        del fs.L[inst.argval]
    elif op == "LOAD_GLOBAL":
        if inst.arg & 1:
            s.append(NULL)
        name = inst.argval
        if name in fs.G:
            s.append(fs.G[name])
        else:
            s.append(
                getattr(fs.G.get("__builtins__", builtins), name)
                if not isinstance(fs.G.get("__builtins__"), dict)
                else fs.G["__builtins__"][name]
            )
    elif op == "STORE_GLOBAL":
        fs.G[inst.argval] = s.pop()
    elif op == "DELETE_GLOBAL":
        del fs.G[inst.argval]
    elif op in ("LOAD_DEREF", "LOAD_CLASSDEREF"):
        s.append(_cell(fs, inst.argval).cell_contents)
    elif op == "STORE_DEREF":
        _cell(fs, inst.argval).cell_contents = s.pop()
    elif op == "DELETE_DEREF":
        del _cell(fs, inst.argval).cell_contents
    elif op == "LOAD_CLOSURE":
        s.append(_cell(fs, inst.argval))
    elif op == "MAKE_CELL":
        name = inst.argval
        if name not in fs.K:
            fs.K[name] = types.CellType(fs.L.pop(name)) if name in fs.L else types.CellType()
    elif op == "LOAD_ATTR":
        obj = s.pop()
        if PY312 and inst.arg & 1:
            s.append(NULL)
        s.append(getattr(obj, inst.argval))
    elif op == "LOAD_METHOD":
        obj = s.pop()
        s.append(NULL)
        s.append(getattr(obj, inst.argval))
    elif op == "LOAD_SUPER_ATTR":
        self_ = s.pop()
        cls = s.pop()
        sup = s.pop()
        if inst.arg & 1:
            s.append(NULL)
        s.append(getattr(sup(cls, self_), inst.argval))
    elif op == "STORE_ATTR":
        obj = s.pop()
        setattr(obj, inst.argval, s.pop())
    elif op == "DELETE_ATTR":
        delattr(s.pop(), inst.argval)
    elif op == "KW_NAMES":
        fs.kw_names = fs.code.co_consts[inst.arg]
    elif op == "CALL":
        argc = inst.arg
        args = s[len(s) - argc :] if argc else []
        del s[len(s) - argc :]
        b = s.pop()
        a = s.pop()
        if a is NULL:
            fn = b
        else:
            fn = a
            args = [b, *args]
        kwargs = {}
        if fs.kw_names:
            names = fs.kw_names
            kwargs = dict(zip(names, args[len(args) - len(names) :]))
            args = args[: len(args) - len(names)]
        fs.kw_names = None
        s.append(_call(fs, call_hook, fn, args, kwargs))
    elif op == "CALL_FUNCTION_EX":
        kw = s.pop() if inst.arg & 1 else {}
        args = s.pop()
        fn = s.pop()
        if s and s[-1] is NULL:
            s.pop()
        s.append(_call(fs, call_hook, fn, list(args), dict(kw)))
    elif op == "MAKE_FUNCTION":
        code = s.pop()
        flags = inst.arg
        closure = s.pop() if flags & 0x08 else None
        ann = s.pop() if flags & 0x04 else None
        kwdefaults = s.pop() if flags & 0x02 else None
        defaults = s.pop() if flags & 0x01 else None
        f = types.FunctionType(code, fs.G, code.co_name, defaults, closure)
        f.__qualname__ = code.co_qualname
        if kwdefaults:
            f.__kwdefaults__ = kwdefaults
        if ann:
            f.__annotations__ = dict(zip(ann[::2], ann[1::2])) if isinstance(ann, tuple) else ann
        s.append(f)
    elif op == "CALL_INTRINSIC_1":
        v = s.pop()
        if inst.arg == 6:
            s.append(tuple(v))
        elif inst.arg == 5:
            s.append(+v)
        elif inst.arg == 3:
            raise RuntimeError("generator raised StopIteration") from v
        elif inst.arg == 1:
            print(repr(v))
            s.append(None)
        else:
            raise NotImplementedError(f"CALL_INTRINSIC_1 {inst.arg}")
    elif op == "BINARY_OP":
        b = s.pop()
        a = s.pop()
        fn = INPLACE.get(inst.argrepr) or BINARY[inst.argrepr]
        s.append(fn(a, b))
    elif op == "COMPARE_OP":
        b = s.pop()
        a = s.pop()
        sym = inst.argval if isinstance(inst.argval, str) else inst.argrepr
        s.append(COMPARE[sym.replace("bool(", "").replace(")", "")](a, b))
    elif op == "IS_OP":
        b = s.pop()
        a = s.pop()
        s.append((a is b) != bool(inst.arg))
    elif op == "CONTAINS_OP":
        c = s.pop()
        i = s.pop()
        s.append((i in c) != bool(inst.arg))
    elif op == "UNARY_NOT":
        s.append(not s.pop())
    elif op == "UNARY_NEGATIVE":
        s.append(-s.pop())
    elif op == "UNARY_POSITIVE":
        s.append(+s.pop())
    elif op == "UNARY_INVERT":
        s.append(~s.pop())
    elif op == "BINARY_SUBSCR":
        i = s.pop()
        o = s.pop()
        s.append(o[i])
    elif op == "BINARY_SLICE":
        stop = s.pop()
        start = s.pop()
        o = s.pop()
        s.append(o[start:stop])
    elif op == "STORE_SLICE":
        stop = s.pop()
        start = s.pop()
        o = s.pop()
        o[start:stop] = s.pop()
    elif op == "STORE_SUBSCR":
        i = s.pop()
        o = s.pop()
        o[i] = s.pop()
    elif op == "DELETE_SUBSCR":
        i = s.pop()
        o = s.pop()
        del o[i]
    elif op == "BUILD_TUPLE":
        s.append(tuple(_popn(s, inst.arg)))
    elif op == "BUILD_LIST":
        s.append(list(_popn(s, inst.arg)))
    elif op == "BUILD_SET":
        s.append(set(_popn(s, inst.arg)))
    elif op == "BUILD_MAP":
        vals = _popn(s, 2 * inst.arg)
        s.append(dict(zip(vals[::2], vals[1::2])))
    elif op == "BUILD_CONST_KEY_MAP":
        keys = s.pop()
        s.append(dict(zip(keys, _popn(s, inst.arg))))
    elif op == "BUILD_SLICE":
        s.append(slice(*_popn(s, inst.arg)))
    elif op == "BUILD_STRING":
        s.append("".join(_popn(s, inst.arg)))
    elif op == "FORMAT_VALUE":
        fmt = s.pop() if inst.arg & 0x04 else ""
        v = s.pop()
        conv = inst.arg & 0x03
        v = {0: v, 1: str(v), 2: repr(v), 3: ascii(v)}[conv] if conv else v
        s.append(format(v, fmt))
    elif op == "LIST_APPEND":
        v = s.pop()
        s[-inst.arg].append(v)
    elif op == "SET_ADD":
        v = s.pop()
        s[-inst.arg].add(v)
    elif op == "MAP_ADD":
        v = s.pop()
        k = s.pop()
        s[-inst.arg][k] = v
    elif op == "LIST_EXTEND":
        v = s.pop()
        s[-inst.arg].extend(v)
    elif op == "SET_UPDATE":
        v = s.pop()
        s[-inst.arg].update(v)
    elif op in ("DICT_UPDATE", "DICT_MERGE"):
        v = s.pop()
        s[-inst.arg].update(v)
    elif op == "LIST_TO_TUPLE":
        s.append(tuple(s.pop()))
    elif op == "UNPACK_SEQUENCE":
        items = list(s.pop())
        if len(items) != inst.arg:
            raise ValueError(f"expected {inst.arg} values to unpack, got {len(items)}")
        s.extend(reversed(items))
    elif op == "UNPACK_EX":
        items = list(s.pop())
        before, after = inst.arg & 0xFF, inst.arg >> 8
        if len(items) < before + after:
            raise ValueError("not enough values to unpack")
        vals = items[:before] + [items[before : len(items) - after]] + items[len(items) - after :]
        s.extend(reversed(vals))
    elif op in ("JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT", "JUMP"):
        return inst.argval
    elif op.startswith("POP_JUMP") and op.endswith("IF_TRUE"):
        if s.pop():
            return inst.argval
    elif op.startswith("POP_JUMP") and op.endswith("IF_FALSE"):
        if not s.pop():
            return inst.argval
    elif op.startswith("POP_JUMP") and op.endswith("IF_NOT_NONE"):
        if s.pop() is not None:
            return inst.argval
    elif op.startswith("POP_JUMP") and op.endswith("IF_NONE"):
        if s.pop() is None:
            return inst.argval
    elif op == "JUMP_IF_TRUE_OR_POP":
        if s[-1]:
            return inst.argval
        s.pop()
    elif op == "JUMP_IF_FALSE_OR_POP":
        if not s[-1]:
            return inst.argval
        s.pop()
    elif op == "GET_ITER":
        s.append(iter(s.pop()))
    elif op == "GET_LEN":
        s.append(len(s[-1]))
    elif op == "FOR_ITER":
        try:
            s.append(next(s[-1]))
        except StopIteration:
            s.pop()
            if PY312:
                insts, index = instructions_of(fs.code)
                return insts[index[inst.argval] + 1].offset
            return inst.argval
    elif op == "BEFORE_WITH":
        mgr = s.pop()
        enter = type(mgr).__enter__
        exit_ = type(mgr).__exit__
        s.append(types.MethodType(exit_, mgr))
        s.append(enter(mgr))
    elif op == "PUSH_EXC_INFO":
        v = s.pop()
        s.append(fs.exc_stack[-1] if fs.exc_stack else None)
        fs.exc_stack.append(v)
        s.append(v)
    elif op == "POP_EXCEPT":
        s.pop()
        if fs.exc_stack:
            fs.exc_stack.pop()
    elif op == "RERAISE":
        exc = s.pop()
        raise exc
    elif op == "WITH_EXCEPT_START":
        exc = s[-1]
        exit_fn = s[-4]
        s.append(exit_fn(type(exc), exc, exc.__traceback__))
    elif op == "CHECK_EXC_MATCH":
        t = s.pop()
        s.append(isinstance(s[-1], t))
    elif op == "LOAD_ASSERTION_ERROR":
        s.append(AssertionError)
    elif op == "RAISE_VARARGS":
        if inst.arg == 0:
            raise (
                fs.exc_stack[-1] if fs.exc_stack else RuntimeError("No active exception to reraise")
            )
        if inst.arg == 1:
            raise s.pop()
        cause = s.pop()
        exc = s.pop()
        raise exc from cause
    elif op == "IMPORT_NAME":
        fromlist = s.pop()
        level = s.pop()
        s.append(__import__(inst.argval, fs.G, None, fromlist, level))
    elif op == "IMPORT_FROM":
        s.append(getattr(s[-1], inst.argval))
    elif op == "LOAD_BUILD_CLASS":
        s.append(builtins.__build_class__)
    elif op == "DELETE_NAME":
        raise NotImplementedError("DELETE_NAME")
    else:
        raise NotImplementedError(f"eager step of {op}")
    return None


def _cell(fs, name):
    if name in fs.K:
        return fs.K[name]
    code = fs.code
    return fs.C[code.co_freevars.index(name)]


def _popn(s, n):
    if n == 0:
        return []
    vals = s[-n:]
    del s[-n:]
    return vals


__all__ = ["FrameState", "Returned", "step", "in_try_region", "operator"]
