"""Type aliases for annotations, under PyTorch's names (``torch.types``).

Programs and libraries annotate with ``torch.types.Number``, ``Device`` or ``_size``; these
are the same aliases over ember's types. They are for annotations only: nothing checks them
at run time.
"""

from __future__ import annotations

import builtins
import os
from typing import IO

from ._device import device as _device_cls
from ._dtype import dtype as _dtype_cls
from ._storage import Storage
from ._tensor import Size, Tensor

__all__ = ["Number", "Device", "FileLike", "Storage"]

_bool = builtins.bool
_int = builtins.int
_float = builtins.float
_complex = builtins.complex
_str = builtins.str
_bytes = builtins.bytes
_dtype = _dtype_cls
_device = _device_cls
_size = Size | list[_int] | tuple[_int, ...]

#: A Python number as ops accept it.
Number = _int | _float | _bool
_Number = (_int, _float, _bool)  # for isinstance checks, as in PyTorch
#: Anything ``ember.device(...)`` or a ``device=`` argument accepts.
Device = _device_cls | _str | _int | None
#: What :func:`ember.save` and :func:`ember.load` accept as ``f``.
FileLike = _str | os.PathLike | IO[_bytes]

_TensorOrTensors = Tensor | tuple[Tensor, ...] | list[Tensor]
