"""Assemble :class:`~.instructions.Instruction` lists back into a runnable ``CodeType``.

The assembler computes everything that depends on the final layout: local-variable indices
from names, relative jump arguments (flipping a 3.11 jump's direction when its target moved to
the other side), EXTENDED_ARG prefixes (iterated to a fixed point, since a prefix moves the
code after it), inline CACHE units, the exception table, the location table and the stack size.
"""

from __future__ import annotations

import dis
from collections.abc import Sequence
from types import CodeType

from . import analysis, versions
from .instructions import ExceptionTableEntry, Instruction

__all__ = ["assemble", "encode_exception_table", "encode_location_table", "localsplus_layout"]

_EXTENDED_ARG = dis.opmap["EXTENDED_ARG"]
_CACHE = dis.opmap["CACHE"]


def localsplus_layout(varnames: Sequence[str], cellvars: Sequence[str], freevars: Sequence[str]) -> dict[str, int]:
    """Name -> index in the frame's "localsplus" array, as ``CodeType`` lays it out.

    Locals come first; a cell variable that is also a local (an argument captured by a closure)
    shares the local's slot; the remaining cells follow, then the free variables.
    """
    layout = {name: i for i, name in enumerate(varnames)}
    for name in cellvars:
        if name not in layout:
            layout[name] = len(layout)
    for name in freevars:
        layout[name] = len(layout)
    return layout


def _ext_count(arg: int | None) -> int:
    if arg is None or arg < 0x100:
        return 0
    if arg < 0x10000:
        return 1
    if arg < 0x1000000:
        return 2
    return 3


_UNFUSED = {
    "LOAD_FAST_LOAD_FAST": ("LOAD_FAST", "LOAD_FAST"),
    "STORE_FAST_LOAD_FAST": ("STORE_FAST", "LOAD_FAST"),
    "STORE_FAST_STORE_FAST": ("STORE_FAST", "STORE_FAST"),
}


def _split_fused(
    instructions: Sequence[Instruction], table: Sequence[ExceptionTableEntry], layout: dict[str, int]
) -> list[Instruction]:
    """3.13's fused local ops hold two 4-bit indices: split those whose locals moved past 15.

    The instruction keeps its identity as the first half (jumps to it stay valid); an
    exception-table range ending at it is extended to the new second half.
    """
    out = []
    for ins in instructions:
        halves = _UNFUSED.get(ins.opname)
        if halves is None or all(layout.get(n, 99) <= 15 for n in ins.argval):
            out.append(ins)
            continue
        first, second = ins.argval
        ins.opcode, ins.argval = dis.opmap[halves[0]], first
        extra = Instruction(dis.opmap[halves[1]], None, second, positions=ins.positions)
        out += [ins, extra]
        for entry in table:
            if entry.end is ins:
                entry.end = extra
    return out


def _resolve_local_args(instructions: Sequence[Instruction], layout: dict[str, int]) -> None:
    for ins in instructions:
        op = ins.opcode
        if op in versions.PACKED_LOCAL_OPS:
            first, second = (layout[n] for n in ins.argval)
            ins.arg = (first << 4) | second
        elif op in versions.LOCAL_OPS or op in versions.CELL_OPS:
            try:
                ins.arg = layout[ins.argval]
            except KeyError:
                raise ValueError(f"{ins.opname} names {ins.argval!r}, which is not a local of the code") from None


def _layout_jumps(instructions: Sequence[Instruction]) -> tuple[dict[int, int], dict[int, int]]:
    """Fix jump arguments and prefixes; returns id -> byte offset of the first unit, id -> prefix count."""
    for ins in instructions:
        if versions.is_jump(ins.opcode) and ins.target is None:
            raise ValueError(f"jump {ins.opname} has no target")
        if versions.is_jump(ins.opcode) and ins.arg is None:
            ins.arg = 0
    ext = {id(ins): _ext_count(ins.arg) for ins in instructions}
    while True:
        offsets: dict[int, int] = {}
        pos = 0
        for ins in instructions:
            offsets[id(ins)] = pos
            pos += 2 * (ext[id(ins)] + 1 + versions.cache_entries(ins.opcode))
        changed = False
        for ins in instructions:
            if not versions.is_jump(ins.opcode):
                continue
            here = offsets[id(ins)] + 2 * ext[id(ins)]
            after = here + 2 + 2 * versions.cache_entries(ins.opcode)
            try:
                target = offsets[id(ins.target)]
            except KeyError:
                raise ValueError(f"{ins!r} jumps to an instruction that is not in the code") from None
            backward = target < after
            if backward != versions.is_backward_jump(ins.opcode):
                ins.opcode = versions.flip_jump_direction(ins.opcode)
                changed = True
                after = here + 2 + 2 * versions.cache_entries(ins.opcode)
            ins.arg = (after - target) // 2 if backward else (target - after) // 2
            need = _ext_count(ins.arg)
            if need > ext[id(ins)]:  # only grow, so the loop terminates
                ext[id(ins)] = need
                changed = True
        if not changed:
            return offsets, ext


def encode_exception_table(rows: Sequence[tuple[int, int, int, int, bool]]) -> bytes:
    """Encode ``(start, end, target, depth, lasti)`` rows (byte offsets, end exclusive)."""
    out = bytearray()

    def varint(value: int, first: bool = False) -> None:
        chunks = [value & 63]
        value >>= 6
        while value:
            chunks.append(value & 63)
            value >>= 6
        chunks.reverse()
        for i, chunk in enumerate(chunks):
            if i < len(chunks) - 1:
                chunk |= 64
            if first and i == 0:
                chunk |= 128
            out.append(chunk)

    for start, end, target, depth, lasti in sorted(rows):
        varint(start // 2, first=True)
        varint((end - start) // 2)
        varint(target // 2)
        varint((depth << 1) | int(lasti))
    return bytes(out)


def encode_location_table(entries: Sequence[tuple[int, object]], firstlineno: int) -> bytes:
    """Encode ``(units, positions)`` pairs into a PEP 626/657 location table.

    Every entry uses the "long" form (or the "no column"/"no location" forms when the positions
    lack those), which is valid on 3.11-3.13 and keeps the encoder short.
    """
    out = bytearray()

    def varint(value: int) -> None:
        while value >= 64:
            out.append(64 | (value & 63))
            value >>= 6
        out.append(value)

    def svarint(value: int) -> None:
        varint((-value << 1) | 1 if value < 0 else value << 1)

    line = firstlineno
    for units, pos in entries:
        while units > 0:
            n = min(units, 8)
            units -= n
            lineno, end_lineno, col, end_col = pos if pos is not None else (None,) * 4
            if lineno is None:
                out.append(0x80 | (15 << 3) | (n - 1))
                continue
            delta = lineno - line
            line = lineno
            if col is None or end_col is None or end_lineno is None or end_lineno < lineno:
                out.append(0x80 | (13 << 3) | (n - 1))
                svarint(delta)
            else:
                out.append(0x80 | (14 << 3) | (n - 1))
                svarint(delta)
                varint(end_lineno - lineno)
                varint(col + 1)
                varint(end_col + 1)
    return bytes(out)


def assemble(
    instructions: Sequence[Instruction],
    exception_table: Sequence[ExceptionTableEntry],
    *,
    template: CodeType,
    **replace,
) -> CodeType:
    """Build a code object from instructions, taking unspecified fields from ``template``.

    Args:
        instructions: the instructions in code order. Their ``arg`` is updated in place for
            jumps and local ops (and a 3.11 jump's opcode flipped if its direction changed; a
            3.13 fused local op whose locals moved past index 15 split in two).
        exception_table: entries referring to instructions of ``instructions`` (an entry
            ending at a split instruction is extended in place).
        template: the code object whose remaining fields (names, consts, flags, ...) are kept.
        **replace: ``CodeType.replace`` keywords (``co_varnames``, ``co_consts``,
            ``co_argcount``, ...) for fields that differ from the template's.

    Returns:
        The new ``CodeType``; ``co_stacksize`` is computed from the instructions.

    Raises:
        ValueError: a local op names an unknown variable, a jump target is missing, or a
            3.12+ conditional jump would have to go backward.
    """
    varnames = replace.get("co_varnames", template.co_varnames)
    cellvars = replace.get("co_cellvars", template.co_cellvars)
    freevars = replace.get("co_freevars", template.co_freevars)
    firstlineno = replace.get("co_firstlineno", template.co_firstlineno)
    layout = localsplus_layout(varnames, cellvars, freevars)
    instructions = _split_fused(instructions, exception_table, layout)
    _resolve_local_args(instructions, layout)
    offsets, ext = _layout_jumps(instructions)

    code = bytearray()
    locations = []
    for ins in instructions:
        arg = ins.arg if ins.arg is not None else 0
        n_ext = ext[id(ins)]
        for shift in range(n_ext, 0, -1):
            code += bytes((_EXTENDED_ARG, (arg >> (8 * shift)) & 0xFF))
        code += bytes((ins.opcode, arg & 0xFF))
        caches = versions.cache_entries(ins.opcode)
        code += bytes((_CACHE, 0)) * caches
        locations.append((n_ext + 1 + caches, ins.positions))

    rows = []
    for entry in exception_table:
        end = entry.end
        end_off = offsets[id(end)] + 2 * (ext[id(end)] + 1 + versions.cache_entries(end.opcode))
        rows.append((offsets[id(entry.start)], end_off, offsets[id(entry.target)], entry.depth, entry.lasti))

    stacksize = analysis.max_stack_depth(instructions, exception_table)
    replace.setdefault("co_nlocals", len(varnames))
    return template.replace(
        co_code=bytes(code),
        co_linetable=encode_location_table(locations, firstlineno),
        co_exceptiontable=encode_exception_table(rows),
        co_stacksize=stacksize,
        **replace,
    )
