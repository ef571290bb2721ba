"""An array stand-in that has a shape and a dtype and no values.

Tensors that are not strided memory (sparse tensors, vmap's batched tensors) use a subclass as their
``_data``: ``Tensor.shape``, ``dtype``, ``ndim`` and ``numel`` work, and a kernel or numpy that
tries to read values fails loudly through :meth:`ShapeOnlyArray._refuse` instead of computing with it.
"""

from __future__ import annotations

import math

__all__ = ["ShapeOnlyArray"]


class ShapeOnlyArray:
    """``shape`` (a tuple) and ``dtype`` (a numpy dtype); reading values calls :meth:`_refuse`."""

    __slots__ = ("shape", "dtype")
    __array_ufunc__ = None  # numpy ufuncs refuse it
    __array_function__ = None

    def __init__(self, shape, dtype):
        self.shape = tuple(shape)
        self.dtype = dtype

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        return math.prod(self.shape)

    def _refuse(self, what):
        """Raise the subclass's error for reading ``what`` (an attribute name, or ``"__array__"``)."""
        raise NotImplementedError

    def __array__(self, dtype=None, copy=None):
        self._refuse("__array__")

    def __getattr__(self, name):
        if name.startswith("__"):  # protocol probes (numpy's __array_struct__ ...): absent, so __array__ is asked
            raise AttributeError(name)
        self._refuse(name)
