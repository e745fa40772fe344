"""The symbolic bytecode interpreter (CPython 3.11 and 3.12).

One ``Translator`` runs one code object on symbolic values; calls to user functions are
inlined by running a child translator.  Anything it cannot follow raises ``Unsupported``;
the root frame turns that into a graph break at its current instruction.
"""

from __future__ import annotations

import dis
import operator
import sys

from .building_opcodes import BuildingOpcodes, _slice
from .exc import Unsupported
from .source import Source, global_source, local_source
from .variables.base import ConstVar, NullVar, Var
from .variables.builtins import (
    BINARY,
    COMPARE,
    INPLACE,
    TorchFnVar,
    _AttrMissing,
    binary_op,
    contains,
    is_op,
)
from .variables.containers import DictVar, ListIteratorVar, ListVar, SeqVar, TupleVar
from .variables.functions import (
    CO_ASYNC_GENERATOR,
    CO_COROUTINE,
    CO_GENERATOR,
    NestedFunctionVar,
    bind_args,
)
from .variables.generator_ctx import GeneratorCtxVar
from .variables.numpy_arrays import NDArrayVar, array_unary
from .variables.objects import (
    AutocastVar,
    CellVar,
    GradModeVar,
    ModuleVar,
    ObjectVar,
    _class_attr,
    _CtxMethod,
)
from .variables.symbolic import SymNumVar, sym_unary
from .variables.tensor import TensorVar

PY312 = sys.version_info >= (3, 12)
MAX_INLINE_DEPTH = 40
MAX_INSTRUCTIONS = 300_000

_instr_cache: dict = {}


def instructions_of(code):
    hit = _instr_cache.get(code)
    if hit is None:
        every = list(dis.get_instructions(code))
        insts = [i for i in every if i.opname not in ("CACHE", "EXTENDED_ARG")]
        index = {i.offset: k for k, i in enumerate(insts)}
        # Jumps may target an EXTENDED_ARG prefix: map it to the instruction it extends.
        pending = []
        for i in every:
            if i.offset in index:
                for p in pending:
                    index[p] = index[i.offset]
                pending = []
            else:
                pending.append(i.offset)
        hit = (insts, index)
        _instr_cache[code] = hit
    return hit


_protected_cache: dict = {}


def protected_offsets(code) -> frozenset:
    """Offsets of instructions covered by an exception handler (try, with)."""
    hit = _protected_cache.get(code)
    if hit is None:
        insts, _ = instructions_of(code)
        protected = set()
        for e in dis.Bytecode(code).exception_entries:
            protected.update(i.offset for i in insts if e.start <= i.offset < e.end)
        hit = _protected_cache[code] = frozenset(protected)
    return hit


class ReturnValue(Exception):
    def __init__(self, value):
        self.value = value


class BreakAt(Exception):
    """Root frame: stop before the instruction at ``offset`` (state is kept on the translator)."""


class Translator(BuildingOpcodes):
    def __init__(
        self,
        tx_root,
        code,
        f_globals,
        locals_,
        cells,
        output,
        parent=None,
        name="",
        start_offset=0,
        stack=None,
        kw_names=None,
    ):
        self.root = tx_root or self
        self.code = code
        self.f_globals = f_globals
        self.locals = locals_  # name -> Var
        self.cells = cells  # name -> CellVar (cell vars and free vars)
        self.output = output
        self.parent = parent
        self.name = name or code.co_name
        self.stack: list[Var] = list(stack or [])
        self.kw_names = kw_names
        self.insts, self.index = instructions_of(code)
        self.protected = protected_offsets(code)
        self.ip = self.index[start_offset]
        self.depth = 0 if parent is None else parent.depth + 1
        self.current = None
        self.yielded: list[Var] | None = None
        self.suspend = False  # a generator frame stopping at each yield (contextmanager)
        self.break_offsets: set[int] = set()
        self.count = 0

    # ------------------------------------------------------------------ helpers
    @property
    def is_root(self):
        return self.parent is None

    def user_loc(self):
        inst = self.current
        line = (
            inst.positions.lineno
            if inst is not None and inst.positions
            else self.code.co_firstlineno
        )
        return f"{self.code.co_filename}:{line}"

    def push(self, v):
        self.stack.append(v)

    def pop(self):
        return self.stack.pop()

    def popn(self, n):
        if n == 0:
            return []
        vals = self.stack[-n:]
        del self.stack[-n:]
        return vals

    def jump(self, offset):
        self.ip = self.index[offset]

    # ------------------------------------------------------------------ main loop
    def run(self):
        """Run to RETURN_VALUE; returns the returned Var."""
        counter = self.root
        while True:
            inst = self.insts[self.ip]
            if self.is_root and inst.offset in self.break_offsets and self.count > 0:
                self.current = inst
                raise BreakAt()
            self.current = inst
            self.ip += 1
            self.count += 1
            counter.count_total = getattr(counter, "count_total", 0) + 1
            if counter.count_total > MAX_INSTRUCTIONS:
                raise Unsupported("trace too long (unbounded loop?)")
            handler = getattr(self, inst.opname, None)
            if handler is None:
                raise Unsupported(f"bytecode {inst.opname}")
            try:
                handler(inst)
            except ReturnValue as r:
                return r.value
            except _AttrMissing as e:
                if inst.offset in self.protected:
                    # A handler here could catch the AttributeError; it is not followed, so
                    # an outer hasattr()/getattr(default) must not decide: break instead.
                    raise Unsupported(f"AttributeError inside a try block: {e}") from e
                if e.user_loc is None:
                    e.user_loc = self.user_loc()
                raise
            except Unsupported as e:
                if e.user_loc is None:
                    e.user_loc = self.user_loc()
                raise

    # ------------------------------------------------------------------ calls
    def inline_call(
        self,
        code,
        f_globals,
        closure_cells,
        args,
        kwargs,
        defaults,
        kwdefaults,
        name,
        suspend=False,
    ):
        """Run ``code`` inlined; ``suspend``: a generator's frame is returned un-run, to be
        run up to each ``yield`` (``generator_ctx.Suspended``)."""
        if self.depth >= MAX_INLINE_DEPTH:
            raise Unsupported("inlining too deep (recursion?)")
        if code.co_flags & (CO_COROUTINE | CO_ASYNC_GENERATOR):
            raise Unsupported("coroutine")
        bound = bind_args(code, name, list(args), dict(kwargs), defaults, kwdefaults)
        cells = {}
        for n, c in zip(code.co_freevars, closure_cells or ()):
            cells[n] = c
        child = Translator(
            self.root, code, f_globals, bound, cells, self.output, parent=self, name=name
        )
        if suspend:
            if not code.co_flags & CO_GENERATOR:
                raise Unsupported(f"{name} is not a generator function")
            child.yielded = []
            child.suspend = True
            return child
        if code.co_flags & CO_GENERATOR:
            child.yielded = []
            child.run()
            return ListIteratorVar(child.yielded)
        return child.run()

    def call(self, fn: Var, args, kwargs):
        return fn.call(self, list(args), dict(kwargs))

    def make_super(self, args):
        from .variables.objects import SuperVar

        if args:
            if len(args) != 2:
                raise Unsupported("super() with one argument")
            return SuperVar(args[0].const(), args[1])
        cell = self.cells.get("__class__")
        if cell is None or self.code.co_argcount == 0:
            raise Unsupported("zero-argument super() outside a method")
        cls = cell.load(self).const()
        first = self.code.co_varnames[0]
        obj = self.locals.get(first)
        if obj is None and first in self.cells:
            obj = self.cells[first].load(self)
        return SuperVar(cls, obj)

    def getattr_checked(self, obj: Var, name: str):
        if isinstance(obj, ObjectVar) and name not in obj.pending:
            value = obj.value
            if value is not None and not isinstance(obj, ModuleVar):
                present = hasattr(value, name)
                if obj.source is not None:
                    self.output.guards.hasattr_guard(obj.source.expr, name, present)
                if not present:
                    raise _AttrMissing(f"no attribute {name}")
            elif value is None and not _custom_getattribute(obj.cls):
                if _class_attr(obj.cls, name) is _MISSING_SENTINEL():
                    raise _AttrMissing(f"no attribute {name}")
            elif isinstance(obj, ModuleVar):
                present = hasattr(value, name)
                if not present:
                    if obj.source is not None:
                        self.output.guards.hasattr_guard(obj.source.expr, name, False)
                    raise _AttrMissing(f"no attribute {name}")
        if isinstance(obj, DictVar) and obj.py_type is not dict and name not in obj.items:
            if name not in getattr(obj.py_type, "__dataclass_fields__", {}) and not hasattr(
                obj.py_type, name
            ):
                raise _AttrMissing(f"no attribute {name}")
        if isinstance(obj, TensorVar) and name not in (
            "grad",
            "data",
            "grad_fn",
            "_base",
            "_version",
        ):
            import torch

            if not hasattr(torch.Tensor, name) and name not in ("shape", "dtype", "device"):
                # an attribute the user may set on the tensor (t.foo = 1): its fake has none
                if obj.source is None:
                    raise _AttrMissing(name)
                src = obj.source.expr
                real = self.output.real_input(src)
                if real is not None and name in getattr(real, "__dict__", {}):
                    raise Unsupported(f"attribute {name!r} set on the tensor {src}")
                self.output.guards.add("HASATTR", src, f"{name!r} not in {src}.__dict__")
                raise _AttrMissing(name)
        if obj.is_const() and not isinstance(obj, TorchFnVar):
            try:
                v, known = obj.const(), True
            except Unsupported:
                v, known = None, False
            if known and not hasattr(v, name):  # also None: hasattr(None, "x") is False
                raise _AttrMissing(name)
        return obj.getattr(self, name)

    # ------------------------------------------------------------------ opcodes: basics
    def NOP(self, inst):
        pass

    RESUME = NOP
    PRECALL = NOP
    COPY_FREE_VARS = NOP

    def RETURN_GENERATOR(self, inst):
        if self.yielded is None:
            raise Unsupported("generator")
        self.push(ConstVar(None))

    def YIELD_VALUE(self, inst):
        if self.yielded is None:
            raise Unsupported("yield in the frame")
        v = self.pop()
        self.push(ConstVar(None))  # the value sent in
        if self.suspend:
            from .variables.generator_ctx import Suspended

            raise Suspended(v)
        self.yielded.append(v)

    def POP_TOP(self, inst):
        self.pop()

    def PUSH_NULL(self, inst):
        self.push(NullVar())

    def COPY(self, inst):
        self.push(self.stack[-inst.arg])

    def SWAP(self, inst):
        i = inst.arg
        self.stack[-1], self.stack[-i] = self.stack[-i], self.stack[-1]

    def END_FOR(self, inst):
        self.popn(2 if sys.version_info < (3, 13) else 1)

    def LOAD_CONST(self, inst):
        self.push(
            self.output.wrap_const(inst.argval)
            if not isinstance(inst.argval, type(self.code))
            else ConstVar(inst.argval)
        )

    def RETURN_VALUE(self, inst):
        raise ReturnValue(self.pop())

    def RETURN_CONST(self, inst):
        raise ReturnValue(ConstVar(inst.argval))

    def LOAD_FAST(self, inst):
        name = inst.argval
        if name not in self.locals:
            raise Unsupported(f"UnboundLocalError: {name}")
        self.push(self.locals[name])

    LOAD_FAST_CHECK = LOAD_FAST

    def LOAD_FAST_AND_CLEAR(self, inst):
        self.push(self.locals.pop(inst.argval, NullVar()))

    def STORE_FAST(self, inst):
        v = self.pop()
        if isinstance(v, NullVar):
            self.locals.pop(inst.argval, None)
        else:
            self.locals[inst.argval] = v

    def DELETE_FAST(self, inst):
        self.locals.pop(inst.argval, None)

    def LOAD_GLOBAL(self, inst):
        if inst.arg & 1:
            self.push(NullVar())
        self.push(self.load_global(inst.argval))

    def load_global(self, name):
        g = self.f_globals
        # an inlined function of the frame's own module reads the same dict: G[...] too (its
        # module need not be in sys.modules)
        src = global_source(name) if g is self.root.f_globals else _foreign_global(self, g, name)
        if name in self.output.side_effects.globals and g is self.output.f_globals:
            return self.output.side_effects.globals[name]
        if name in g:
            return self.output.wrap(g[name], src)
        import builtins

        if hasattr(builtins, name):
            return self.output.wrap(getattr(builtins, name), None)
        raise Unsupported(f"NameError: {name}")

    def STORE_GLOBAL(self, inst):
        if self.f_globals is not self.output.f_globals:
            raise Unsupported("global store in another module")
        self.output.side_effects.store_global(inst.argval, self.pop())

    def LOAD_DEREF(self, inst):
        cell = self.cells.get(inst.argval)
        if cell is None:
            raise Unsupported(f"unknown cell {inst.argval}")
        self.push(cell.load(self))

    LOAD_CLASSDEREF = LOAD_DEREF

    def STORE_DEREF(self, inst):
        self.cells[inst.argval].store(self, self.pop())

    def LOAD_CLOSURE(self, inst):
        self.push(self.cells[inst.argval])

    def MAKE_CELL(self, inst):
        name = inst.argval
        if name in self.cells:
            return
        cell = CellVar(contents=self.locals.pop(name, None))
        self.cells[name] = cell

    def LOAD_ATTR(self, inst):
        obj = self.pop()
        if PY312 and inst.arg & 1:
            self.push(NullVar())
            self.push(self.getattr_checked(obj, inst.argval))
            return
        self.push(self.getattr_checked(obj, inst.argval))

    def LOAD_METHOD(self, inst):
        obj = self.pop()
        self.push(NullVar())
        self.push(self.getattr_checked(obj, inst.argval))

    def STORE_ATTR(self, inst):
        obj = self.pop()
        val = self.pop()
        obj.setattr(self, inst.argval, val)

    def DELETE_ATTR(self, inst):
        obj = self.pop()
        if isinstance(obj, ObjectVar):
            obj.delattr(self, inst.argval)
        else:
            raise Unsupported("del attribute")

    def LOAD_SUPER_ATTR(self, inst):
        self_var = self.pop()
        cls = self.pop()
        self.pop()  # the global super
        from .variables.objects import SuperVar

        sup = SuperVar(cls.const(), self_var)
        if inst.arg & 1:
            self.push(NullVar())
        self.push(sup.getattr(self, inst.argval))

    # ------------------------------------------------------------------ calls
    def KW_NAMES(self, inst):
        self.kw_names = self.code.co_consts[inst.arg]

    def CALL(self, inst):
        argc = inst.arg
        args = self.popn(argc)
        b = self.pop()
        a = self.pop()
        if isinstance(a, NullVar):
            fn = b
        else:
            fn = a
            args = [b, *args]
        kwargs = {}
        if self.kw_names:
            names = self.kw_names
            vals = args[len(args) - len(names) :]
            args = args[: len(args) - len(names)]
            kwargs = dict(zip(names, vals))
        self.kw_names = None
        self.push(self.call(fn, args, kwargs))

    def CALL_FUNCTION_EX(self, inst):
        kw = self.pop() if inst.arg & 1 else DictVar({})
        args = self.pop()
        fn = self.pop()
        if self.stack and isinstance(self.stack[-1], NullVar):
            self.pop()
        if not isinstance(kw, DictVar):
            raise Unsupported("**kwargs from a non-dict")
        self.push(self.call(fn, args.unpack(self), dict(kw.items)))

    def MAKE_FUNCTION(self, inst):
        code = self.pop().const()
        flags = inst.arg
        closure = self.pop().items if flags & 0x08 else []
        annotations = self.pop().unpack(self) if flags & 0x04 else None
        kwdefaults = self.pop().items if flags & 0x02 else None
        defaults = self.pop().unpack(self) if flags & 0x01 else None
        self.push(
            NestedFunctionVar(
                code, self.f_globals, code.co_name, defaults, kwdefaults, list(closure), annotations
            )
        )

    def CALL_INTRINSIC_1(self, inst):
        v = self.pop()
        if inst.arg == 6:  # list -> tuple
            self.push(TupleVar(v.unpack(self)))
        elif inst.arg == 5:  # unary +
            self.push(binary_op_unary(self, operator.pos, v))
        elif inst.arg == 3:  # StopIteration -> RuntimeError in generators
            raise Unsupported("StopIteration in a generator")
        else:
            raise Unsupported(f"CALL_INTRINSIC_1 {inst.arg}")

    # ------------------------------------------------------------------ operators
    def BINARY_OP(self, inst):
        b = self.pop()
        a = self.pop()
        sym = inst.argrepr
        op = INPLACE.get(sym) or BINARY.get(sym)
        if op is None:
            raise Unsupported(f"binary op {sym}")
        if (
            op in INPLACE.values()
            and isinstance(a, ListVar)
            and sym in ("+=", "*=")
            and not isinstance(b, ObjectVar)
        ):
            # in place: other names of the list see the change
            self.push(a.call_method(self, "__iadd__" if sym == "+=" else "__imul__", [b], {}))
            return
        self.push(binary_op(self, op, a, b))

    def COMPARE_OP(self, inst):
        b = self.pop()
        a = self.pop()
        sym = inst.argval if isinstance(inst.argval, str) else inst.argrepr
        sym = sym.replace("bool(", "").replace(")", "")
        self.push(binary_op(self, COMPARE[sym], a, b))

    def IS_OP(self, inst):
        b = self.pop()
        a = self.pop()
        r = is_op(a, b)
        self.push(ConstVar(r != bool(inst.arg)))

    def CONTAINS_OP(self, inst):
        container = self.pop()
        item = self.pop()
        r = contains(self, container, item)
        self.push(ConstVar(r != bool(inst.arg)))

    def UNARY_NOT(self, inst):
        self.push(ConstVar(not self.pop().truth(self)))

    def UNARY_NEGATIVE(self, inst):
        self.push(binary_op_unary(self, operator.neg, self.pop()))

    def UNARY_POSITIVE(self, inst):
        self.push(binary_op_unary(self, operator.pos, self.pop()))

    def UNARY_INVERT(self, inst):
        self.push(binary_op_unary(self, operator.invert, self.pop()))

    def BINARY_SUBSCR(self, inst):
        idx = self.pop()
        obj = self.pop()
        self.push(self.getitem(obj, idx))

    def getitem(self, obj, idx):
        if isinstance(obj, TensorVar):
            return self.output.call_op("call_function", operator.getitem, [obj, idx], {})
        if isinstance(obj, (SeqVar, DictVar, ModuleVar, NDArrayVar)):
            return obj.call_method(self, "__getitem__", [idx], {})
        if obj.is_const() and idx.is_const():
            try:
                return self.output.wrap_const(obj.const()[idx.const()])
            except Exception as e:
                raise Unsupported(f"{type(e).__name__} in subscript") from e
        if isinstance(obj, ObjectVar):
            return obj.getattr(self, "__getitem__").call(self, [idx], {})
        if obj.is_const() and hasattr(obj.const(), "__class_getitem__"):
            raise Unsupported("generic alias subscript")
        raise Unsupported(f"subscript of {obj}")

    def BINARY_SLICE(self, inst):
        stop = self.pop()
        start = self.pop()
        obj = self.pop()
        self.push(self.getitem(obj, _slice(start, stop, ConstVar(None))))

    def STORE_SLICE(self, inst):
        stop = self.pop()
        start = self.pop()
        obj = self.pop()
        val = self.pop()
        self.setitem(obj, _slice(start, stop, ConstVar(None)), val)

    def STORE_SUBSCR(self, inst):
        idx = self.pop()
        obj = self.pop()
        val = self.pop()
        self.setitem(obj, idx, val)

    def setitem(self, obj, idx, val):
        if isinstance(obj, TensorVar):
            obj.call_method(self, "__setitem__", [idx, val], {})
        elif isinstance(obj, (ListVar, DictVar, NDArrayVar)):
            obj.call_method(self, "__setitem__", [idx, val], {})
        elif isinstance(obj, ObjectVar):
            obj.getattr(self, "__setitem__").call(self, [idx, val], {})
        else:
            raise Unsupported(f"item assignment on {obj}")

    def DELETE_SUBSCR(self, inst):
        idx = self.pop()
        obj = self.pop()
        if isinstance(obj, (ListVar, DictVar)):
            obj.call_method(self, "__delitem__", [idx], {})
        else:
            raise Unsupported("del item")

    # ------------------------------------------------------------------ control flow
    def JUMP_FORWARD(self, inst):
        self.jump(inst.argval)

    JUMP_BACKWARD = JUMP_FORWARD
    JUMP_BACKWARD_NO_INTERRUPT = JUMP_FORWARD
    JUMP = JUMP_FORWARD

    def _pop_jump(self, inst, want):
        v = self.pop()
        try:
            t = v.truth(self)
        except Unsupported:
            self.push(v)
            raise
        if t == want:
            self.jump(inst.argval)

    def _pop_jump_none(self, inst, want_none):
        v = self.pop()
        is_none = v.is_const() and v.const() is None
        if not is_none and not v.is_const():
            # A non-constant symbolic value is never None.
            is_none = False
        if is_none == want_none:
            self.jump(inst.argval)

    def POP_JUMP_FORWARD_IF_TRUE(self, inst):
        self._pop_jump(inst, True)

    def POP_JUMP_FORWARD_IF_FALSE(self, inst):
        self._pop_jump(inst, False)

    POP_JUMP_BACKWARD_IF_TRUE = POP_JUMP_FORWARD_IF_TRUE
    POP_JUMP_BACKWARD_IF_FALSE = POP_JUMP_FORWARD_IF_FALSE
    POP_JUMP_IF_TRUE = POP_JUMP_FORWARD_IF_TRUE
    POP_JUMP_IF_FALSE = POP_JUMP_FORWARD_IF_FALSE

    def POP_JUMP_FORWARD_IF_NONE(self, inst):
        self._pop_jump_none(inst, True)

    def POP_JUMP_FORWARD_IF_NOT_NONE(self, inst):
        self._pop_jump_none(inst, False)

    POP_JUMP_BACKWARD_IF_NONE = POP_JUMP_FORWARD_IF_NONE
    POP_JUMP_BACKWARD_IF_NOT_NONE = POP_JUMP_FORWARD_IF_NOT_NONE
    POP_JUMP_IF_NONE = POP_JUMP_FORWARD_IF_NONE
    POP_JUMP_IF_NOT_NONE = POP_JUMP_FORWARD_IF_NOT_NONE

    def JUMP_IF_TRUE_OR_POP(self, inst):
        if self.stack[-1].truth(self):
            self.jump(inst.argval)
        else:
            self.pop()

    def JUMP_IF_FALSE_OR_POP(self, inst):
        if not self.stack[-1].truth(self):
            self.jump(inst.argval)
        else:
            self.pop()

    def GET_ITER(self, inst):
        v = self.pop()
        self.push(v.get_iter(self))

    def GET_LEN(self, inst):
        from .variables.builtins import _len

        self.push(_len(self, self.stack[-1]))

    def FOR_ITER(self, inst):
        it = self.stack[-1]
        if not isinstance(it, ListIteratorVar):
            raise Unsupported(f"iterating over {it}")
        v = it.next(self)
        if v is None:
            self.pop()
            if PY312:
                self.jump(inst.argval)
                self.ip += 1  # skip END_FOR
            else:
                self.jump(inst.argval)
        else:
            self.push(v)

    # ------------------------------------------------------------------ with blocks
    def BEFORE_WITH(self, inst):
        ctx = self.pop()
        if isinstance(ctx, (GradModeVar, AutocastVar, GeneratorCtxVar)):
            self.push(_CtxMethod(ctx, "exit"))
            self.push(ctx.enter(self))
            return
        if isinstance(ctx, ObjectVar):
            enter = ctx.getattr(self, "__enter__")
            exit_ = ctx.getattr(self, "__exit__")
            self.push(exit_)
            self.push(enter.call(self, [], {}))
            return
        raise Unsupported(f"context manager {ctx}")

    def LOAD_ASSERTION_ERROR(self, inst):
        raise Unsupported("assert failed (AssertionError)")

    def RAISE_VARARGS(self, inst):
        raise Unsupported("raise")

    def IMPORT_NAME(self, inst):
        # Importing an already-imported module has no side effects: resolve it statically.
        fromlist = self.pop().const()
        level = self.pop().const()
        name = inst.argval
        if level != 0 or name not in sys.modules:
            raise Unsupported(f"import of {name} inside the frame")
        from .variables.objects import PythonModuleVar

        mod = sys.modules[name] if fromlist else sys.modules[name.partition(".")[0]]
        self.push(PythonModuleVar(mod))

    def IMPORT_FROM(self, inst):
        self.push(self.stack[-1].getattr(self, inst.argval))

    def LOAD_BUILD_CLASS(self, inst):
        raise Unsupported("class definition inside the frame")


def binary_op_unary(tx, op, v):
    if isinstance(v, TensorVar):
        return tx.output.call_op("call_function", op, [v], {})
    if isinstance(v, NDArrayVar):
        return array_unary(tx, op, v)
    if isinstance(v, SymNumVar):
        r = sym_unary(tx, op, v)
        if r is not None:
            return r
    if v.is_const():
        return ConstVar(op(v.const()))
    if isinstance(v, ObjectVar):
        from .variables.user_operators import user_unary

        return user_unary(tx, op, v)
    raise Unsupported(f"{op.__name__} of {v}")


def _custom_getattribute(cls):
    return _class_attr(cls, "__getattribute__") is not object.__getattribute__


def _MISSING_SENTINEL():
    from .variables.objects import _MISSING

    return _MISSING


def _foreign_global(tx, g, name):
    """Source for a global of an inlined function from another module."""
    mod = g.get("__name__")
    if mod is None or mod not in sys.modules or sys.modules[mod].__dict__ is not g:
        return None
    return Source(f"sys.modules[{mod!r}].__dict__[{name!r}]")


def root_translator(
    code,
    f_globals,
    frame_locals: dict,
    cell_objs: dict,
    closure,
    output,
    start_offset=0,
    stack_len=0,
    kw_names=None,
):
    """A root translator whose inputs are the real frame state (sources L/K/C)."""
    locals_ = {}
    for name, value in frame_locals.items():
        if name.startswith("___stack"):
            continue
        locals_[name] = output.wrap(value, local_source(name))
    stack = []
    from .runtime_values import NULL

    for i in range(stack_len):
        value = frame_locals[f"___stack{i}"]
        stack.append(
            NullVar() if value is NULL else output.wrap(value, local_source(f"___stack{i}"))
        )
    cells = {}
    for name, cell in cell_objs.items():
        cells[name] = CellVar(Source(f"K[{name!r}]"), real=cell)
    for i, name in enumerate(code.co_freevars):
        cells[name] = output.real_cell(closure[i], Source(f"C[{i}]"))
    return Translator(
        None,
        code,
        f_globals,
        locals_,
        cells,
        output,
        start_offset=start_offset,
        stack=stack,
        kw_names=kw_names,
    )
