"""oneDNN (MKL-DNN, ``torch.backends.mkldnn``): ember does not use it, so it is not available.

``enabled`` (default True) is stored so that programs that switch it run; ember's CPU kernels
(numpy and ember's own OpenMP C++) never consult it.
"""

from __future__ import annotations

import sys

from . import _flags

__all__ = ["is_available", "flags"]

_flags.install(__name__, {"enabled": (True, _flags.check_bool)})


def is_available():
    """Whether oneDNN kernels can be used: always False in ember."""
    return False


def flags(enabled=False):
    """Context manager that sets ``enabled`` inside the block and restores it afterwards."""
    return _flags.temporarily(sys.modules[__name__], enabled=enabled)
