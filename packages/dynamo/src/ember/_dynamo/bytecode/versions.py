"""The one table of differences between the bytecode of CPython 3.11, 3.12 and 3.13.

Everything else in :mod:`ember._dynamo.bytecode` asks this module, never ``sys.version_info``,
so supporting a new Python means reading down this file. What the standard library already
knows (opcode numbers, which opcodes jump, how many inline CACHE units follow each opcode) is
read from :mod:`dis`/:mod:`opcode`; only what it does not say is written here.

Summary of the differences this package relies on:

======================  ===================================  ============================  ==========================
 topic                   3.11                                 3.12                          3.13
======================  ===================================  ============================  ==========================
 jump direction          in the opcode: ``*_FORWARD_*`` and   only ``JUMP_BACKWARD*`` go    as 3.12
                         ``*_BACKWARD_*`` pairs                backward
 jump argument           units from the end of the jump's     as 3.11                       as 3.11 (jumps have a
                         CACHE entries                                                      CACHE unit now)
 call sequence           ``[NULL, f, args]`` then             ``[NULL, f, args]``,          ``[f, NULL, args]``,
                         ``PRECALL n; CALL n``                ``CALL n``                    ``CALL n``
 keyword names           ``KW_NAMES i`` before the call       as 3.11                       a tuple on the stack,
                                                                                            ``CALL_KW n``
 ``LOAD_GLOBAL`` arg     ``namei << 1 | push_null``           as 3.11                       as 3.11 (NULL pushed
                                                                                            above the global)
 ``LOAD_ATTR`` arg       ``namei`` (``LOAD_METHOD`` apart)    ``namei << 1 | is_method``    as 3.12
 prologue                ``MAKE_CELL``*, ``COPY_FREE_VARS``,  as 3.11                       as 3.11
                         ``RESUME 0``
 fused local ops         none                                 none                          ``LOAD_FAST_LOAD_FAST``
                                                                                            etc.: two 4-bit indices
 return of a constant    ``LOAD_CONST; RETURN_VALUE``         ``RETURN_CONST``              as 3.12
======================  ===================================  ============================  ==========================

The exception table (varint, most significant 6-bit chunk first, bit 7 marking an entry's start)
and the location table (PEP 626/657 "linetable") have the same encoding in all three.
"""

from __future__ import annotations

import dis
import opcode
import sys

__all__ = [
    "PY_VERSION",
    "SUPPORTED",
    "check_supported",
    "opcode_of",
    "opname_of",
    "cache_entries",
    "has_arg",
    "stack_effect",
    "is_jump",
    "is_backward_jump",
    "flip_jump_direction",
    "UNCONDITIONAL_JUMPS",
    "TERMINATORS",
    "CONDITIONAL_JUMPS",
    "FOR_ITER_EXIT_SKIP",
    "GLUED_TO_PREVIOUS",
    "LOCAL_OPS",
    "CELL_OPS",
    "PACKED_LOCAL_OPS",
    "CALL_STYLE",
    "KW_NAMES_OPCODE",
    "PRECALL_OPCODE",
    "forward_conditional_jump",
    "POP_JUMP_IF_TRUE",
    "POP_JUMP_IF_FALSE",
    "LOAD_FAST_CHECKED",
    "CALL_OPCODES",
    "LOAD_CELL_OBJECT",
    "JUMP_NEEDS_EXACT_BOOL",
]

PY_VERSION: tuple[int, int] = sys.version_info[:2]
SUPPORTED = ((3, 11), (3, 12), (3, 13))


def check_supported() -> None:
    """Raise ``RuntimeError`` on a Python whose bytecode this package does not know."""
    if PY_VERSION not in SUPPORTED:
        raise RuntimeError(
            f"ember._dynamo.bytecode supports CPython 3.11, 3.12 and 3.13; this is "
            f"{PY_VERSION[0]}.{PY_VERSION[1]}"
        )


def opcode_of(name: str) -> int:
    """The opcode number of ``name`` on this Python (``KeyError`` if it has no such opcode)."""
    return dis.opmap[name]


def opname_of(op: int) -> str:
    """The name of opcode ``op`` on this Python."""
    return dis.opname[op]


# --- inline caches ---------------------------------------------------------------------------
# 3.11 and 3.12 store a list indexed by opcode; 3.13 a dict keyed by name (only non-zero).
_CACHES = dis._inline_cache_entries
if isinstance(_CACHES, dict):
    _CACHE_BY_OPCODE = {dis.opmap[name]: n for name, n in _CACHES.items() if name in dis.opmap}
else:
    _CACHE_BY_OPCODE = {op: n for op, n in enumerate(_CACHES) if n}


def cache_entries(op: int) -> int:
    """Number of 2-byte CACHE units that follow opcode ``op`` in ``co_code``."""
    return _CACHE_BY_OPCODE.get(op, 0)


# --- arguments -------------------------------------------------------------------------------
if hasattr(dis, "hasarg"):  # 3.12+: the opcode numbering no longer splits at HAVE_ARGUMENT
    _HAS_ARG = frozenset(dis.hasarg)

    def has_arg(op: int) -> bool:
        """Whether opcode ``op`` takes an argument (``dis.stack_effect`` needs to know)."""
        return op in _HAS_ARG

else:

    def has_arg(op: int) -> bool:
        """Whether opcode ``op`` takes an argument (``dis.stack_effect`` needs to know)."""
        return op >= opcode.HAVE_ARGUMENT


PRECALL_OPCODE = dis.opmap.get("PRECALL")  # 3.11 only


def stack_effect(op: int, arg: int | None, jump: bool) -> int:
    """``dis.stack_effect`` with the stdlib's known slips corrected.

    3.11 and 3.12 report 0 for ``RETURN_GENERATOR``, but the frame resumes with the sent value
    (``None``) pushed, which the ``POP_TOP`` after it removes; 3.13 reports +1. 3.11 reports the
    arguments of a call as popped by ``PRECALL``; they are on the stack until ``CALL``, which is
    where a graph break at a call sees them.
    """
    if op == _RETURN_GENERATOR:
        return 1
    if op == PRECALL_OPCODE:  # 3.11 counts the arguments as popped at PRECALL; they stay until CALL
        return 0
    if op == _CALL and PRECALL_OPCODE is not None:
        return -(arg or 0) - 1
    if has_arg(op):
        return dis.stack_effect(op, arg or 0, jump=jump)
    return dis.stack_effect(op, jump=jump)


_RETURN_GENERATOR = dis.opmap["RETURN_GENERATOR"]
_CALL = dis.opmap["CALL"]


# --- jumps -----------------------------------------------------------------------------------
_JUMPS = frozenset(dis.hasjrel)


def is_jump(op: int) -> bool:
    """Whether ``op``'s argument is a relative jump (every jump is relative since 3.11)."""
    return op in _JUMPS


def is_backward_jump(op: int) -> bool:
    """Whether ``op`` jumps backward: the direction is part of the opcode name in 3.11-3.13."""
    return "JUMP_BACKWARD" in dis.opname[op]


def _pairs() -> dict[int, int]:
    """Forward <-> backward twins of each jump opcode that has one."""
    pairs = {}
    for name, op in dis.opmap.items():
        if "FORWARD" in name:
            twin = name.replace("FORWARD", "BACKWARD")
            if twin in dis.opmap:
                pairs[op] = dis.opmap[twin]
                pairs[dis.opmap[twin]] = op
    return pairs


_DIRECTION_TWINS = _pairs()


def flip_jump_direction(op: int) -> int:
    """The opcode that jumps the other way; ``ValueError`` if the jump has no twin.

    3.11 has twins for every conditional jump; 3.12 and 3.13 only for the unconditional
    ``JUMP_FORWARD``/``JUMP_BACKWARD`` (their conditional jumps only go forward).
    """
    try:
        return _DIRECTION_TWINS[op]
    except KeyError:
        raise ValueError(f"{dis.opname[op]} cannot jump the other way on Python {PY_VERSION}") from None


def _ops(*names: str) -> frozenset[int]:
    return frozenset(dis.opmap[n] for n in names if n in dis.opmap)


UNCONDITIONAL_JUMPS = _ops("JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT")
"""Jumps that never fall through."""

TERMINATORS = UNCONDITIONAL_JUMPS | _ops("RETURN_VALUE", "RETURN_CONST", "RAISE_VARARGS", "RERAISE")
"""Instructions after which control never reaches the next instruction."""

FOR_ITER_EXIT_SKIP = {(3, 11): 0, (3, 12): 1, (3, 13): 2}.get(PY_VERSION, 0)
"""When its iterator is exhausted, ``FOR_ITER`` jumps to its target plus this many instructions
(3.12 skips the target ``END_FOR``; 3.13 skips ``END_FOR`` and the ``POP_TOP`` after it), so
code edits must not insert instructions right after a ``FOR_ITER`` target."""

GLUED_TO_PREVIOUS = _ops("CALL") if PY_VERSION < (3, 12) else frozenset()
"""Instructions that must directly follow the one before them: 3.11's specialised ``PRECALL``
forms skip over the ``CALL`` after it by a fixed distance. (``RESUME`` after ``YIELD_VALUE``
and the frame set-up at the start of a code object must also stay where they are.)"""

CONDITIONAL_JUMPS = frozenset(op for op in _JUMPS if op not in UNCONDITIONAL_JUMPS) - _ops("FOR_ITER", "SEND")
"""Jumps on a condition popped (or, 3.11's ``JUMP_IF_*_OR_POP``, peeked) from the stack."""


def forward_conditional_jump(op: int) -> int:
    """The forward-jumping form of a conditional jump (3.11 has separate backward opcodes)."""
    return flip_jump_direction(op) if is_backward_jump(op) else op


# --- locals ----------------------------------------------------------------------------------
# Opcodes whose argument indexes "localsplus" (arguments, locals, cells, free variables), in
# all three versions. LOAD_CLOSURE is a pseudo-op in 3.13 (it becomes LOAD_FAST).
LOCAL_OPS = _ops(
    "LOAD_FAST", "STORE_FAST", "DELETE_FAST", "LOAD_FAST_CHECK", "LOAD_FAST_AND_CLEAR",
    "LOAD_FAST_LOAD_FAST", "STORE_FAST_LOAD_FAST", "STORE_FAST_STORE_FAST",
)  # fmt: skip
CELL_OPS = _ops(
    "MAKE_CELL", "LOAD_CLOSURE", "LOAD_DEREF", "STORE_DEREF", "DELETE_DEREF", "LOAD_CLASSDEREF",
    "LOAD_FROM_DICT_OR_DEREF",
)  # fmt: skip
PACKED_LOCAL_OPS = _ops("LOAD_FAST_LOAD_FAST", "STORE_FAST_LOAD_FAST", "STORE_FAST_STORE_FAST")
"""3.13's fused ops: the argument is ``(first_index << 4) | second_index``."""

# --- calls -----------------------------------------------------------------------------------
CALL_STYLE = "null_first" if PY_VERSION < (3, 13) else "callable_first"
"""Where the NULL of a call sequence sits: ``[NULL, f, args]`` (3.11, 3.12) or ``[f, NULL, args]``."""

POP_JUMP_IF_TRUE = "POP_JUMP_FORWARD_IF_TRUE" if PY_VERSION < (3, 12) else "POP_JUMP_IF_TRUE"
POP_JUMP_IF_FALSE = "POP_JUMP_FORWARD_IF_FALSE" if PY_VERSION < (3, 12) else "POP_JUMP_IF_FALSE"
"""Names of the forward conditional jumps generated code uses."""
LOAD_FAST_CHECKED = "LOAD_FAST_CHECK" if "LOAD_FAST_CHECK" in dis.opmap else "LOAD_FAST"
"""A local load that raises on an unbound local (3.11's plain ``LOAD_FAST`` always checks)."""
JUMP_NEEDS_EXACT_BOOL = PY_VERSION >= (3, 13)
"""3.13's ``POP_JUMP_IF_TRUE``/``POP_JUMP_IF_FALSE`` compare with ``True``/``False`` by identity
(anything else counts as true); earlier versions call ``__bool__``."""
LOAD_CELL_OBJECT = "LOAD_CLOSURE" if PY_VERSION < (3, 13) else "LOAD_FAST"
"""Pushes the cell object of a cell variable (3.13 made ``LOAD_CLOSURE`` a pseudo-op for ``LOAD_FAST``)."""
CALL_OPCODES = _ops("CALL", "CALL_KW", "CALL_FUNCTION_EX")
KW_NAMES_OPCODE = dis.opmap.get("KW_NAMES")  # 3.11 and 3.12
