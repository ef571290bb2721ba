"""What the symbolic interpreter needs to know about each CPython version's instructions."""

from __future__ import annotations

import sys

__all__ = ["PY", "NULL_AFTER_CALLABLE", "FOR_ITER_EXHAUSTED_SKIP", "compare_op_name"]

PY = sys.version_info[:2]

#: 3.13 pushes ``callable, self_or_NULL`` before the arguments of a call; 3.11/3.12 ``NULL_or_method,
#: callable_or_self``.
NULL_AFTER_CALLABLE = PY >= (3, 13)

#: Instructions FOR_ITER skips after its jump target when the iterator is exhausted: 3.11 jumps past
#: the loop; 3.12 skips END_FOR; 3.13 skips END_FOR and the POP_TOP after it.
FOR_ITER_EXHAUSTED_SKIP = {(3, 11): 0, (3, 12): 1, (3, 13): 2}.get(PY, 2)


def compare_op_name(inst):
    """The comparison of a COMPARE_OP (``'<'``); 3.13 shows a coerce-to-bool variant as ``'bool(<)'``."""
    name = inst.argval
    if name.startswith("bool(") and name.endswith(")"):
        name = name[5:-1]
    return name
