"""Data-flow facts about bytecode: the stack depth before an instruction and the live locals.

Both are classic analyses over the control-flow graph whose edges are fall-through, jumps and
exception-table entries (an instruction inside a ``try`` range may continue at its handler, with
the stack cut to the entry's depth plus the pushed exception, and ``lasti`` before it).

- :func:`stack_depth_at` walks forward from the entry with :func:`dis.stack_effect`; the CPython
  compiler guarantees every path reaches an instruction with the same depth.
- :func:`live_locals_at` is a backward liveness analysis: a local is live at an instruction if
  some path from there reads it before writing it. These are the values a continuation function
  needs; the others are dead (rewritten before any read, or never read again).
"""

from __future__ import annotations

import dis
import functools
from collections.abc import Sequence
from types import CodeType

from . import versions
from .instructions import ExceptionTableEntry, Instruction, decode

__all__ = [
    "stack_depth_at",
    "live_locals_at",
    "stack_depths",
    "max_stack_depth",
    "live_locals",
    "successors",
    "normally_reachable",
    "implicit_first_argument",
]


def _effect(ins: Instruction, jump: bool) -> int:
    return versions.stack_effect(ins.opcode, ins.arg, jump)


def _coverage(instructions: Sequence[Instruction], table: Sequence[ExceptionTableEntry]):
    """index -> exception-table entries covering that instruction."""
    index = {id(ins): i for i, ins in enumerate(instructions)}
    cover: dict[int, list[ExceptionTableEntry]] = {}
    for entry in table:
        for i in range(index[id(entry.start)], index[id(entry.end)] + 1):
            cover.setdefault(i, []).append(entry)
    return index, cover


def successors(instructions, table, i, depth, index=None, cover=None):
    """``(index, depth)`` of every instruction control can reach from instruction ``i``.

    ``depth`` is the stack depth before instruction ``i``. Normal successors (fall-through, jump)
    come first, then exception handlers.
    """
    if index is None:
        index, cover = _coverage(instructions, table)
    ins = instructions[i]
    out = []
    if ins.opcode not in versions.TERMINATORS and i + 1 < len(instructions):
        out.append((i + 1, depth + _effect(ins, jump=False)))
    if versions.is_jump(ins.opcode):
        out.append((index[id(ins.target)], depth + _effect(ins, jump=True)))
    for entry in cover.get(i, ()):
        out.append((index[id(entry.target)], entry.depth + 1 + int(entry.lasti)))
    return out


def stack_depths(instructions: Sequence[Instruction], table: Sequence[ExceptionTableEntry]) -> list[int | None]:
    """The stack depth before each instruction (``None`` where unreachable from the entry).

    Raises:
        ValueError: two paths reach an instruction with different depths (malformed code).
    """
    index, cover = _coverage(instructions, table)
    depths: list[int | None] = [None] * len(instructions)
    if not instructions:
        return depths
    depths[0] = 0
    work = [0]
    while work:
        i = work.pop()
        for j, d in successors(instructions, table, i, depths[i], index, cover):
            if depths[j] is None:
                depths[j] = d
                work.append(j)
            elif depths[j] != d:
                raise ValueError(
                    f"inconsistent stack depth at {instructions[j]!r}: {depths[j]} and {d} "
                    f"(reached from {instructions[i]!r})"
                )
    return depths


def normally_reachable(instructions: Sequence[Instruction], start: int = 0) -> list[bool]:
    """Which instructions ``instructions[start]`` reaches (itself included) without an exception edge."""
    index = {id(ins): i for i, ins in enumerate(instructions)}
    seen = [False] * len(instructions)
    work = [start] if instructions else []
    while work:
        i = work.pop()
        if seen[i]:
            continue
        seen[i] = True
        ins = instructions[i]
        if ins.opcode not in versions.TERMINATORS and i + 1 < len(instructions):
            work.append(i + 1)
        if versions.is_jump(ins.opcode):
            work.append(index[id(ins.target)])
    return seen


def max_stack_depth(instructions: Sequence[Instruction], table: Sequence[ExceptionTableEntry]) -> int:
    """The largest stack depth any reachable instruction needs (``co_stacksize``)."""
    depths = stack_depths(instructions, table)
    index, cover = _coverage(instructions, table)
    top = 0
    for i, d in enumerate(depths):
        if d is None:
            continue
        top = max(top, d)
        for _, after in successors(instructions, table, i, d, index, cover):
            top = max(top, after)
    return top


# --- liveness ----------------------------------------------------------------------------
_READS = frozenset(
    dis.opmap[n]
    for n in (
        "LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_FAST_AND_CLEAR", "LOAD_DEREF", "LOAD_CLOSURE",
        "LOAD_CLASSDEREF", "LOAD_FROM_DICT_OR_DEREF", "MAKE_CELL",
    )
    if n in dis.opmap
)  # fmt: skip
_WRITES = frozenset(
    dis.opmap[n] for n in ("STORE_FAST", "DELETE_FAST", "STORE_DEREF", "DELETE_DEREF") if n in dis.opmap
)
_FUSED = {  # 3.13: (event of the first name, event of the second), in execution order
    "LOAD_FAST_LOAD_FAST": ("use", "use"),
    "STORE_FAST_LOAD_FAST": ("def", "use"),
    "STORE_FAST_STORE_FAST": ("def", "def"),
}


def _events(ins: Instruction) -> list[tuple[str, str]]:
    """The local reads ("use") and writes ("def") of one instruction, in execution order."""
    op = ins.opcode
    if op in _READS:
        return [("use", ins.argval)]
    if op in _WRITES:
        return [("def", ins.argval)]
    fused = _FUSED.get(ins.opname)
    if fused:
        return list(zip(fused, ins.argval))
    return []


def _gen_kill(events, bit) -> tuple[int, int]:
    """The instruction's effect on a live set as bit masks: ``live_in = (live_out & ~kill) | gen``."""
    gen = kill = 0
    for kind, name in reversed(events):
        b = bit[name]
        if kind == "use":
            gen |= b
        else:
            kill |= b
            gen &= ~b
    return gen, kill


def live_locals(instructions: Sequence[Instruction], table: Sequence[ExceptionTableEntry]) -> list[frozenset]:
    """For each instruction, the set of local names live just before it."""
    names, masks = _live_masks(instructions, table)
    return [_names_of(mask, names) for mask in masks]


def _names_of(mask: int, names: list[str]) -> frozenset:
    return frozenset(name for k, name in enumerate(names) if mask >> k & 1)


def _live_masks(instructions: Sequence[Instruction], table: Sequence[ExceptionTableEntry]):
    """Liveness as one bit mask per instruction over ``names`` (returned with them).

    A backward worklist analysis, where the exception handlers of an instruction count as its
    successors too: an exception can leave the instruction before its write happens.
    """
    index, cover = _coverage(instructions, table)
    n = len(instructions)
    events = [_events(ins) for ins in instructions]
    names = sorted({name for evs in events for _, name in evs})
    bit = {name: 1 << k for k, name in enumerate(names)}
    gen_kill = [_gen_kill(evs, bit) for evs in events]
    normal: list[list[int]] = []
    handlers: list[list[int]] = []
    preds: list[list[int]] = [[] for _ in range(n)]
    for i, ins in enumerate(instructions):
        succ = []
        if ins.opcode not in versions.TERMINATORS and i + 1 < n:
            succ.append(i + 1)
        if versions.is_jump(ins.opcode):
            succ.append(index[id(ins.target)])
        normal.append(succ)
        handlers.append([index[id(e.target)] for e in cover.get(i, ())])
        for j in succ + handlers[-1]:
            preds[j].append(i)
    live_in = [0] * n
    work = list(range(n))  # popped from the end: the last instruction first
    queued = [True] * n
    while work:
        i = work.pop()
        queued[i] = False
        out = 0
        for j in normal[i]:
            out |= live_in[j]
        gen, kill = gen_kill[i]
        new = (out & ~kill) | gen
        for h in handlers[i]:
            new |= live_in[h]
        if new != live_in[i]:
            live_in[i] = new
            for p in preds[i]:
                if not queued[p]:
                    queued[p] = True
                    work.append(p)
    return names, live_in


@functools.lru_cache(maxsize=512)
def _analyse(code: CodeType):
    dec = decode(code)
    depths = stack_depths(dec.instructions, dec.exception_table)
    live = _live_masks(dec.instructions, dec.exception_table)
    offsets = {ins.offset: i for i, ins in enumerate(dec.instructions)}
    # dis reports an instruction with EXTENDED_ARG prefixes at its opcode unit: accept that too
    offsets.update({op: offsets[start] for op, start in dec.opcode_offsets.items()})
    return dec, depths, live, offsets


def _index(code: CodeType, offset: int) -> int:
    offsets = _analyse(code)[3]
    try:
        return offsets[offset]
    except KeyError:
        raise ValueError(f"offset {offset} is not the start of an instruction of {code.co_name}") from None


def implicit_first_argument(code: CodeType) -> str | None:
    """The argument zero-argument ``super()`` reads from the frame's first slot, if ``code`` may call it.

    ``super()`` without arguments takes its object from local slot 0 and its class from the
    ``__class__`` cell, without a ``LOAD_FAST`` the liveness analysis could see.
    """
    if "__class__" in code.co_freevars and code.co_argcount + code.co_kwonlyargcount > 0:
        return code.co_varnames[0]
    return None


def stack_depth_at(code: CodeType, offset: int) -> int:
    """Number of values on the stack just before the instruction at byte ``offset`` of ``code``.

    Args:
        code: a code object of this Python.
        offset: the byte offset of an instruction (``dis.Instruction.offset``; for an
            instruction with EXTENDED_ARG prefixes, the first prefix's offset or the opcode's).

    Raises:
        ValueError: ``offset`` is not an instruction start, or is unreachable from the entry.

    Example:
        >>> from ember._dynamo.bytecode import stack_depth_at
        >>> def f(x):
        ...     for v in x:
        ...         print(v)
        >>> stack_depth_at(f.__code__, 0)
        0
    """
    i = _index(code, offset)
    depth = _analyse(code)[1][i]
    if depth is None:
        raise ValueError(f"offset {offset} of {code.co_name} is unreachable")
    return depth


def live_locals_at(code: CodeType, offset: int) -> tuple[str, ...]:
    """Locals (and cell variables) some path from ``offset`` reads before writing.

    Capturing a cell variable in a closure (``LOAD_CLOSURE``) counts as reading it, and in a
    method that may call zero-argument ``super()`` (it has a ``__class__`` free variable) the first
    argument is always live: ``super()`` reads it from the frame. Free variables (read from the
    closure) are not included. The names come in the frame's local
    order (``co_varnames``, then the cell variables).

    Raises:
        ValueError: ``offset`` is not an instruction start.
    """
    names, masks = _analyse(code)[2]
    live = _names_of(masks[_index(code, offset)], names)
    first = implicit_first_argument(code)
    if first is not None:
        live = live | {first}
    order = list(code.co_varnames) + [c for c in code.co_cellvars if c not in code.co_varnames]
    return tuple(name for name in order if name in live)
