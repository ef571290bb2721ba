"""Continuation functions: how a frame goes on after a graph break.

When the translator meets an instruction it cannot trace, the runtime runs the graph captured
so far, then calls a *break function* with the values that were on the interpreter stack and
the live local variables. The break function runs the one untraceable instruction natively and
then calls the *resume function* of the successor taken, which carries on with the rest of the
original function's bytecode. Resume functions are ordinary Python functions, so the runtime
compiles them like the user's own: tracing resumes after the break.

Both are copies of the original code object with a new prologue:

- parameters ``___stack0 .. ___stack{n-1}``, then the live locals by name;
- the prologue pushes the stack parameters back onto the stack (the :data:`NULL` sentinel
  becomes a real NULL, as CPython's call sequences need), leaves a local passed as
  :data:`NULL` unbound, and jumps to the instruction where execution goes on.

Because the whole original body is kept, jumps, loops, ``try`` handlers and ``with`` blocks
after the entry point behave as in the original, as long as the stack values passed are the
real ones (inside a ``with`` block that includes the context manager's bound ``__exit__``).

A break function additionally replaces what follows the untraceable instruction with a call to
the resume function of each successor; if the instruction raises, the original exception
handlers run natively (the rest of the frame then runs eagerly, which is correct if slower).
"""

from __future__ import annotations

import dis
from dataclasses import dataclass
from types import CodeType, FunctionType

from .bytecode import analysis, versions
from .bytecode.assemble import assemble
from .bytecode.instructions import Instruction, decode

__all__ = [
    "NULL",
    "CannotResume",
    "Successor",
    "BreakPlan",
    "plan_graph_break",
    "make_resume_function",
    "make_break_function",
    "clear_cache",
    "reset",
]

_CO_GENERATOR_LIKE = 0x20 | 0x80 | 0x100 | 0x200  # GENERATOR, COROUTINE, ITERABLE_COROUTINE, ASYNC_GENERATOR
_CO_VARARGS = 0x04
_CO_VARKEYWORDS = 0x08


class _NullType:
    """The type of :data:`NULL`."""

    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "NULL"

    def __reduce__(self):
        return "NULL"


NULL = _NullType()
"""Stands for a stack slot holding C ``NULL`` (the marker of a call sequence: ``PUSH_NULL``,
``LOAD_GLOBAL``/``LOAD_ATTR`` with their NULL bit, 3.12's ``LOAD_FAST_AND_CLEAR`` of an unbound
local) or for a live local that is unbound. Pass it among the stack values or local values of a
break/resume function; the function's prologue turns it back into NULL or an unbound local."""


class CannotResume(Exception):
    """A graph break at this instruction cannot be continued (the frame should run eagerly).

    Raised for generator and coroutine frames, for instructions whose continuation this module
    does not support (``SEND``, offsets reached only through an exception handler), and where a
    cell variable shared with an earlier closure is assigned after the break; the message says which.
    """


@dataclass(frozen=True)
class Successor:
    """Where execution may continue after the break instruction."""

    offset: int
    stack_depth: int
    live_locals: tuple[str, ...]


@dataclass(frozen=True)
class BreakPlan:
    """What the runtime needs to continue a frame after a graph break at ``offset``.

    Attributes:
        code: the code object of the broken frame.
        offset: byte offset of the instruction that cannot be traced (for a call, the first
            instruction of its group: 3.11/3.12 ``KW_NAMES`` and 3.11 ``PRECALL`` go with
            their ``CALL``).
        stack_depth: number of stack values before that instruction.
        live_locals: the locals the break function takes (after the stack values).
        successors: one (falls through), two (a conditional jump: fall-through first, then
            the jump target), or none (the instruction returns or raises).
    """

    code: CodeType
    offset: int
    stack_depth: int
    live_locals: tuple[str, ...]
    successors: tuple[Successor, ...]


def _check_code(code: CodeType) -> None:
    if not isinstance(code, CodeType):
        raise TypeError(f"expected a code object, got {type(code).__name__}")
    if code.co_flags & _CO_GENERATOR_LIKE:
        raise CannotResume(f"{code.co_name} is a generator or coroutine; its frame cannot be resumed")


def _group(instrs: list[Instruction], i: int) -> tuple[int, int]:
    """Indices (first, last) of the instructions that must run together with instruction ``i``.

    3.11's ``KW_NAMES; PRECALL n; CALL n`` and 3.12's ``KW_NAMES; CALL n`` run as one unit.
    """
    first = last = i
    lead = {versions.KW_NAMES_OPCODE, versions.PRECALL_OPCODE} - {None}
    while instrs[last].opcode in lead and last + 1 < len(instrs):
        last += 1
    while first > 0 and instrs[first - 1].opcode in lead and instrs[first].opcode not in (versions.KW_NAMES_OPCODE,):
        first -= 1
    return first, last


_CELL_WRITES = ("STORE_DEREF", "DELETE_DEREF")


def _nested_writes(code: CodeType, name: str) -> bool:
    """Whether a function nested in ``code`` (at any depth) assigns the free variable ``name``."""
    for const in code.co_consts:
        if isinstance(const, CodeType) and name in const.co_freevars:
            if any(ins.opname in _CELL_WRITES and ins.argval == name for ins in decode(const).instructions):
                return True
            if _nested_writes(const, name):
                return True
    return False


def _shared_cell(code: CodeType, instrs: list[Instruction], at: int) -> str | None:
    """A cell variable whose identity a continuation at instruction ``at`` would break, if any.

    A continuation gets the *values* of cell variables and wraps them in new cells. That is
    wrong when a closure made before the break shares the cell and either side assigns the
    variable afterwards (the closure would not see the continuation's writes, or the other way
    round).
    """
    cells = set(code.co_cellvars)
    if not cells:
        return None
    after = analysis.normally_reachable(instrs, at)
    written_after = {ins.argval for i, ins in enumerate(instrs) if after[i] and ins.opname in _CELL_WRITES}
    for i, ins in enumerate(instrs):
        # closure capture: LOAD_CLOSURE (3.11/3.12); 3.13 builds the closure tuple with LOAD_FAST
        if ins.opname not in ("LOAD_CLOSURE", "LOAD_FAST") or ins.argval not in cells:
            continue
        name = ins.argval
        if analysis.normally_reachable(instrs, i)[at] and (name in written_after or _nested_writes(code, name)):
            return name
    return None


def plan_graph_break(code: CodeType, offset: int, stack_depth: int) -> BreakPlan:
    """Plan a graph break at the instruction at byte ``offset`` of ``code``.

    Args:
        code: the code object being translated.
        offset: byte offset of the instruction that cannot be traced.
        stack_depth: the number of values the translator has on its stack there (checked
            against the bytecode's own stack analysis).

    Returns:
        A :class:`BreakPlan` (its ``offset`` moves back to the start of a call group).

    Raises:
        CannotResume: a generator/coroutine frame, an instruction (``SEND``) whose continuation
            is not supported, an offset only an exception handler reaches, or a cell variable
            shared with a closure made before the break and assigned after it.
        ValueError: ``offset`` is not an instruction, or ``stack_depth`` disagrees with the
            bytecode analysis.
    """
    _check_code(code)
    dec, depths, live, offsets = analysis._analyse(code)
    if offset not in offsets:
        raise ValueError(f"offset {offset} is not the start of an instruction of {code.co_name}")
    first, last = _group(dec.instructions, offsets[offset])
    setup = dec.instructions[first].opname
    if setup in ("MAKE_CELL", "COPY_FREE_VARS", "RESUME", "RETURN_GENERATOR"):
        raise ValueError(f"offset {offset} of {code.co_name} is frame set-up ({setup}), not a break point")
    expected = depths[first]
    if expected is None:
        raise ValueError(f"offset {offset} of {code.co_name} is unreachable")
    if stack_depth != expected:
        raise ValueError(
            f"stack_depth={stack_depth} at offset {offset} of {code.co_name}, but the bytecode has {expected} "
            f"values on the stack there"
        )
    if not analysis.normally_reachable(dec.instructions)[first]:
        raise CannotResume(
            f"offset {offset} of {code.co_name} is only reached through an exception handler; "
            "a continuation cannot re-create the handler's state"
        )
    shared = _shared_cell(code, dec.instructions, first)
    if shared is not None:
        raise CannotResume(
            f"cell variable {shared!r} of {code.co_name} is shared with a closure made before the break and "
            "assigned afterwards; a continuation would split the cell"
        )
    end = dec.instructions[last]
    if end.opname == "SEND":
        raise CannotResume(f"a graph break at {end.opname} (offset {end.offset}) cannot be continued")
    succ_idx = []
    if end.opcode not in versions.TERMINATORS:
        succ_idx.append(last + 1)
    if end.opname == "FOR_ITER":  # an exhausted iterator lands a fixed distance after the target
        succ_idx.append(offsets[end.target.offset] + versions.FOR_ITER_EXIT_SKIP)
    elif versions.is_jump(end.opcode):
        succ_idx.append(offsets[end.target.offset])
    successors = tuple(
        Successor(dec.instructions[j].offset, depths[j], analysis.live_locals_at(code, dec.instructions[j].offset))
        for j in succ_idx
    )
    return BreakPlan(
        code=code,
        offset=dec.instructions[first].offset,
        stack_depth=expected,
        live_locals=analysis.live_locals_at(code, dec.instructions[first].offset),
        successors=successors,
    )


# --- code generation helpers -----------------------------------------------------------------
def _I(opname: str, arg: int | None = None, **kw) -> Instruction:
    return Instruction.make(opname, arg, **kw)


def _load_local(name: str, cells: frozenset[str], checked: bool = False) -> Instruction:
    if name in cells:
        return _I("LOAD_DEREF", argval=name)
    return _I(versions.LOAD_FAST_CHECKED if checked else "LOAD_FAST", argval=name)


def _push_maybe_null(name: str, null_const: int) -> list[Instruction]:
    """Push local ``name``, or a real NULL if it holds the :data:`NULL` sentinel."""
    push_null = _I("PUSH_NULL")
    done = _I("NOP")
    return [
        _I("LOAD_FAST", argval=name),
        _I("LOAD_CONST", null_const),
        _I("IS_OP", 0),
        _I(versions.POP_JUMP_IF_TRUE, target=push_null),
        _I("LOAD_FAST", argval=name),
        _I("JUMP_FORWARD", target=done),
        push_null,
        done,
    ]


def _unbind_if_null(name: str, cells: frozenset[str], null_const: int) -> list[Instruction]:
    """Leave local ``name`` unbound if it was passed as the :data:`NULL` sentinel."""
    done = _I("NOP")
    return [
        _load_local(name, cells),
        _I("LOAD_CONST", null_const),
        _I("IS_OP", 0),
        _I(versions.POP_JUMP_IF_FALSE, target=done),
        _I("DELETE_DEREF" if name in cells else "DELETE_FAST", argval=name),
        done,
    ]


def _cell_value(cell):
    """A cell's contents, or :data:`NULL` for an empty cell (what a resume function takes)."""
    try:
        return cell.cell_contents
    except ValueError:
        return NULL


def _prefix(code: CodeType) -> list[Instruction]:
    """The frame set-up: cells (wrapping a cell parameter's value), free variables, RESUME.

    Resume functions are traced by the translator like user code, so no prologue makes calls.
    """
    out = [_I("MAKE_CELL", argval=name) for name in code.co_cellvars]
    if code.co_freevars:
        out.append(_I("COPY_FREE_VARS", len(code.co_freevars)))
    out.append(_I("RESUME", 0))
    return out


def _strip_prefix(instrs: list[Instruction]) -> list[Instruction]:
    """The body without its original set-up (it is replaced by the new prologue)."""
    setup = {dis.opmap["MAKE_CELL"], dis.opmap["COPY_FREE_VARS"]}
    i = 0
    while i < len(instrs) and instrs[i].opcode in setup:
        i += 1
    if i < len(instrs) and instrs[i].opname == "RESUME":
        i += 1
    return instrs[i:]


def _call_expr(callable_const: int, arg_loads: list[Instruction], nargs: int | None = None) -> list[Instruction]:
    """Call the constant ``callable_const`` with the ``nargs`` values ``arg_loads`` push (default:
    one instruction per value); the result is left on the stack."""
    n = len(arg_loads) if nargs is None else nargs
    if versions.CALL_STYLE == "null_first":
        head = [_I("PUSH_NULL"), _I("LOAD_CONST", callable_const)]
    else:
        head = [_I("LOAD_CONST", callable_const), _I("PUSH_NULL")]
    call = [_I("PRECALL", n), _I("CALL", n)] if versions.PRECALL_OPCODE is not None else [_I("CALL", n)]
    return head + arg_loads + call


def _call(callable_const: int, arg_loads: list[Instruction], nargs: int) -> list[Instruction]:
    """Call the constant ``callable_const`` with the ``nargs`` values ``arg_loads`` push; return the result."""
    return _call_expr(callable_const, arg_loads, nargs) + [_I("RETURN_VALUE")]


def _line_of(ins: Instruction, code: CodeType) -> int:
    line = ins.positions[0] if ins.positions else None
    return line if line is not None else code.co_firstlineno


def _new_code(code, body, table, params, extra_locals, consts, name, line):
    # Generated instructions get a line (``line``: where execution continues): an exception
    # passing through them then has a traceback line, which tools such as pytest require.
    for ins in body:
        if ins.offset is None and ins.positions is None:
            ins.positions = (line, line, None, None)
    rest = [v for v in code.co_varnames if v not in params]
    params = list(params)
    first = analysis.implicit_first_argument(code)
    if first is not None and first in params and params[0] != first:
        # Zero-argument super() reads local slot 0: give that slot the first argument's name. The
        # caller's first value lands there, so the prologue swaps it with the first argument's value
        # (before MAKE_CELL, in case the argument is a cell variable).
        i = params.index(first)
        params[0], params[i] = params[i], params[0]
        body = [
            _I("LOAD_FAST", argval=params[0]),
            _I("LOAD_FAST", argval=params[i]),
            _I("STORE_FAST", argval=params[0]),
            _I("STORE_FAST", argval=params[i]),
        ] + list(body)
    varnames = tuple(params) + tuple(rest) + tuple(v for v in extra_locals if v not in rest)
    flags = code.co_flags & ~(_CO_VARARGS | _CO_VARKEYWORDS)
    return assemble(
        body,
        table,
        template=code,
        co_varnames=varnames,
        co_argcount=len(params),
        co_posonlyargcount=0,
        co_kwonlyargcount=0,
        co_flags=flags,
        co_consts=consts,
        co_name=name,
        co_qualname=name,
    )


# --- resume functions ------------------------------------------------------------------------
_RESUME_CACHE: dict[tuple, CodeType] = {}


def clear_cache() -> None:
    """Forget the cached resume code objects (``ember._dynamo.reset`` calls this)."""
    _RESUME_CACHE.clear()
    analysis._analyse.cache_clear()


reset = clear_cache


def _resume_code(code: CodeType, offset: int, stack_depth: int, live: tuple[str, ...], name: str) -> CodeType:
    dec = decode(code)
    target = dec.at(offset)
    cells = frozenset(code.co_cellvars)
    null_const = len(code.co_consts)
    consts = code.co_consts + (NULL,)
    stack_params = [f"___stack{i}" for i in range(stack_depth)]
    prologue = _prefix(code)
    for local in live:
        prologue += _unbind_if_null(local, cells, null_const)
    for p in stack_params:
        prologue += _push_maybe_null(p, null_const)
    body = _strip_prefix(dec.instructions)
    if target not in body:  # resuming at the frame set-up: it is redone by the prologue
        target = body[0]
    prologue.append(_I("JUMP_FORWARD", target=target))
    body = prologue + body
    params = stack_params + list(live)
    return _new_code(code, body, dec.exception_table, params, (), consts, name, _line_of(target, code))


def make_resume_function(
    code: CodeType, successor: Successor, f_globals: dict, closure=None, name: str | None = None
) -> FunctionType:
    """A function that continues ``code`` at ``successor.offset``.

    Args:
        code: the original code object.
        successor: where to continue, with the stack depth and live locals there
            (from :func:`plan_graph_break`).
        f_globals: the globals of the original function.
        closure: the original function's ``__closure__`` (cells for ``code.co_freevars``).
        name: the new function's name (default ``<name>__resume_at_<offset>``).

    Returns:
        A function taking ``___stack0 .. ___stack{n-1}`` then the live locals, positionally;
        it returns what the original function would return from that point. Code objects are
        cached per (code, offset, stack depth, live locals).

    Raises:
        CannotResume: ``code`` is a generator or coroutine.

    Example:
        >>> import dis
        >>> from ember._dynamo.bytecode import live_locals_at
        >>> from ember._dynamo.resume import Successor, make_resume_function
        >>> def f(a, b):
        ...     c = a + b
        ...     return c * 2
        >>> at = [i.offset for i in dis.get_instructions(f) if i.opname.startswith("LOAD_FAST")][-1]
        >>> where = Successor(at, 0, live_locals_at(f.__code__, at))
        >>> where.live_locals
        ('c',)
        >>> make_resume_function(f.__code__, where, globals())(21)
        42
    """
    _check_code(code)
    if len(code.co_freevars) != len(closure or ()):
        raise ValueError(f"{code.co_name} has {len(code.co_freevars)} free variables, closure has {len(closure or ())}")
    name = name or f"{code.co_name}__resume_at_{successor.offset}"
    key = (code, successor.offset, successor.stack_depth, tuple(successor.live_locals), name)
    new = _RESUME_CACHE.get(key)
    if new is None:
        new = _resume_code(code, successor.offset, successor.stack_depth, tuple(successor.live_locals), name)
        _RESUME_CACHE[key] = new
    return FunctionType(new, f_globals, name, None, tuple(closure) if closure else None)


# --- break functions -------------------------------------------------------------------------
def _null_slots_consumed(group: list[Instruction]) -> int:
    """How many top stack values the group consumes that may legitimately be NULL (calls)."""
    end = group[-1]
    if end.opname == "CALL":
        return end.arg + 2
    if end.opname == "CALL_KW":
        return end.arg + 3
    if end.opname == "CALL_FUNCTION_EX":
        return 3 + (end.arg & 1)
    return 0


_METHOD_BIT_ATTR_LOADS = ("LOAD_ATTR", "LOAD_SUPER_ATTR")  # 3.12+: bit 0 of the argument asks for a method


def _null_free(end: Instruction, null_const: int) -> list[Instruction]:
    """Make ``end`` push the :data:`NULL` sentinel where it would push a real NULL.

    The stack after a break instruction is handed to the resume function as Python values, and a
    real NULL cannot be one. ``LOAD_GLOBAL``/``LOAD_ATTR``/``LOAD_SUPER_ATTR`` with their NULL
    (method) bit, 3.11's ``LOAD_METHOD`` and ``PUSH_NULL`` are rewritten to push the plain value
    (a bound method for a method) next to the sentinel, which the resume function's prologue
    turns back into NULL: the call that follows behaves the same. Returns instructions to run
    after ``end`` (``end`` is changed in place).
    """
    if end.opname == "PUSH_NULL":
        end.opcode, end.arg = dis.opmap["LOAD_CONST"], null_const
        return []
    if end.opname == "LOAD_METHOD":
        end.opcode = dis.opmap["LOAD_ATTR"]
    elif end.opname == "LOAD_GLOBAL" or (end.opname in _METHOD_BIT_ATTR_LOADS and versions.PY_VERSION >= (3, 12)):
        if not end.arg & 1:
            return []
        end.arg &= ~1
    else:
        return []
    if versions.CALL_STYLE == "null_first":
        return [_I("LOAD_CONST", null_const), _I("SWAP", 2)]
    return [_I("LOAD_CONST", null_const)]


def _is_bool_jump(ins: Instruction) -> bool:
    return ins.opname in ("POP_JUMP_IF_TRUE", "POP_JUMP_IF_FALSE")


def make_break_function(plan: BreakPlan, resume_callables, f_globals: dict, closure=None) -> FunctionType:
    """A function that runs the untraceable instruction of ``plan`` natively, then resumes.

    Args:
        plan: from :func:`plan_graph_break`.
        resume_callables: one callable per ``plan.successors`` entry, called as
            ``resume_callables[i](*stack_values, *live_local_values)`` for the successor taken
            (typically the compiled :func:`make_resume_function` of that successor).
        f_globals, closure: the original function's globals and ``__closure__``.

    Returns:
        A function taking ``___stack0 ..`` then ``plan.live_locals`` positionally, returning the
        frame's result. Stack values not consumed by the instruction, and locals passed as
        :data:`NULL`, are handed on to the resume callable as they came.

    Raises:
        ValueError: ``resume_callables`` does not match ``plan.successors``.
    """
    code = plan.code
    _check_code(code)
    if len(resume_callables) != len(plan.successors):
        raise ValueError(
            f"the plan has {len(plan.successors)} successors but {len(resume_callables)} resume callables were given"
        )
    dec = decode(code)
    instrs = dec.instructions
    first = dec.index_of(plan.offset)
    first, last = _group(instrs, first)
    group = instrs[first : last + 1]
    cells = frozenset(code.co_cellvars)
    null_const = len(code.co_consts)
    consts = list(code.co_consts) + [NULL, _cell_value]
    cell_value_const = null_const + 1
    stack_params = [f"___stack{i}" for i in range(plan.stack_depth)]
    n_nullable = min(_null_slots_consumed(group), plan.stack_depth)

    prologue = _prefix(code)
    for i, p in enumerate(stack_params):
        if i >= plan.stack_depth - n_nullable:
            prologue += _push_maybe_null(p, null_const)
        else:
            prologue.append(_I("LOAD_FAST", argval=p))  # handed on untouched (NULL stays the sentinel)
    entry = group[0]
    if versions.JUMP_NEEDS_EXACT_BOOL and _is_bool_jump(group[-1]):
        # 3.13's POP_JUMP_IF_TRUE/FALSE only test `is True`/`is False` (the compiler puts TO_BOOL or a
        # bool-coercing COMPARE_OP before them); the translator may hand over a tensor: convert it.
        entry = _I("TO_BOOL")
    prologue.append(_I("JUMP_FORWARD", target=entry))

    end = group[-1]
    stubs: list[Instruction] = []
    temps: list[str] = []
    successor_entry = {}
    for succ, fn in zip(plan.successors, resume_callables):
        consts.append(fn)
        tmp = [f"___tmp{j}" for j in range(succ.stack_depth)]
        temps = tmp if len(tmp) > len(temps) else temps
        stub = [_I("STORE_FAST", argval=t) for t in reversed(tmp)]
        loads = [_I(versions.LOAD_FAST_CHECKED, argval=t) for t in tmp]
        for n in succ.live_locals:  # a cell's value, NULL if empty (LOAD_DEREF would raise)
            if n in cells:
                loads += _call_expr(cell_value_const, [_I(versions.LOAD_CELL_OBJECT, argval=n)])
            else:
                loads.append(_load_local(n, cells, checked=True))
        stub += _call(len(consts) - 1, loads, len(tmp) + len(succ.live_locals))
        successor_entry[succ.offset] = stub[0]
        stubs += stub

    body = _strip_prefix(instrs)
    if entry is not group[0]:
        body.insert(body.index(group[0]), entry)
        for row in dec.exception_table:  # the conversion raises where the jump would: same handler
            if row.start is group[0]:
                row.start = entry
    at = body.index(end) + 1
    fix = _null_free(end, null_const)
    body[at:at] = fix
    at += len(fix)
    if end.opcode not in versions.TERMINATORS:
        fall = instrs[last + 1]
        body.insert(at, _I("JUMP_FORWARD", target=successor_entry[fall.offset]))
    if end.opname == "FOR_ITER" and versions.FOR_ITER_EXIT_SKIP:
        # 3.12/3.13 land past END_FOR (and POP_TOP) without executing them: put the jump to the
        # exhausted-iterator stub exactly where they land; other jumps there still go to `landing`.
        landing = instrs[instrs.index(end.target) + versions.FOR_ITER_EXIT_SKIP]
        body.insert(body.index(landing), _I("JUMP_FORWARD", target=successor_entry[landing.offset]))
    elif versions.is_jump(end.opcode):
        end.target = successor_entry[end.target.offset]
    body = prologue + body + stubs
    name = f"{code.co_name}__break_at_{plan.offset}"
    params = stack_params + list(plan.live_locals)
    new = _new_code(code, body, dec.exception_table, params, temps, tuple(consts), name, _line_of(end, code))
    return FunctionType(new, f_globals, name, None, tuple(closure) if closure else None)
