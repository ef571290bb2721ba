"""The translator's instruction handlers, grouped by what they do; each is a method named after its opcode.

The per-version differences the handlers need (3.11, 3.12, 3.13) are the small table in
:mod:`.versions`; decoding is ``dis.get_instructions`` (jump targets already absolute offsets).
"""

from .builders import BuildHandlers
from .calls import CallHandlers
from .control import ControlHandlers
from .exceptions import ExceptionHandlers
from .matching import MatchHandlers
from .load_store import LoadStoreHandlers
from .operators import OperatorHandlers

__all__ = [
    "BuildHandlers", "CallHandlers", "ControlHandlers", "ExceptionHandlers", "LoadStoreHandlers", "MatchHandlers",
    "OperatorHandlers",
]
