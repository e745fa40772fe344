"""The bytecode the frame hook runs instead of a traced frame.

A frame's code ``F`` is either a user function's code ``O`` or a resume function made from
``O`` (``make_resume_code``). The transformed code keeps ``F``'s signature and closure and:

- whole frame: ``return runner(args..., closure)``;
- graph break at instruction ``I`` of ``O``: ``runner`` returns the live stack and locals,
  which are unpacked back into the frame; then either

  * *resume*: ``I`` runs in plain Python and its result, with the rest of the stack and the
    locals live after it, goes to a resume function for the instruction after ``I`` (which
    the hook compiles in turn when it runs): ``return __resume_at_N(stack..., locals...)``;
  * *continue*: the frame jumps to ``I`` inside a copy of ``O``'s instructions and runs the
    rest of the frame in plain Python (calls it makes are still shown to the hook). Used where
    a resume function cannot be built (a jump or an unknown instruction at the break, NULL
    slots left on the stack, inside try/with blocks), and, for a break inside a loop, when the
    chain of nested resume calls grows deep.
"""

from __future__ import annotations

import dis
import sys
import types

from ..bytecode import CodeTables, assemble, disassemble, live_locals_at, make_resume_code, opcodes
from ..bytecode import builders as b
from ..bytecode.code_builder import function_prologue
from ..bytecode.editing import clone_instructions
from ..bytecode.resume import _check_unbound_loads, _split_at

PY311 = sys.version_info[:2] == (3, 11)
PY313 = sys.version_info >= (3, 13)

# Break instructions a resume function can follow: how many values each pushes (its pops
# follow from dis.stack_effect). Jumps, loads of methods (NULL slots) and 3.11's COMPARE_OP
# (fused with the jump after it) are left to the "continue" form.
_PUSHES = {
    "CALL": 1,
    "CALL_FUNCTION_EX": 1,
    "BINARY_OP": 1,
    "BINARY_SUBSCR": 1,
    "BINARY_SLICE": 1,
    "CONTAINS_OP": 1,
    "IS_OP": 1,
    "UNARY_NEGATIVE": 1,
    "UNARY_NOT": 1,
    "UNARY_INVERT": 1,
    "UNARY_POSITIVE": 1,  # 3.11; 3.12+: CALL_INTRINSIC_1 (INTRINSIC_UNARY_POSITIVE)
    "CALL_INTRINSIC_1": 1,
    "GET_ITER": 1,
    "LOAD_ATTR": 1,  # a property that cannot be traced (3.12+: not the method-load form)
    "STORE_ATTR": 0,
    "STORE_SUBSCR": 0,
    "STORE_SLICE": 0,  # 3.12+ (3.11: BUILD_SLICE + STORE_SUBSCR)
    "DELETE_SUBSCR": 0,
}
if not PY311:
    _PUSHES["COMPARE_OP"] = 1

# A break in a loop resumes through nested calls (one per iteration); past this many frames
# on the stack the rest of the frame continues in plain Python instead.
MAX_RESUME_NESTING = 150

_disassembled: dict = {}
_resume_codes: dict = {}
# resume code -> (original code, offset it resumes at, stack layout: True where a NULL slot)
RESUME_OF: dict = {}


def _instructions(code):
    hit = _disassembled.get(code)
    if hit is None:
        hit = disassemble(code)
        _disassembled[code] = hit
    return hit


def _at(code, offset):
    for ins in _instructions(code):
        if ins.offset == offset:
            return ins
    raise ValueError(f"no instruction at offset {offset}")


def n_args(code) -> int:
    flags = code.co_flags
    return (
        code.co_argcount
        + code.co_kwonlyargcount
        + bool(flags & 0x04)  # CO_VARARGS
        + bool(flags & 0x08)  # CO_VARKEYWORDS
    )


def arg_names(code):
    return code.co_varnames[: n_args(code)]


def _shallow() -> bool:
    try:
        sys._getframe(MAX_RESUME_NESTING)
    except ValueError:
        return True
    return False


def _call_runner(frame_code, runner):
    own = set(frame_code.co_cellvars)
    loads = [b.load_deref(n) if n in own else b.load_local(n) for n in arg_names(frame_code)]
    names = frame_code.co_cellvars + frame_code.co_freevars
    if names:
        load_cell = "LOAD_FAST" if opcodes.PY_VERSION >= (3, 13) else "LOAD_CLOSURE"
        cells = [b.create_instruction(load_cell, argval=f) for f in names]
        loads.append(cells + b.build_tuple(len(names)))
    return b.call(b.load_const(runner), loads)


def cell_names(code):
    """The cells a runner of ``code``'s frame receives (own cells, then the closure)."""
    return code.co_cellvars + code.co_freevars


def _assemble(frame_code, original, instructions):
    varnames = list(frame_code.co_varnames)
    varnames += [v for v in original.co_varnames if v not in varnames]
    tables = CodeTables(
        consts=list(original.co_consts),
        names=list(original.co_names),
        varnames=varnames,
        cellvars=list(frame_code.co_cellvars),
        freevars=list(frame_code.co_freevars),
    )
    return assemble(
        instructions,
        template=original,
        tables=tables,
        co_name=frame_code.co_name,
        co_qualname=frame_code.co_qualname,
        co_argcount=frame_code.co_argcount,
        co_posonlyargcount=frame_code.co_posonlyargcount,
        co_kwonlyargcount=frame_code.co_kwonlyargcount,
        co_flags=frame_code.co_flags,
    )


def _located(instructions, positions):
    for ins in instructions:
        ins.positions = positions
    return instructions


def whole_frame_code(frame_code, original, runner):
    """``return runner(args..., closure)`` with ``frame_code``'s signature."""
    first = next((i for i in _instructions(original) if i.positions.lineno), None)
    body = function_prologue(frame_code.co_cellvars, frame_code.co_freevars)
    body += _call_runner(frame_code, runner) + b.return_value()
    if first is not None:
        _located(body, first.positions)
    return _assemble(frame_code, original, body)


def in_loop(original, offset) -> bool:
    for ins in dis.get_instructions(original):
        if ins.opcode in dis.hasjrel or ins.opcode in dis.hasjabs:
            if isinstance(ins.argval, int) and ins.argval <= offset < ins.offset:
                return True
    return False


def _in_try(original, offset, depth=0) -> bool:
    """Whether an exception raised at ``offset`` could be caught in this frame. The handler
    of a 3.12+ inlined comprehension (PEP 709) only restores the comprehension's variables and
    re-raises: it does not count, unless its own code is protected in turn."""
    for e in _exception_entries(original):
        if e.start <= offset < e.end:
            if depth < 8 and _is_comprehension_cleanup(original, e.target):
                return _in_try(original, e.target, depth + 1)
            return True
    return False


def _exception_entries(code):
    hit = _entries.get(code)
    if hit is None:
        hit = _entries[code] = dis.Bytecode(code).exception_entries
    return hit


_entries: dict = {}


def _is_comprehension_cleanup(code, offset) -> bool:
    """``SWAP 2; POP_TOP; SWAP n; STORE_FAST x (n - 1 times); RERAISE 0`` at ``offset``: what
    CPython 3.12+ emits to put an inlined comprehension's shadowed locals back."""
    if PY311:
        return False
    ins = [i for i in dis.get_instructions(code) if i.offset >= offset][:3]
    if [(i.opname, i.arg) for i in ins[:2]] != [("SWAP", 2), ("POP_TOP", None)]:
        return False
    if len(ins) < 3 or ins[2].opname != "SWAP":
        return False
    n = ins[2].arg
    rest = [i for i in dis.get_instructions(code) if i.offset > ins[2].offset][:n]
    return len(rest) == n and [i.opname for i in rest] == ["STORE_FAST"] * (n - 1) + ["RERAISE"]


class BreakPlan:
    """How a graph break at ``offset`` of ``original`` is emitted (see the module doc)."""

    def __init__(self, original, offset, stack_nulls, bound_locals):
        self.original = original
        self.offset = offset
        insts = _instructions(original)
        self.instr = _at(original, offset)
        pos = next(i for i, x in enumerate(insts) if x is self.instr)
        # Jump to the start of a fused group (3.11 PRECALL/KW_NAMES before CALL, 3.12
        # KW_NAMES): those set interpreter state only, the stack is the same.
        start = pos
        while start > 0 and insts[start - 1].opname in ("PRECALL", "KW_NAMES"):
            start -= 1
        self.target = insts[start]
        self.successor = insts[pos + 1] if pos + 1 < len(insts) else None
        ignore = set(original.co_cellvars) | set(original.co_freevars)
        live = live_locals_at(insts, self.target, ignore=ignore)
        self.stored_locals = [n for n in original.co_varnames if n in live and n in bound_locals]
        self.stack_nulls = list(stack_nulls)
        self.branch = _branch_kind(self.instr.opname)  # (truth or is_none, "if"|"none")
        # A method load (3.11 LOAD_METHOD, 3.12+ LOAD_ATTR with the method bit) pushes a NULL
        # slot or not depending on the object: it is emitted as a plain attribute load, and the
        # resume function pushes a NULL beside the bound method for the call that follows.
        op = self.instr.opname
        self.method_load = op == "LOAD_METHOD" or (
            op == "LOAD_ATTR" and not PY311 and self.instr.arg & 1
        )
        self.resume_reason = self._resumable()
        self.resumable = self.resume_reason is None
        if self.resumable:
            self.resume_locals = self._live_after(self.successor)
            if self.branch is not None:
                self.taken_locals = self._live_after(self.instr.target)

    def _live_after(self, ins):
        ignore = set(self.original.co_cellvars) | set(self.original.co_freevars)
        live = live_locals_at(_instructions(self.original), ins, ignore=ignore)
        return [n for n in self.stored_locals if n in live]

    def _resumable(self):
        ins = self.instr
        if "__class__" in self.original.co_freevars:
            # Zero-argument super() reads the frame's first local: in a resume function that
            # is a stack value, not the original's first argument.
            return "the function may call zero-argument super()"
        if self.branch is not None:  # a data-dependent branch: one resume function per side
            pushes, pops = 0, 1
            after = [self.successor, ins.target]
        else:
            pushes = _PUSHES.get(ins.opname)
            if self.method_load:
                pushes = 1  # emitted as a plain attribute load: the bound method
            if pushes is None:
                return f"a resume function cannot follow {ins.opname}"
            after = [self.successor]
        if self.successor is None:
            return "nothing follows the break"
        if any(_in_try(self.original, i.offset) for i in [ins, *after]):
            return "the break is inside a try/with block"
        if self.branch is None:
            if ins.opname == "CALL":  # callable + NULL/self + arguments (3.11: PRECALL's too)
                pops = ins.arg + 2
            elif self.method_load:
                pops = 1
            else:
                pops = pushes - dis.stack_effect(ins.opcode, ins.arg, jump=False)
        # Below the break's operands the stack stays in temporaries (NULL slots of calls in
        # progress included: the resume function pushes those itself).
        self.n_below = len(self.stack_nulls) - pops
        self.n_results = pushes
        if self.n_below < 0:
            return "the stack at the break is shallower than its instruction needs"
        self.result_nulls = [False] * pushes
        if self.method_load:
            self.result_nulls = [False, True] if PY313 else [True, False]
        nulls = self.stack_nulls[: self.n_below] + self.result_nulls
        self.resume_stack = [None if null else f"___stack{i}" for i, null in enumerate(nulls)]
        return None

    def resume_code(self, at, live):
        layout = tuple(x is None for x in self.resume_stack)
        key = (self.original, at.offset, layout, tuple(live))
        code = _resume_codes.get(key)
        if code is None:
            code = make_resume_code(
                self.original,
                at.offset,
                stack=self.resume_stack,
                live_locals=live,
                name=f"__resume_{self.original.co_name}_at_{at.offset}",
            )
            _resume_codes[key] = code
            RESUME_OF[code] = (self.original, at.offset, layout)
        return code

    def _call_resume(self, frame_code, temps, at, live):
        """``return resume(stack values below, results, live locals)``."""
        fn = b.new_function(self.resume_code(at, live), cell_names(frame_code))
        args = [b.load_local(t) for t in temps]
        args += [b.load_local(n) for n in live]
        return b.call(fn, args) + b.return_value()

    def emit(self, frame_code, runner, kw_names, *, resume: bool):
        """The transformed code for ``frame_code`` (the original or one of its resume
        functions). ``runner`` returns the non-NULL stack values then ``stored_locals``."""
        original = self.original
        slot_temps = [None if null else f"___s{i}" for i, null in enumerate(self.stack_nulls)]
        entry = function_prologue(frame_code.co_cellvars, frame_code.co_freevars)
        entry += _call_runner(frame_code, runner)
        entry += b.unpack_to_locals([t for t in slot_temps if t] + self.stored_locals)

        def push(temps):
            out = []
            for t in temps:
                out += b.push_null() if t is None else b.load_local(t)
            return out

        body = None
        need_body = not resume
        tail = []
        if not resume:
            _, body, target = _split_at(original, self.target.offset)
            tail += push(slot_temps) + b.jump_to(target)
        else:
            below = slot_temps[: self.n_below]
            passed = [t for t in below if t]
            operands = push(slot_temps[self.n_below :])  # the break instruction's operands
            if self.branch is not None:
                taken = self._call_resume(frame_code, passed, self.instr.target, self.taken_locals)
                value, kind = self.branch
                jump = b.pop_jump_if_none if kind == "none" else b.pop_jump_if
                deep = []
                if in_loop(original, self.offset):
                    # Deep in nested resume calls: take the branch here and continue the loop
                    # in the original instructions (at either side, never at the jump itself:
                    # on 3.11 it is fused with the COMPARE_OP before it).
                    _, body, succ = _split_at(original, self.successor.offset)
                    dest = next(i for i in body if i.offset == self.instr.target.offset)
                    to_dest = push(below) + b.jump_to(dest)
                    deep = operands + jump(value, to_dest[0])
                    deep += push(below) + b.jump_to(succ) + to_dest
                    tail += b.call(b.load_const(_shallow), []) + b.pop_jump_if(False, deep[0])
                    operands = push(slot_temps[self.n_below :])
                    need_body = True
                tail += operands + jump(value, taken[0])
                tail += self._call_resume(frame_code, passed, self.successor, self.resume_locals)
                tail += taken + deep
            else:
                results = [f"___r{i}" for i in range(self.n_results)]
                tail += operands + self._copy_break_instruction(kw_names)
                tail += b.store_locals(results) if results else []
                call = self._call_resume(
                    frame_code, passed + results, self.successor, self.resume_locals
                )
                if in_loop(original, self.offset):
                    # Deep in nested resume calls: continue the loop here in plain Python.
                    _, body, _ = _split_at(original, self.successor.offset)
                    succ = next(i for i in body if i.offset == self.successor.offset)
                    it = iter(results)
                    slots = [None if null else next(it) for null in self.result_nulls]
                    deep = push(below + slots) + b.jump_to(succ)
                    tail += b.call(b.load_const(_shallow), [])
                    tail += b.pop_jump_if(False, deep[0])
                    tail += call + deep
                    need_body = True
                else:
                    tail += call
        _located(entry + tail, self.instr.positions)
        if need_body:
            bound = set(arg_names(frame_code)) | set(self.stored_locals)
            _check_unbound_loads(body, bound)
            return _assemble(frame_code, original, entry + tail + body)
        return _assemble(frame_code, original, entry + tail)

    def _copy_break_instruction(self, kw_names):
        ins = self.instr
        if ins.opname == "CALL":
            return b.call_function(ins.arg, kw_names=kw_names or ())
        if self.method_load:
            return [b.create_instruction("LOAD_ATTR", argval=ins.argval, positions=ins.positions)]
        (copy,) = clone_instructions([ins])
        copy.exn_entry = None
        return [copy]


def _branch_kind(opname):
    """``(value, "if")`` for jumps taken when the popped value's truth is ``value``,
    ``(is_none, "none")`` for the None tests; None for other instructions."""
    if not opname.startswith("POP_JUMP_") or "_IF_" not in opname:
        return None
    cond = opname.rsplit("_IF_", 1)[1]
    return {
        "TRUE": (True, "if"),
        "FALSE": (False, "if"),
        "NONE": (True, "none"),
        "NOT_NONE": (False, "none"),
    }[cond]


def function_for(code, f_globals, closure=None):
    return types.FunctionType(code, f_globals, code.co_name, None, closure)
