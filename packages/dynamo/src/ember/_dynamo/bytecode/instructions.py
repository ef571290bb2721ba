"""Decode a code object into editable :class:`Instruction` objects.

A decoded instruction refers to things by identity rather than by number, so a list of them can
be edited (instructions inserted, removed, retargeted) and assembled again:

- a jump's ``target`` is the :class:`Instruction` it jumps to;
- an argument that indexes the frame's locals (``LOAD_FAST``, ``LOAD_DEREF``, ...) is kept as
  the variable's name in ``argval`` (a pair of names for 3.13's fused ``LOAD_FAST_LOAD_FAST``);
- exception-table entries (:class:`ExceptionTableEntry`) name their first and last covered
  instruction and their handler.

Other arguments (``co_consts``/``co_names`` indices, counts, flags) stay as the raw ``arg``
number: the assembler keeps those tables in the same order. EXTENDED_ARG prefixes and inline
CACHE units are not instructions here; the assembler recreates them.
"""

from __future__ import annotations

import bisect
import dis
from dataclasses import dataclass, field
from types import CodeType
from typing import Any

from . import versions

__all__ = ["Instruction", "ExceptionTableEntry", "decode", "parse_exception_table", "local_names"]

_EXTENDED_ARG = dis.opmap["EXTENDED_ARG"]
_CACHE = dis.opmap["CACHE"]


@dataclass(eq=False)
class Instruction:
    """One bytecode instruction.

    Attributes:
        opcode: the opcode number (``dis.opmap``).
        arg: the numeric argument, or ``None`` for opcodes without one. For jumps and local
            ops the assembler recomputes it from ``target``/``argval``.
        argval: for local ops the variable name (or a tuple of two names for the fused 3.13
            ops); otherwise whatever is convenient for a reader (not used by the assembler).
        target: the instruction a jump goes to (``None`` for non-jumps).
        offset: the byte offset in the decoded code object (``None`` for new instructions).
        positions: ``(line, end line, column, end column)`` as ``co_positions()`` gives them, or ``None``.
    """

    opcode: int
    arg: int | None = None
    argval: Any = None
    target: Instruction | None = None
    offset: int | None = None
    positions: Any = None

    @property
    def opname(self) -> str:
        return dis.opname[self.opcode]

    @classmethod
    def make(cls, opname: str, arg: int | None = None, *, argval: Any = None, target=None, positions=None):
        """A new instruction by name (the shorthand the code generators use)."""
        op = dis.opmap[opname]
        if arg is None and versions.has_arg(op) and target is None and argval is None:
            arg = 0
        return cls(op, arg, argval, target, None, positions)

    def __repr__(self) -> str:
        where = f"@{self.offset}" if self.offset is not None else "@new"
        if self.target is not None:
            tgt = self.target.offset if self.target.offset is not None else "new"
            return f"<{self.opname} -> {tgt} {where}>"
        shown = self.argval if self.argval is not None else self.arg
        return f"<{self.opname} {shown!r} {where}>" if shown is not None else f"<{self.opname} {where}>"


@dataclass(eq=False)
class ExceptionTableEntry:
    """An exception-table row: instructions ``start`` .. ``end`` (inclusive) go to ``target``.

    ``depth`` is the stack depth the handler pops to; ``lasti`` whether the offset of the raising
    instruction is pushed before the exception.
    """

    start: Instruction
    end: Instruction
    target: Instruction
    depth: int
    lasti: bool


@dataclass(eq=False)
class Decoded:
    """The product of :func:`decode`."""

    code: CodeType
    instructions: list[Instruction]
    exception_table: list[ExceptionTableEntry] = field(default_factory=list)
    opcode_offsets: dict[int, int] = field(default_factory=dict)
    """Offset of an instruction's opcode unit (``dis``'s offset, after any EXTENDED_ARG) -> its
    ``offset`` (the first unit), for instructions with prefixes."""

    def at(self, offset: int) -> Instruction:
        """The instruction at byte ``offset`` of the original code (``KeyError`` if none starts there)."""
        offset = self.opcode_offsets.get(offset, offset)
        for ins in self.instructions:
            if ins.offset == offset:
                return ins
        raise KeyError(f"no instruction starts at offset {offset} of {self.code.co_name}")

    def index_of(self, offset: int) -> int:
        offset = self.opcode_offsets.get(offset, offset)
        for i, ins in enumerate(self.instructions):
            if ins.offset == offset:
                return i
        raise KeyError(f"no instruction starts at offset {offset} of {self.code.co_name}")


def local_names(code: CodeType) -> list[str]:
    """The frame's "localsplus" names in index order: locals, then cells, then free variables."""
    n = code.co_nlocals + len(code.co_cellvars) + len(code.co_freevars)
    # Cells that are also arguments share the argument's slot, so count by asking the code.
    names = []
    for i in range(n):
        try:
            names.append(code._varname_from_oparg(i))
        except IndexError:
            break
    return names


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    """Exception-table varint: 6 bits a byte, most significant chunk first, bit 6 = more."""
    b = data[pos]
    value = b & 63
    pos += 1
    while b & 64:
        b = data[pos]
        value = (value << 6) | (b & 63)
        pos += 1
    return value, pos


def parse_exception_table(code: CodeType) -> list[tuple[int, int, int, int, bool]]:
    """``co_exceptiontable`` as ``(start, end, target, depth, lasti)`` rows in byte offsets (end exclusive)."""
    data = code.co_exceptiontable
    rows = []
    pos = 0
    while pos < len(data):
        start, pos = _read_varint(data, pos)
        length, pos = _read_varint(data, pos)
        target, pos = _read_varint(data, pos)
        depth_lasti, pos = _read_varint(data, pos)
        rows.append((start * 2, (start + length) * 2, target * 2, depth_lasti >> 1, bool(depth_lasti & 1)))
    return rows


def _jump_target_offset(op: int, arg: int, offset: int) -> int:
    """Byte offset a jump at ``offset`` goes to: ``arg`` units from the end of its caches."""
    after = offset + 2 + 2 * versions.cache_entries(op)
    return after - 2 * arg if versions.is_backward_jump(op) else after + 2 * arg


def decode(code: CodeType) -> Decoded:
    """Decode ``code`` into instructions, jump targets and exception-table entries.

    Args:
        code: a code object compiled by this Python (3.11-3.13).

    Returns:
        A :class:`Decoded` with ``instructions`` in code order; each has the byte ``offset`` of
        its first unit (its first EXTENDED_ARG prefix, if any), which is where jumps land.

    Raises:
        RuntimeError: on an unsupported Python version.
    """
    versions.check_supported()
    raw = code.co_code
    names = local_names(code)
    positions = list(code.co_positions())
    instrs: list[Instruction] = []
    jumps: list[tuple[Instruction, int]] = []
    by_offset: dict[int, Instruction] = {}
    opcode_offsets: dict[int, int] = {}
    i = 0
    ext = 0
    start = None
    while i < len(raw):
        op, oparg = raw[i], raw[i + 1]
        if start is None:
            start = i
        if op == _EXTENDED_ARG:
            ext = (ext | oparg) << 8
            i += 2
            continue
        if op == _CACHE:  # stray cache unit (never reached: caches are skipped below)
            i += 2
            start = None
            continue
        arg = (ext | oparg) if versions.has_arg(op) else None
        ins = Instruction(op, arg, offset=start, positions=positions[i // 2])
        if op in versions.PACKED_LOCAL_OPS:
            ins.argval = (names[arg >> 4], names[arg & 15])
        elif op in versions.LOCAL_OPS or op in versions.CELL_OPS:
            ins.argval = names[arg]
        elif versions.is_jump(op):
            jumps.append((ins, _jump_target_offset(op, arg, i)))
        instrs.append(ins)
        by_offset[start] = ins
        if i != start:
            opcode_offsets[i] = start
        i += 2 + 2 * versions.cache_entries(op)
        ext = 0
        start = None
    for ins, tgt in jumps:
        ins.target = by_offset[tgt]
    table = []
    starts = [ins.offset for ins in instrs]
    for start_off, end_off, target_off, depth, lasti in parse_exception_table(code):
        first = bisect.bisect_left(starts, start_off)
        last = bisect.bisect_left(starts, end_off) - 1
        table.append(ExceptionTableEntry(instrs[first], instrs[last], by_offset[target_off], depth, lasti))
    return Decoded(code, instrs, table, opcode_offsets)
