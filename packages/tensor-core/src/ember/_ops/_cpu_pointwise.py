"""When CPU pointwise ops compute with ``ember._C``'s threaded kernels (csrc/pointwise.cpp).

numpy's ufuncs run on one thread, are slow to broadcast a column (``x + y`` with ``y`` of
shape ``[m, 1]``), and ``out=`` costs them a temporary and a copy. For arrays of at least
:data:`MIN_ELEMENTS` elements, the ops below compute in C++ instead, with the same bits as
numpy: ``add``/``sub`` (``alpha`` too), ``mul``, ``div`` (true division), ``maximum``,
``minimum``, the comparisons, ``where`` and ``clamp``; and ``neg``, ``abs``, ``relu`` through
the unary kernel, with ``exp``, ``log``, ``tanh``, ``sigmoid``, ``sqrt`` and ``rsqrt`` of floating
tensors (these within a few ulp of numpy's float32 loops rather than bit for bit: see
pointwise.cpp). Smaller arrays, other dtypes (complex), and calls the C++ kernels don't take
(type promotion, numbers that don't fit) keep numpy's path: every function here returns None
or False for them, and the caller goes on as before.

The C++ kernel is handed numpy arrays of any strides (broadcast inputs need no copy: a missing
or size-1 dim reads with stride 0) and a dtype code; numbers become zero-dim arrays of the
tensor's dtype, as numpy converts them (NEP 50's weak scalars). Results are written into a new
array, or straight into a destination (``out=``, in-place ops: :func:`binary_into` and friends)
when its dtype is the result's and its shape the broadcast shape. A destination that shares
memory with an input other than element for element (the same start and strides, as
``x.add_(y)`` reading ``x``) is refused: a partial overlap would read values already written.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _C
from .. import _dtype as D
from .._tensor import Tensor

__all__ = [
    "MIN_ELEMENTS", "BINARY_OPS", "binary_arrays", "plan_arrays", "compare_number", "binary_into", "new_result",
    "unary_array", "unary_into", "where_array", "where_into", "clamp_array", "clamp_into",
    "dtype_code", "large", "same_dtype_into",
]

#: Elements from which the C++ kernels are used (below, numpy's call costs less than the C++ call).
MIN_ELEMENTS = 1 << 14
# Each writer (``op.cpu_into``) takes outputs from MIN_ELEMENTS on; where its values are numpy's bits,
# it has a ``small`` twin that takes outputs of any size, for ``out=`` (ember._ops._out.write_direct):
# there the alternative is numpy's result, then a checked copy into ``out`` (12 us for a 4x4 add
# against the kernel's 1). Not the float32 exp/log/tanh/sigmoid, whose kernels are a few ulp from
# numpy's loops: a small ``out=`` gets the values of the same call without ``out=``.
_SMALL = 1
# the unary ops whose kernels give numpy's bits
_EXACT_UNARY = frozenset(("neg", "abs", "relu", "sqrt", "rsqrt"))
_EXACT = 2**53  # Python ints below this in magnitude convert to float64 exactly

# numpy function -> op code of _C.pointwise_binary (the enum BinaryOp in pointwise.cpp)
BINARY_OPS = {
    np.add: 0, np.subtract: 1, np.multiply: 2, np.true_divide: 3, np.maximum: 4, np.minimum: 5,
    np.equal: 6, np.not_equal: 7, np.less: 8, np.less_equal: 9, np.greater: 10, np.greater_equal: 11,
}
_DIV, _MAXIMUM, _MINIMUM = 3, 4, 5
_COMPARISONS = frozenset(range(6, 12))
# op name -> op code of _C.pointwise_unary (the enum UnaryOp)
UNARY_OPS = {"neg": 0, "abs": 1, "relu": 2, "exp": 3, "log": 4, "tanh": 5, "sigmoid": 6, "sqrt": 7, "rsqrt": 8}
# the ops of floating types only (their integer inputs give float results: numpy's path)
_FLOAT_OPS = frozenset(("exp", "log", "tanh", "sigmoid", "sqrt", "rsqrt"))

_BOOL = np.dtype(np.bool_)
_F16 = np.dtype(np.float16)
_CODES = None  # numpy dtype -> dtype code of pointwise.cpp (built on first use: bfloat16 loads ml_dtypes)


def _codes():
    global _CODES
    order = (D.bool, D.uint8, D.int8, D.int16, D.int32, D.int64, D.float16, D.bfloat16, D.float32, D.float64)
    _CODES = {d.numpy_dtype: code for code, d in enumerate(order)}
    return _CODES


def dtype_code(np_dtype):
    """pointwise.cpp's code of ``np_dtype``, or None for a dtype its kernels don't take (complex)."""
    return (_CODES or _codes()).get(np_dtype)


def _binary_code(code, np_dtype):
    """The dtype code for op ``code`` on operands of ``np_dtype``, or None where numpy keeps the op."""
    dc = dtype_code(np_dtype)
    if dc is None:
        return None
    if code == _DIV and np_dtype.kind != "f" and dc != 7:
        return None  # integer true division promotes (the general path)
    if (code == _MAXIMUM or code == _MINIMUM) and np_dtype is _F16:
        return None  # numpy's float16 maximum picks between equal zeros by layout: keep its own loop
    return dc


def _number_array(number, np_dtype):
    """A Python number as a zero-dim array of ``np_dtype``, as numpy converts a weak scalar, or None."""
    if type(number) is int:
        if np_dtype.kind == "f" and not -_EXACT < number < _EXACT:
            return None
        if np_dtype.kind in "iu":
            info = np.iinfo(np_dtype)
            if not info.min <= number <= info.max:
                return None  # numpy refuses it; the general path decides
    return np.asarray(number, dtype=np_dtype)


def _operand(x, np_dtype):
    """``x``'s numpy array (a tensor of ``np_dtype``) or a zero-dim array (a number), else None."""
    if type(x) is Tensor:
        data = x._data
        return data if type(data) is np.ndarray and data.dtype == np_dtype else None
    if type(x) in (int, float, bool):
        if type(x) is bool and np_dtype is not _BOOL:
            return None
        return _number_array(x, np_dtype)
    return None


def _writable_target(out):
    """Whether ``out`` may be written element by element (writable, no element repeated)."""
    return type(out) is np.ndarray and out.flags.writeable and (out.size <= 1 or 0 not in out.strides)


def _no_partial_overlap(out, a):
    """Whether writing ``out`` while reading ``a`` is safe: no shared memory, or the same elements."""
    if a.ndim == 0 and a.base is None:  # a number's array
        return True
    if not np.may_share_memory(out, a):
        return True
    return (a.shape == out.shape and a.strides == out.strides
            and a.__array_interface__["data"][0] == out.__array_interface__["data"][0])


# -- binary ---------------------------------------------------------------------------------


def binary_arrays(code, a, b, out_dtype, shape):
    """``op(a, b)`` as a new array of ``out_dtype`` and ``shape`` (the broadcast shape), or None.

    ``a`` and ``b`` are numpy arrays of one dtype (zero-dim for numbers); None for small
    results and for dtypes the kernel doesn't take.
    """
    dc = _binary_code(code, a.dtype)
    if dc is None:
        return None
    out = np.empty(shape, out_dtype)
    _C.pointwise_binary(code, dc, out, a, b)
    return out


def binary_into(rule, code, min_elements=MIN_ELEMENTS):
    """A writer ``into(out, input, other, *, alpha=1) -> bool`` for a binary op with ``rule``.

    It computes ``op(input, other, alpha=alpha)`` into ``out`` (a numpy array) and returns True,
    or returns False, having written nothing, for calls it doesn't take (and for an ``out`` of fewer
    than ``min_elements`` elements; ``into.small`` takes those).
    """

    def into(out, input, other, *, alpha=1):
        if out.size < min_elements or not _writable_target(out):
            return False
        plan = rule.plan(input, other)
        if plan is None or not plan.direct or plan.dtype != out.dtype:
            return False
        tensor = (input if type(input) is Tensor else other)._data
        if (plan.shape if plan.shape is not None else tensor.shape) != out.shape:
            return False
        np_dtype = tensor.dtype
        a, b = _operand(input, np_dtype), _operand(other, np_dtype)
        if a is None or b is None or not _no_partial_overlap(out, a) or not _no_partial_overlap(out, b):
            return False
        dc = _binary_code(code, np_dtype)
        if dc is None:
            return False
        if type(alpha) is bool or alpha != 1 or type(alpha) is not int:
            return _binary_alpha(out, code, dc, a, b, alpha)
        _C.pointwise_binary(code, dc, out, a, b)
        return True

    # a call it takes has a plan, which exists only for arguments the op's meta function accepts, and the
    # alpha values it takes are those the meta function accepts: write_direct need not run the meta function
    into.checks_arguments = True
    if min_elements > _SMALL:
        into.small = binary_into(rule, code, _SMALL)
    return into


def _binary_alpha(out, code, dc, a, b, alpha):
    """``a + alpha * b`` / ``a - alpha * b`` into ``out``, as numpy: alpha converted to the dtype, two roundings.

    float32/float64 with a real number and integers with an int that fits; float16/bfloat16 round the
    product to their own precision in numpy, which the kernel (computing in float32) doesn't: False.
    """
    np_dtype = a.dtype
    if code > 1 or type(alpha) is bool:
        return False
    if np_dtype.kind == "f" and np_dtype.itemsize >= 4 and type(alpha) in (int, float):
        value = _number_array(alpha, np_dtype)
        if value is None:
            return False
        _C.pointwise_binary(code, dc, out, a, b, alpha_f=float(value), has_alpha=True)
        return True
    if np_dtype.kind in "iu" and type(alpha) is int:
        if _number_array(alpha, np_dtype) is None:
            return False
        _C.pointwise_binary(code, dc, out, a, b, alpha_i=alpha, has_alpha=True)
        return True
    return False


def plan_arrays(code, plan, a, b):
    """A binary plan's computation (``BinaryRule.direct``) in C++, or None.

    ``a`` and ``b`` are the operands: numpy arrays of one dtype, or one of them a Python number
    (converted to the array's dtype as numpy converts it); ``plan`` the call's
    :class:`~ember._ops._binary_plan.Plan` (direct).
    """
    array = a if type(a) is np.ndarray else b
    if type(array) is not np.ndarray:
        return None  # CuPy arrays
    shape = plan.shape if plan.shape is not None else array.shape
    if math.prod(shape) < MIN_ELEMENTS:
        return None
    np_dtype = array.dtype
    if type(a) is not np.ndarray:
        a = _number_array(a, np_dtype)
    elif type(b) is not np.ndarray:
        b = _number_array(b, np_dtype)
    if a is None or b is None or a.dtype is not np_dtype or b.dtype is not np_dtype:
        return None
    return binary_arrays(code, a, b, plan.dtype, shape)


def compare_number(code, input, other):
    """``input <op> other`` (a comparison) of a tensor and a Python number, as a new bool array, or None.

    Taken when the number leaves the tensor's dtype as it is and converts to it exactly as numpy
    converts a weak scalar (the plan leaves these calls to the general path, which computes them so).
    """
    data = input._data if type(input) is Tensor else None
    if type(data) is not np.ndarray or data.size < MIN_ELEMENTS or type(other) not in (int, float):
        return None
    np_dtype = data.dtype
    if np_dtype.kind == "b" or (type(other) is float and np_dtype.kind in "iu"):
        return None  # the number promotes the tensor
    b = _number_array(other, np_dtype)
    if b is None or _binary_code(code, np_dtype) is None:
        return None
    return binary_arrays(code, data, b, _BOOL, data.shape)


def new_result(into, shape, np_dtype, *args, **kwargs):
    """A new array of ``shape`` and ``np_dtype`` written by ``into(out, *args, **kwargs)``, or None."""
    if math.prod(shape) < MIN_ELEMENTS:
        return None
    out = np.empty(shape, np_dtype)
    return out if into(out, *args, **kwargs) else None


# -- unary ----------------------------------------------------------------------------------


def _unary_code(name, np_dtype):
    dc = dtype_code(np_dtype)
    if dc is None or dc == 0 or (dc == 6 and name == "relu"):  # relu is maximum: numpy's own for float16
        return None
    if dc < 6 and name in _FLOAT_OPS:
        return None
    return dc


def unary_array(name, data):
    """``name(data)`` (a name of :data:`UNARY_OPS`) as a new array of ``data``'s dtype, or None."""
    if type(data) is not np.ndarray or data.size < MIN_ELEMENTS:
        return None
    dc = _unary_code(name, data.dtype)
    if dc is None:
        return None
    out = np.empty(data.shape, data.dtype)
    _C.pointwise_unary(UNARY_OPS[name], dc, out, data)
    return out


def unary_into(name, min_elements=MIN_ELEMENTS):
    """A writer ``into(out, input) -> bool`` of a unary op (the input's dtype kept); ``out`` of at least
    ``min_elements`` elements (``into.small``, for the ops of numpy's bits: any size)."""
    code = UNARY_OPS[name]

    def into(out, input, inplace=False):  # (relu's flag: the caller writes into out either way)
        if out.size < min_elements or not _writable_target(out) or type(input) is not Tensor:
            return False
        data = input._data
        dc = _unary_code(name, out.dtype)
        if (type(data) is not np.ndarray or data.dtype != out.dtype or data.shape != out.shape or dc is None
                or not _no_partial_overlap(out, data)):
            return False
        _C.pointwise_unary(code, dc, out, data)
        return True

    if min_elements > _SMALL and name in _EXACT_UNARY:
        into.small = unary_into(name, _SMALL)
    return into


# -- where, clamp, conversion ---------------------------------------------------------------


def _where_operands(condition, input, other, np_dtype):
    mask = condition._data if type(condition) is Tensor else None
    if type(mask) is not np.ndarray or mask.dtype is not _BOOL or dtype_code(np_dtype) is None:
        return None
    a, b = _operand(input, np_dtype), _operand(other, np_dtype)
    if a is None or b is None:
        return None
    return mask, a, b


def where_array(condition, input, other, np_dtype, shape):
    """``where(condition, input, other)`` of the promoted ``np_dtype`` and broadcast ``shape``, or None.

    Taken when the operands need no conversion: tensors of ``np_dtype`` (a bool condition) or numbers.
    """
    if math.prod(shape) < MIN_ELEMENTS:
        return None
    operands = _where_operands(condition, input, other, np_dtype)
    if operands is None:
        return None
    out = np.empty(shape, np_dtype)
    _C.pointwise_where(out, *operands)
    return out


def where_into(out, condition, input, other):
    """``where`` written into ``out`` (its dtype the promoted one, its shape the broadcast one): True, or False."""
    if out.size < MIN_ELEMENTS:
        return False
    return _where_small(out, condition, input, other)


def _where_small(out, condition, input, other):
    """:func:`where_into` for an ``out`` of any size (a select: numpy's bits)."""
    if out.size < _SMALL or not _writable_target(out):
        return False
    operands = _where_operands(condition, input, other, out.dtype)
    if operands is None or not all(_no_partial_overlap(out, x) for x in operands):
        return False
    _C.pointwise_where(out, *operands)
    return True


where_into.small = _where_small


def _clamp_operands(input, min, max, np_dtype):  # noqa: A002 - PyTorch's argument names
    dc = dtype_code(np_dtype)
    if dc is None or dc == 0 or (min is None and max is None):
        return None
    if dc == 6 or (dc == 7 and (type(min) in (int, float) or type(max) in (int, float))):
        # float16: numpy's maximum/minimum pick between equal zeros by layout; bfloat16 clamps a number
        # bound in float32, unrounded (the numpy path)
        return None
    if min is not None and max is not None and (type(min) is Tensor or type(max) is Tensor):
        return None  # numpy's clip with array bounds returns the bound where it equals the value (0.0 and -0.0)
    x = _operand(input, np_dtype)
    low = None if min is None else _operand(min, np_dtype)
    high = None if max is None else _operand(max, np_dtype)
    if x is None or (min is not None and low is None) or (max is not None and high is None):
        return None
    return dc, x, low, high


def clamp_array(input, min, max, np_dtype):  # noqa: A002
    """``clamp(input, min, max)`` computed in ``np_dtype`` (the input's, no promotion), or None."""
    data = input._data
    if type(data) is not np.ndarray or data.size < MIN_ELEMENTS or data.dtype is not np_dtype:
        return None
    operands = _clamp_operands(input, min, max, np_dtype)
    if operands is None:
        return None
    out = np.empty(np.broadcast_shapes(*(x.shape for x in operands[1:] if x is not None)), np_dtype)
    _C.pointwise_clamp(operands[0], out, *operands[1:])
    return out


def clamp_into(out, input, min=None, max=None):  # noqa: A002
    """``clamp`` written into ``out`` of the input's dtype and the broadcast shape: True, or False."""
    if out.size < MIN_ELEMENTS:
        return False
    return _clamp_small(out, input, min, max)


def _clamp_small(out, input, min=None, max=None):  # noqa: A002
    """:func:`clamp_into` for an ``out`` of any size (the kernel's clamp is numpy's clip, bit for bit)."""
    if out.size < _SMALL or not _writable_target(out) or type(input) is not Tensor:
        return False
    if input._data.dtype != out.dtype:
        return False
    operands = _clamp_operands(input, min, max, out.dtype)
    if operands is None or not all(x is None or _no_partial_overlap(out, x) for x in operands[1:]):
        return False
    _C.pointwise_clamp(operands[0], out, *operands[1:])
    return True


clamp_into.small = _clamp_small


# the pairs _C.pointwise_convert converts bit for bit as numpy (not: bfloat16 to integers, which
# ml_dtypes saturates, and float64/int32/int64 to float16/bfloat16, which the kernel rounds twice,
# through float32); no op converts through it yet: the tests use this to check the kernel
def _converts(src, dst):
    return not (src == 7 and dst in (1, 2, 3, 4, 5)) and not (src in (4, 5, 9) and dst in (6, 7))


def large(*operands):
    """Whether one of ``operands`` is a tensor of at least :data:`MIN_ELEMENTS` elements (a cheap first test)."""
    for x in operands:
        if type(x) is Tensor and x._data.size >= MIN_ELEMENTS:
            return True
    return False


def same_dtype_into(code, min_elements=MIN_ELEMENTS):
    """A writer ``into(out, input, other, **options) -> bool`` for an op without a plan (``div``, ``maximum``).

    It takes the calls whose result dtype is the operands' own: tensors of ``out``'s dtype and
    numbers (converted to it); ``div`` with a rounding mode is refused; ``out`` of at least
    ``min_elements`` elements (``into.small``: any size).
    """

    def into(out, input, other, *, rounding_mode=None):
        if rounding_mode is not None or out.size < min_elements or not _writable_target(out):
            return False
        if type(input) is not Tensor and type(other) is not Tensor:
            return False
        np_dtype = out.dtype
        a, b = _operand(input, np_dtype), _operand(other, np_dtype)
        dc = _binary_code(code, np_dtype)
        if a is None or b is None or dc is None or not _no_partial_overlap(out, a) or not _no_partial_overlap(out, b):
            return False
        _C.pointwise_binary(code, dc, out, a, b)
        return True

    if min_elements > _SMALL:
        into.small = same_dtype_into(code, _SMALL)
    return into
