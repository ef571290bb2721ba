"""Gradient ops of pointwise functions (PyTorch's ATen ops, not public functions): ``tanh_backward``,
``sigmoid_backward`` and ``threshold_backward``, which autograd's formulas call: one op on the hot
path of every backward through them instead of a chain of three.
"""

from __future__ import annotations

import numpy as np

from .. import _C
from .. import _dtype as D
from .._meta import MetaArray
from .._tensor import Tensor
from ._array_module import as_array as _as_array  # numpy or CuPy arrays (the CUDA backend)
from ._float_errors import quiet
from ._pointwise_helpers import (
    FLOATING_AND_COMPLEX,
    binary_dtype,
    check_tensor,
    compute_dtype,
    not_implemented,
    operand,
)
from ._registry import defop
from ._shapes import broadcast_shapes

__all__ = []

# -- tanh_backward, sigmoid_backward: the gradients of tanh and sigmoid from their outputs ------------


def _backward_from_output(name, np_fn, formula):
    """Define ``name(grad_output, output)``, PyTorch's ATen op of that name: ``np_fn(grad_output, output)``.

    Autograd's formulas for ``tanh`` and ``sigmoid`` call it: one op instead of
    the three that the formula in other ops would take, on the hot path of
    every backward through them.
    """

    def meta(grad_output, output):
        check_tensor(name, "grad_output", 1, grad_output)
        check_tensor(name, "output", 2, output)
        shape = broadcast_shapes(grad_output._data.shape, output._data.shape)
        dtype = binary_dtype(grad_output, output)
        if dtype not in FLOATING_AND_COMPLEX:
            raise not_implemented(name, dtype)
        return MetaArray(shape, dtype.numpy_dtype)

    def cpu(grad_output, output):
        np_dtype = binary_dtype(grad_output, output).numpy_dtype
        work = compute_dtype(np_dtype)
        value = quiet(np_fn, operand(grad_output, work), operand(output, work))
        return _as_array(value).astype(np_dtype, copy=False)

    def checked_cpu(grad_output, output):
        # the common call: two tensors of one dtype numpy computes in, one shape (meta's checks pass)
        if type(grad_output) is Tensor and type(output) is Tensor:
            g, y = grad_output._data, output._data
            if g.dtype is y.dtype and g.shape == y.shape and g.dtype in _DIRECT_FLOATS:
                return np.asarray(quiet(np_fn, g, y))
        return None

    meta.__name__ = name
    meta.__doc__ = f"""The gradient of ``{name[: -len("_backward")]}`` from its output: ``{formula}``.

    PyTorch's ATen op of the same name (``torch.ops.aten.{name}``; not a public function there
    either). ``conj`` is the identity on real tensors.

    Args:
        grad_output (Tensor): the gradient of the output.
        output (Tensor): the output of ``{name[: -len("_backward")]}``.

    Raises:
        TypeError: if an argument is not a tensor.
        RuntimeError: if the shapes don't broadcast.
        NotImplementedError: for integer and bool dtypes.
    """
    op = defop(name, meta, cpu=cpu, tags=("pointwise",))
    op.register_checked_kernel("cpu", checked_cpu)
    return op


_DIRECT_FLOATS = frozenset(np.dtype(t) for t in (np.float32, np.float64, np.complex64, np.complex128))
_ONE = {np.dtype(t): t(1) for t in (np.float16, np.float32, np.float64)}  # 1 in the array's own dtype


def _tanh_backward_np(g, y):
    one = _ONE.get(y.dtype)
    if one is not None and type(y) is np.ndarray and type(g) is np.ndarray and g.dtype is y.dtype and (
        g.shape == y.shape and y.ndim  # (numpy answers zero-dim arrays with scalars)
    ):
        # the common call: the same three operations into one new array (on small arrays numpy's calls
        # cost more than the arithmetic, and a Python 1 more than one of the array's dtype)
        factor = np.multiply(y, y)
        np.subtract(one, factor, out=factor)
        return np.multiply(g, factor, out=factor)
    factor = 1 - y * y
    return g * (np.conjugate(factor) if factor.dtype.kind == "c" else factor)


def _sigmoid_backward_np(g, y):
    factor = y - y * y
    return g * (np.conjugate(factor) if factor.dtype.kind == "c" else factor)


tanh_backward = _backward_from_output("tanh_backward", _tanh_backward_np, "grad_output * conj(1 - output**2)")
sigmoid_backward = _backward_from_output(
    "sigmoid_backward", _sigmoid_backward_np, "grad_output * conj(output - output**2)"
)


# -- threshold_backward: the gradient of threshold and relu ----------------------------------------------


def _threshold_backward_meta(grad_output, self, threshold):
    """The gradient of ``threshold`` (and of ``relu`` from its output): ``grad_output`` where
    ``self > threshold``, else 0.

    PyTorch's ATen op of the same name (``torch.ops.aten.threshold_backward``; not a public function
    there either). As there, an element passes unless ``self <= threshold``: a NaN in ``self`` passes
    its gradient, and a NaN or infinite gradient at a blocked element gives 0, not NaN. ``threshold``
    is rounded to the computation's dtype first.

    Args:
        grad_output (Tensor): the gradient of the output; integer or floating point.
        self (Tensor): the input of ``threshold``, or the output of ``relu``.
        threshold (float): the threshold.

    Returns:
        Tensor: the broadcast shape of the two tensors, in their promoted dtype.

    Raises:
        TypeError: if ``grad_output`` or ``self`` is not a tensor, or ``threshold`` not a real number.
        RuntimeError: if the shapes don't broadcast.
        NotImplementedError: for bool and complex dtypes.
    """
    check_tensor("threshold_backward", "grad_output", 1, grad_output)
    check_tensor("threshold_backward", "self", 2, self)
    if type(threshold) is bool or not isinstance(threshold, (int, float, np.integer, np.floating)):
        raise TypeError(
            f"threshold_backward(): argument 'threshold' (position 3) must be Number, not {type(threshold).__name__}"
        )
    shape = broadcast_shapes(grad_output._data.shape, self._data.shape)
    dtype = binary_dtype(grad_output, self)
    if dtype is D.bool or dtype.category == D.COMPLEX:
        raise not_implemented("threshold_cpu", dtype)  # PyTorch names its CPU kernel
    return MetaArray(shape, dtype.numpy_dtype)


def _threshold_backward_np(g, y, threshold):
    blocked = y <= y.dtype.type(threshold)
    bits = _SAME_SIZE_BITS.get(g.dtype)
    if bits is not None and type(g) is np.ndarray:
        # numpy's where branches per element (about 15x slower than a product on random signs): select by
        # masking the bits instead, all ones where the gradient passes and zero (+0.0) where it is blocked
        keep = np.subtract(blocked, 1, dtype=bits)
        return np.bitwise_and(g.view(bits), keep).view(g.dtype)
    return np.where(blocked, g.dtype.type(0), g)


_SAME_SIZE_BITS = {np.dtype(np.float32): np.dtype(np.uint32), np.dtype(np.float64): np.dtype(np.uint64)}


def _threshold_backward_cpu(grad_output, self, threshold):
    np_dtype = binary_dtype(grad_output, self).numpy_dtype
    work = compute_dtype(np_dtype)
    value = quiet(_threshold_backward_np, operand(grad_output, work), operand(self, work), threshold)
    return _as_array(value).astype(np_dtype, copy=False)


def _threshold_backward_checked_cpu(grad_output, self, threshold):
    # the common call (relu's backward): two tensors of one float dtype and shape, a Python number
    if type(grad_output) is Tensor and type(self) is Tensor and type(threshold) in (int, float):
        g, y = grad_output._data, self._data
        if g.dtype is y.dtype and g.shape == y.shape and g.dtype in _SAME_SIZE_BITS:  # float32/float64
            if type(g) is np.ndarray and g.flags.c_contiguous and y.flags.c_contiguous and -1e38 < threshold < 1e38:
                return _C.threshold_backward(g, y, threshold)  # one pass instead of numpy's three
            return np.asarray(quiet(_threshold_backward_np, g, y, threshold))
    return None


threshold_backward = defop("threshold_backward", _threshold_backward_meta, cpu=_threshold_backward_cpu,
                           tags=("pointwise",))
threshold_backward.register_checked_kernel("cpu", _threshold_backward_checked_cpu)


#: Ops of this module that are also Tensor methods (see ember._tensor_methods): none, as in PyTorch.
METHODS = []
