"""The bytecode layer: disassemble a code object into editable instructions, assemble back.

Pure Python, no torch, CPython 3.11-3.13. See packages/dynamo/README.md, "Bytecode layer".
"""

from .assembler import AssemblyError, assemble
from .code_tables import CodeTables
from .disassembler import disassemble
from .instruction import NO_POSITIONS, ExceptionTableEntry, Instruction, Positions
from .stack_depth import StackDepthError, max_stack_depth

__all__ = [
    "NO_POSITIONS",
    "AssemblyError",
    "CodeTables",
    "ExceptionTableEntry",
    "Instruction",
    "Positions",
    "StackDepthError",
    "assemble",
    "disassemble",
    "max_stack_depth",
]
