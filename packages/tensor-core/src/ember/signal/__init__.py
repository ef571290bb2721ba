"""Signal processing (PyTorch's ``torch.signal``): the window functions of :mod:`ember.signal.windows`."""

from . import windows

__all__ = ["windows"]
