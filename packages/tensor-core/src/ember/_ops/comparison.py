"""Comparisons and predicates: ``eq``, ``ne``, ``lt``, ``le``, ``gt``, ``ge``, ``isnan``, ``isinf``,
``isfinite``, ``isposinf``, ``isneginf``, ``isreal``, ``isclose``, ``allclose`` and ``equal``.

Elementwise results are bool tensors; ``allclose`` and ``equal`` return Python bools.
"""

from __future__ import annotations

import numpy as np

from .. import _dtype as D
from .._meta import MetaArray
from ._array_module import as_array as _as_array  # numpy or CuPy arrays (the CUDA backend)
from ._pointwise_helpers import (
    NO_COMPLEX,
    _torch_name,
    binary,
    check_tensor,
    compute_dtype,
    unary,
    unary_doc,
)
from ._registry import defop, registry
from ._shapes import broadcast_shapes

__all__ = []

_FIRST_OP = len(registry)  # the ops registered from here on are this module's (see METHODS at the end)


# -- comparisons ------------------------------------------------------------------------


def _comparison(name, np_fn, symbol, output, supported=None):
    raises = "\n        NotImplementedError: for complex operands (no order)." if supported is not None else ""
    return binary(name, np_fn, result="bool", scalars="other", supported=supported, doc=f"""Elementwise
    ``input {symbol} other``, as a bool tensor (operands compared in their promoted dtype).

    Args:
        input (Tensor): the first operand.
        other (Tensor or Number): the second operand.

    Raises:
        RuntimeError: if the shapes don't broadcast.{raises}

    Example:
        >>> import ember
        >>> ember.{name}(ember.tensor([1, 2, 3]), 2)
        {output}
    """)


eq = _comparison("eq", np.equal, "==", "tensor([False,  True, False])")
ne = _comparison("ne", np.not_equal, "!=", "tensor([ True, False,  True])")
lt = _comparison("lt", np.less, "<", "tensor([ True, False, False])", NO_COMPLEX)
le = _comparison("le", np.less_equal, "<=", "tensor([ True,  True, False])", NO_COMPLEX)
gt = _comparison("gt", np.greater, ">", "tensor([False, False,  True])", NO_COMPLEX)
ge = _comparison("ge", np.greater_equal, ">=", "tensor([False,  True,  True])", NO_COMPLEX)


# -- predicates ----------------------------------------------------------------------------


def _predicate(name, np_fn, summary, example, output, *, has_out=False, check=None, upcast=False):
    return unary(name, np_fn, result="bool", has_inplace=False, has_out=has_out, check=check, upcast=upcast,
                 doc=unary_doc(summary, example, output, name=name,
                           raises="RuntimeError: for complex inputs." if check is not None else ""))


def _check_no_complex_input(name):
    def check(input):
        if input.dtype.is_complex:
            raise RuntimeError(f"{name} does not support complex inputs.")

    return check


_NAN_INF = "[1.0, float('nan'), float('inf'), -float('inf')]"
isnan = _predicate("isnan", np.isnan, "Elementwise test for NaN.", _NAN_INF, "tensor([False,  True, False, False])")
isinf = _predicate("isinf", np.isinf, "Elementwise test for positive or negative infinity.", _NAN_INF,
                   "tensor([False, False,  True,  True])")
isfinite = _predicate("isfinite", np.isfinite, "Elementwise test for finite values (not NaN nor infinite).",
                      _NAN_INF, "tensor([ True, False, False, False])")
isposinf = _predicate("isposinf", lambda x: np.equal(x, np.inf), "Elementwise test for positive infinity.", _NAN_INF,
                      "tensor([False, False,  True, False])", has_out=True, check=_check_no_complex_input("isposinf"),
                      upcast=True)
isneginf = _predicate("isneginf", lambda x: np.equal(x, -np.inf), "Elementwise test for negative infinity.",
                      _NAN_INF, "tensor([False, False, False,  True])", has_out=True,
                      check=_check_no_complex_input("isneginf"), upcast=True)


def _isreal_np(x):
    if x.dtype.kind == "c":
        return np.equal(x.imag, 0)
    return np.ones(x.shape, dtype=np.bool_)


isreal = _predicate("isreal", _isreal_np, "Elementwise test for a zero imaginary part (always True for real dtypes).",
                    "[1+0j, 1+1j]", "tensor([ True, False])")


# -- isclose, allclose, equal -------------------------------------------------------------------


def _check_close_args(name, input, other, rtol, atol):
    check_tensor(name, "input", 1, input)
    check_tensor(name, "other", 2, other)
    if input.dtype is not other.dtype:
        raise RuntimeError(f"{_torch_name(input.dtype)} did not match {_torch_name(other.dtype)}")
    if rtol < 0:
        raise RuntimeError(f"rtol must be greater than or equal to zero, but got {rtol}")
    if atol < 0:
        raise RuntimeError(f"atol must be greater than or equal to zero, but got {atol}")
    return broadcast_shapes(input._data.shape, other._data.shape)


def _isclose_meta(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Elementwise ``|input - other| <= atol + rtol * |other|``, as a bool tensor.

    Equal values (infinities included) are always close; NaNs are close to each
    other only with ``equal_nan``. Steps compute in the inputs' dtype (integer
    differences wrap as in PyTorch; integer tolerances use the default float).

    Args:
        input (Tensor): the first tensor.
        other (Tensor): the second tensor, of the same dtype, broadcasting.
        rtol (float): the relative tolerance.
        atol (float): the absolute tolerance.
        equal_nan (bool): whether two NaNs are close.

    Returns:
        Tensor: bool, of the broadcast shape.

    Raises:
        RuntimeError: for different dtypes or a negative tolerance.

    Example:
        >>> import ember
        >>> ember.isclose(ember.tensor([1.0, 2.0, float("nan")]), ember.tensor([1.0 + 1e-9, 2.1, float("nan")]))
        tensor([ True, False, False])
    """
    shape = _check_close_args("isclose", input, other, rtol, atol)
    return MetaArray(shape, np.dtype(np.bool_))


def _rounded(value, np_dtype):
    return _as_array(value).astype(np_dtype, copy=False)


def _isclose_np(a, b, dtype, rtol, atol, equal_nan):
    """PyTorch's isclose steps: each one rounded to the inputs' dtype (integers and bool: the default float)."""
    with np.errstate(all="ignore"):
        close = np.equal(a, b)
        if equal_nan and dtype.category >= D.FLOATING:
            close |= np.isnan(a) & np.isnan(b)
        if rtol == 0 and atol == 0:
            return close
        if dtype.category < D.FLOATING:
            a = a.astype(D.get_default_dtype().numpy_dtype)
            b = b.astype(a.dtype)
        np_dtype = a.dtype
        real = dtype.to_real().numpy_dtype if dtype.is_complex else np_dtype
        allowed = _rounded(atol + _rounded(np.abs(_rounded(b * rtol, np_dtype)), real), real)
        actual = _rounded(np.abs(_rounded(a - b, np_dtype)), real)
        close |= np.isfinite(actual) & (actual <= allowed)
    return close


def _isclose_cpu(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    return _as_array(_isclose_np(input._data, other._data, input.dtype, rtol, atol, equal_nan))


isclose = defop("isclose", _isclose_meta, cpu=_isclose_cpu, tags=("pointwise",))


def _data_dependent(name, *tensors):
    if any(t._device.type == "meta" for t in tensors):
        raise NotImplementedError(f"{name}() of meta tensors: the result is data-dependent (a Python bool)")


def _allclose_meta(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Whether every element of ``input`` is close to ``other``: ``isclose(...).all()`` as a Python bool.

    Args:
        input (Tensor): the first tensor.
        other (Tensor): the second tensor, of the same dtype, broadcasting.
        rtol (float): the relative tolerance.
        atol (float): the absolute tolerance.
        equal_nan (bool): whether two NaNs are close.

    Returns:
        bool: True when all elements are close.

    Raises:
        RuntimeError: for different dtypes, a negative tolerance or shapes that don't broadcast.

    Example:
        >>> import ember
        >>> ember.allclose(ember.tensor([1.0, 2.0]), ember.tensor([1.0, 2.0 + 1e-7]))
        True
    """
    _check_close_args("allclose", input, other, rtol, atol)
    _data_dependent("allclose", input, other)


def _allclose_cpu(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    return bool(np.all(_isclose_np(input._data, other._data, input.dtype, rtol, atol, equal_nan)))


allclose = defop("allclose", _allclose_meta, cpu=_allclose_cpu, kind="other", tags=("pointwise",))


def _equal_meta(input, other):
    """Whether ``input`` and ``other`` have the same shape and equal values, as a Python bool.

    Values compare after type promotion (``tensor([1.])`` equals ``tensor([1])``);
    NaN equals nothing.

    Args:
        input (Tensor): the first tensor.
        other (Tensor): the second tensor.

    Returns:
        bool: True when shapes and values agree.

    Example:
        >>> import ember
        >>> ember.equal(ember.tensor([1, 2]), ember.tensor([1.0, 2.0]))
        True
    """
    check_tensor("equal", "input", 1, input)
    check_tensor("equal", "other", 2, other)
    _data_dependent("equal", input, other)


def _equal_cpu(input, other):
    a, b = input._data, other._data
    if a.shape != b.shape:
        return False
    dtype = D.promote_types(input.dtype, other.dtype).numpy_dtype
    work = compute_dtype(dtype)
    return bool(np.array_equal(a.astype(work, copy=False), b.astype(work, copy=False)))


equal = defop("equal", _equal_meta, cpu=_equal_cpu, kind="other", tags=("pointwise",))


#: Ops of this module that are also Tensor methods (see ember._tensor_methods).
METHODS = list(registry)[_FIRST_OP:]
