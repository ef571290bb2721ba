"""Testing utilities: ``assert_close``, ``make_tensor`` and the OpInfo sample registry.

``ember.testing.op_db`` maps each op name to an :class:`OpInfo` whose samples
every package's tests reuse (see :mod:`ember.testing._opinfo`).
"""

from ._comparison import assert_close, default_tolerances
from ._opinfo import ErrorInput, OpInfo, SampleInput, make_tensor, op_db, register_opinfo, to_numpy_args
from . import _samples  # noqa: F401,E402 - registers the OpInfos of core's ops

__all__ = [
    "assert_close",
    "default_tolerances",
    "make_tensor",
    "OpInfo",
    "SampleInput",
    "ErrorInput",
    "op_db",
    "register_opinfo",
    "to_numpy_args",
]
