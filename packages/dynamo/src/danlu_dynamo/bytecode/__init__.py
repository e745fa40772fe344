"""The bytecode layer: disassemble a code object into editable instructions, assemble back.

Pure Python, no torch, CPython 3.11-3.13. See packages/dynamo/README.md, "Bytecode layer".
"""

from . import builders
from .assembler import AssemblyError, assemble
from .builders import create_instruction
from .code_builder import function_prologue, make_code, make_function
from .code_tables import CodeTables
from .disassembler import disassemble
from .editing import clone_instructions, protect, redirect_jumps, replace_instructions
from .instruction import NO_POSITIONS, ExceptionTableEntry, Instruction, Positions
from .liveness import live_locals, live_locals_at
from .opcodes import PY_VERSION
from .printing import format_instructions
from .resume import make_continuation_code, make_resume_code, resume_closure_names
from .stack_depth import StackDepthError, max_stack_depth, stack_depths

__all__ = [
    "NO_POSITIONS",
    "PY_VERSION",
    "AssemblyError",
    "CodeTables",
    "ExceptionTableEntry",
    "Instruction",
    "Positions",
    "StackDepthError",
    "assemble",
    "builders",
    "clone_instructions",
    "create_instruction",
    "disassemble",
    "format_instructions",
    "live_locals",
    "live_locals_at",
    "function_prologue",
    "make_code",
    "make_continuation_code",
    "make_function",
    "make_resume_code",
    "max_stack_depth",
    "protect",
    "redirect_jumps",
    "replace_instructions",
    "resume_closure_names",
    "stack_depths",
]
