"""What the symbolic interpreter needs to know about each CPython version's instructions.

The facts themselves are kept in one table, :mod:`ember._dynamo.bytecode.versions`; this module
names the few the handlers read, in the interpreter's terms.
"""

from __future__ import annotations

from ..bytecode import versions as _table

__all__ = ["PY", "NULL_AFTER_CALLABLE", "FOR_ITER_EXHAUSTED_SKIP", "compare_op_name"]

PY = _table.PY_VERSION

#: 3.13 pushes ``callable, self_or_NULL`` before the arguments of a call; 3.11/3.12 ``NULL_or_method,
#: callable_or_self``.
NULL_AFTER_CALLABLE = _table.CALL_STYLE == "callable_first"

#: Instructions FOR_ITER skips after its jump target when the iterator is exhausted.
FOR_ITER_EXHAUSTED_SKIP = _table.FOR_ITER_EXIT_SKIP


def compare_op_name(inst):
    """The comparison of a COMPARE_OP (``'<'``); 3.13 shows a coerce-to-bool variant as ``'bool(<)'``."""
    name = inst.argval
    if name.startswith("bool(") and name.endswith(")"):
        name = name[5:-1]
    return name
