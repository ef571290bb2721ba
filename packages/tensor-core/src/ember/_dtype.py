"""Data types and PyTorch's type-promotion rules.

An :class:`dtype` names an element type and carries the numpy dtype used to
store it (``bfloat16`` comes from ``ml_dtypes``, imported on first use: see
:func:`load_ml_dtypes`). Promotion follows PyTorch:
values are ordered by category (bool < integer < floating < complex), and a
Python scalar or a zero-dimensional tensor only changes the result dtype when
its category is higher than that of the dimensioned tensors.
"""

from __future__ import annotations

import sys
import threading

import numpy as np

__all__ = [
    "dtype",
    "bool",
    "uint8",
    "int8",
    "int16",
    "int32",
    "int64",
    "float16",
    "bfloat16",
    "float32",
    "float64",
    "complex64",
    "complex128",
    "half",
    "float",
    "double",
    "short",
    "int",
    "long",
    "cfloat",
    "cdouble",
    "promote_types",
    "result_type",
    "can_cast",
    "set_default_dtype",
    "get_default_dtype",
    "finfo",
    "iinfo",
]

_builtin_bool, _builtin_int, _builtin_float, _builtin_complex = bool, int, float, complex

# Categories, ordered: a higher category wins in promotion.
BOOL, INTEGRAL, FLOATING, COMPLEX = 0, 1, 2, 3


class dtype:
    """An element type of a tensor, such as ``ember.float32``.

    Attributes:
        itemsize (int): bytes per element.
        is_floating_point (bool): True for float16, bfloat16, float32, float64.
        is_complex (bool): True for complex64 and complex128.
        is_signed (bool): True for every type but bool and uint8.
        numpy_dtype (numpy.dtype): the numpy dtype that stores the values.

    dtypes are singletons: compare them with ``is`` or ``==``.
    """

    __slots__ = ("name", "numpy_dtype", "itemsize", "category", "is_signed", "_safetensors_code")

    def __init__(self, name, numpy_dtype, category, safetensors_code, itemsize=None):
        # numpy_dtype None: a type from ml_dtypes, whose slot stays empty until load_ml_dtypes fills it
        self.name = name
        if numpy_dtype is not None:
            self.numpy_dtype = np.dtype(numpy_dtype)
            itemsize = self.numpy_dtype.itemsize
        self.itemsize = itemsize
        self.category = category
        self.is_signed = name not in ("bool", "uint8")
        self._safetensors_code = safetensors_code

    def __getattr__(self, attr):
        # Python calls this only when the normal look-up fails: for the empty numpy_dtype slot of an
        # ml_dtypes type (bfloat16) before ml_dtypes is loaded. Once loaded, the slot answers directly.
        if attr == "numpy_dtype" and self in _FROM_ML_DTYPES:
            load_ml_dtypes()
            return self.numpy_dtype
        raise AttributeError(f"'ember.dtype' object has no attribute '{attr}'")

    @property
    def is_floating_point(self):
        return self.category == FLOATING

    @property
    def is_complex(self):
        return self.category == COMPLEX

    def to_real(self):
        """The real dtype of the same precision (complex64 -> float32); others unchanged."""
        return _COMPLEX_TO_REAL.get(self, self)

    def to_complex(self):
        """The complex dtype of the same precision (float32 -> complex64).

        Raises:
            RuntimeError: for integer and bool dtypes, which have no complex form.
        """
        if self.category == COMPLEX:
            return self
        if self not in _REAL_TO_COMPLEX:
            raise RuntimeError(f"to_complex: {self} has no complex counterpart")
        return _REAL_TO_COMPLEX[self]

    def __repr__(self):
        return f"ember.{self.name}"

    def __reduce__(self):
        return self.name


bool = dtype("bool", np.bool_, BOOL, "BOOL")  # noqa: A001 - PyTorch's name
uint8 = dtype("uint8", np.uint8, INTEGRAL, "U8")
int8 = dtype("int8", np.int8, INTEGRAL, "I8")
int16 = dtype("int16", np.int16, INTEGRAL, "I16")
int32 = dtype("int32", np.int32, INTEGRAL, "I32")
int64 = dtype("int64", np.int64, INTEGRAL, "I64")
float16 = dtype("float16", np.float16, FLOATING, "F16")
bfloat16 = dtype("bfloat16", None, FLOATING, "BF16", itemsize=2)  # numpy dtype: ml_dtypes.bfloat16, on first use
float32 = dtype("float32", np.float32, FLOATING, "F32")
float64 = dtype("float64", np.float64, FLOATING, "F64")
complex64 = dtype("complex64", np.complex64, COMPLEX, "C64")
complex128 = dtype("complex128", np.complex128, COMPLEX, "C128")

# PyTorch's aliases.
half, float, double = float16, float32, float64  # noqa: A001
short, int, long = int16, int32, int64  # noqa: A001
cfloat, cdouble = complex64, complex128

ALL_DTYPES = (bool, uint8, int8, int16, int32, int64, float16, bfloat16, float32, float64, complex64, complex128)
BY_NAME = {d.name: d for d in ALL_DTYPES}
# ember dtypes stored as an ml_dtypes type -> that type's name in ml_dtypes
_FROM_ML_DTYPES = {bfloat16: "bfloat16"}
_NUMPY_TO_DTYPE = {d.numpy_dtype: d for d in ALL_DTYPES if d not in _FROM_ML_DTYPES}  # + bfloat16 once loaded
_REAL_TO_COMPLEX = {float16: complex64, bfloat16: complex64, float32: complex64, float64: complex128}
_COMPLEX_TO_REAL = {complex64: float32, complex128: float64}


# ---------------------------------------------------------------------------
# ml_dtypes, loaded on first use.
#
# Initialising ml_dtypes' extension module takes most of a second, far more than the rest of
# ``import ember``, and most programs never touch bfloat16. So ``ember.bfloat16`` exists from the
# start, but its numpy dtype is resolved by load_ml_dtypes the first time anything reads it (a
# bfloat16 tensor, a cast to it, finfo). Tables keyed by numpy dtypes learn it at that moment:
# _NUMPY_TO_DTYPE here, and the sets other modules make with numpy_dtype_set.

_ml_dtypes_lock = threading.Lock()
_ml_dtypes_loaded = False  # (a flag: reading an empty slot would call dtype.__getattr__, which loads)
_waiting_sets = []  # (set, dtypes): sets from numpy_dtype_set that still lack ml_dtypes' numpy dtypes


def load_ml_dtypes():
    """Import ml_dtypes and give ``bfloat16`` its numpy dtype (once; later calls return at once).

    Called by the first read of ``bfloat16.numpy_dtype``; call it directly to pay the cost up front.
    """
    global _ml_dtypes_loaded
    with _ml_dtypes_lock:
        if _ml_dtypes_loaded:
            return
        import ml_dtypes  # the slow part (its extension module registers the types with numpy)

        resolved = {d: np.dtype(getattr(ml_dtypes, name)) for d, name in _FROM_ML_DTYPES.items()}
        # fill the tables before the slots: another thread that reads a filled slot sees complete tables
        for d, np_dtype in resolved.items():
            _NUMPY_TO_DTYPE[np_dtype] = d
        for numpy_dtypes, dtypes in _waiting_sets:
            numpy_dtypes.update(resolved[d] for d in dtypes)
        _waiting_sets.clear()
        for d, np_dtype in resolved.items():
            d.numpy_dtype = np_dtype
        _ml_dtypes_loaded = True


def numpy_dtype_set(dtypes):
    """A set of the numpy dtypes of ``dtypes`` that modules can build at import without loading ml_dtypes.

    The numpy dtype of bfloat16 joins the set when ml_dtypes loads, before any array of that dtype can
    exist, so ``array.dtype in the_set`` always answers as if the set had been complete from the start.
    """
    dtypes = tuple(dtypes)
    waiting = [d for d in dtypes if d in _FROM_ML_DTYPES]
    with _ml_dtypes_lock:
        if waiting and not _ml_dtypes_loaded:
            numpy_dtypes = {d.numpy_dtype for d in dtypes if d not in _FROM_ML_DTYPES}
            _waiting_sets.append((numpy_dtypes, waiting))
            return numpy_dtypes
    return {d.numpy_dtype for d in dtypes}


def numpy_dtype_name(np_dtype):
    """``np_dtype.name`` without numpy's Python-level property (about 3 us a read on a slow host): the name of
    the ember dtype stored as ``np_dtype``, which is numpy's name for it, or numpy's own for other dtypes."""
    known = _NUMPY_TO_DTYPE.get(np_dtype)
    return known.name if known is not None else np_dtype.name


def from_numpy_dtype(np_dtype):
    """The ember dtype stored as ``np_dtype``.

    Raises:
        TypeError: for numpy dtypes ember has no counterpart for (uint16, str, object, ...).
    """
    try:
        return _NUMPY_TO_DTYPE[np_dtype]
    except KeyError:
        pass
    try:
        return _NUMPY_TO_DTYPE[np.dtype(np_dtype)]
    except (KeyError, TypeError):
        if "ml_dtypes" in sys.modules and not _ml_dtypes_loaded:
            # an ml_dtypes array made before ember needed ml_dtypes itself (cheap: the module is imported)
            load_ml_dtypes()
            return from_numpy_dtype(np_dtype)
        raise TypeError(
            f"can't convert np.ndarray of type {np.dtype(np_dtype)}. The only supported types are: "
            + ", ".join(d.name for d in ALL_DTYPES)
        ) from None


# ---------------------------------------------------------------------------
# Promotion between two dtypes (both "dimensioned tensors").


def _build_promotion_table():
    """Promotion of every pair, following PyTorch's lattice.

    Within a category the wider type wins. Mixed signed/unsigned integers go to
    the smallest signed type holding both (uint8 with int8 -> int16). float16
    with bfloat16 -> float32. Across categories the higher category wins, but
    complex keeps the precision of a wider float (complex64 with float64 ->
    complex128).
    """
    int_rank = {bool: 0, uint8: 1, int8: 1, int16: 2, int32: 3, int64: 4}
    float_rank = {float16: 1, bfloat16: 1, float32: 2, float64: 3}

    def promote(a, b):
        if a is b:
            return a
        if a.category < b.category:
            a, b = b, a
        # now a.category >= b.category
        if a.category == COMPLEX:
            if b.category == COMPLEX:
                return complex128 if complex128 in (a, b) else complex64
            if b is float64:
                return complex128
            return a
        if a.category == FLOATING:
            if b.category == FLOATING:
                if {a, b} == {float16, bfloat16}:
                    return float32
                return a if float_rank[a] >= float_rank[b] else b
            return a
        if a.category == INTEGRAL:
            if b is bool:
                return a
            if {a, b} == {uint8, int8}:
                return int16
            if a is uint8:
                return b
            if b is uint8:
                return a
            return a if int_rank[a] >= int_rank[b] else b
        return bool

    return {(a, b): promote(a, b) for a in ALL_DTYPES for b in ALL_DTYPES}


_PROMOTION = _build_promotion_table()


def promote_types(type1, type2):
    """The smallest dtype to which both ``type1`` and ``type2`` can be cast.

    Example:
        >>> import ember
        >>> ember.promote_types(ember.uint8, ember.int8)
        ember.int16
    """
    return _PROMOTION[type1, type2]


# ---------------------------------------------------------------------------
# Default dtype


# Process-wide, as in PyTorch.
_default = {"float": float32}


def set_default_dtype(d):
    """Set the dtype of floating-point tensors created from Python floats.

    Args:
        d (dtype): ``ember.float32`` (the default), ``ember.float64``,
            ``ember.float16`` or ``ember.bfloat16``.

    Raises:
        TypeError: if ``d`` is not a floating-point dtype.
    """
    if not isinstance(d, dtype) or d.category != FLOATING:
        raise TypeError(f"only floating-point types are supported as the default type, got {d}")
    _default["float"] = d


def get_default_dtype():
    """The current default floating-point dtype (``ember.float32`` unless changed)."""
    return _default["float"]


def default_complex_dtype():
    """The complex dtype matching the default float dtype (complex64 for float32)."""
    return complex128 if _default["float"] is float64 else complex64


# ---------------------------------------------------------------------------
# result_type: tensors, zero-dim tensors and Python scalars together.


def scalar_dtype(value):
    """The dtype a Python scalar takes when it must become a tensor on its own."""
    t = type(value)
    if t is _builtin_bool or isinstance(value, (_builtin_bool, np.bool_)):
        return bool
    if t is _builtin_int or isinstance(value, (_builtin_int, np.integer)):
        return int64
    if t is _builtin_float or isinstance(value, (_builtin_float, np.floating)):
        return _default["float"]
    if isinstance(value, (_builtin_complex, np.complexfloating)):
        return default_complex_dtype()
    raise TypeError(f"expected a Python number, got {type(value).__name__}")


def _combine_categories(higher, lower):
    """Merge a result of higher priority with one of lower priority (None = absent).

    The lower-priority participant only matters when its category exceeds the
    higher one's; a complex scalar keeps the precision of a floating tensor.
    """
    if higher is None:
        return lower
    if lower is None:
        return higher
    if higher.category == COMPLEX:
        return higher
    if lower.category == COMPLEX:
        return higher.to_complex() if higher.category == FLOATING else lower
    if higher.category == FLOATING:
        return higher
    if higher is bool or lower.category == FLOATING:
        return _PROMOTION[higher, lower]
    return higher


def _category_result(current, new):
    return new if current is None else _PROMOTION[current, new]


def result_type_of(operands):
    """result_type over any number of operands (tensors and Python scalars).

    Priority: tensors with at least one dimension, then zero-dim tensors, then
    Python scalars. See :func:`result_type`.
    """
    dim_result = zero_result = scalar_result = None
    for x in operands:
        d = getattr(x, "dtype", None)
        if isinstance(d, dtype):
            if x.ndim > 0:
                dim_result = _category_result(dim_result, d)
            else:
                zero_result = _category_result(zero_result, d)
        elif x is None:
            continue
        else:
            scalar_result = _category_result(scalar_result, scalar_dtype(x))
    result = _combine_categories(dim_result, _combine_categories(zero_result, scalar_result))
    if result is None:
        raise TypeError("result_type needs at least one tensor or number")
    return result


def result_type(tensor1, tensor2):
    """The dtype of an arithmetic operation on ``tensor1`` and ``tensor2``.

    Each argument is a tensor or a Python number. A number, or a zero-dim
    tensor, promotes the result only when its category (bool < integer <
    floating < complex) is higher than that of the dimensioned tensors.

    Example:
        >>> import ember
        >>> ember.result_type(ember.tensor([1, 2], dtype=ember.int32), 1.0)
        ember.float32
        >>> ember.result_type(ember.tensor([1, 2], dtype=ember.uint8), 1000)
        ember.uint8
    """
    return result_type_of((tensor1, tensor2))


_CAN_CAST_ORDER = {BOOL: 0, INTEGRAL: 1, FLOATING: 2, COMPLEX: 3}


def can_cast(from_, to):
    """Whether PyTorch's casting rules allow ``from_`` to be cast to ``to`` in an operation.

    A cast is allowed unless it lowers the category (complex -> float,
    float -> integer, non-bool -> bool).

    Example:
        >>> import ember
        >>> ember.can_cast(ember.float64, ember.int32)
        False
    """
    return _CAN_CAST_ORDER[from_.category] <= _CAN_CAST_ORDER[to.category]


# ---------------------------------------------------------------------------
# finfo / iinfo


class finfo:
    """Machine limits of a floating-point or complex dtype (complex: of its real part).

    Attributes: ``bits``, ``eps``, ``max``, ``min``, ``tiny`` (= ``smallest_normal``),
    ``resolution``, ``dtype`` (name string).

    Raises:
        TypeError: for integer or bool dtypes.
    """

    def __init__(self, type=None):  # noqa: A002 - PyTorch's argument name
        type = get_default_dtype() if type is None else type
        if type.category not in (FLOATING, COMPLEX):
            raise TypeError(f"finfo: expected a floating point or complex dtype, got {type}")
        np_dtype = type.to_real().numpy_dtype  # (bfloat16: loads ml_dtypes)
        if type.to_real() in _FROM_ML_DTYPES:
            import ml_dtypes  # loaded by the line above; numpy's finfo doesn't know its types

            info = ml_dtypes.finfo(np_dtype)
        else:
            info = np.finfo(np_dtype)
        self.bits = info.bits
        self.eps = _builtin_float(info.eps)
        self.max = _builtin_float(info.max)
        self.min = _builtin_float(info.min)
        self.tiny = self.smallest_normal = _builtin_float(info.smallest_normal)
        self.resolution = 10.0**-info.precision  # exactly 1e-06, not float32(1e-06)
        self.dtype = type.to_real().name

    def __repr__(self):
        return (
            f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, eps={self.eps:g}, "
            f"smallest_normal={self.tiny:g}, tiny={self.tiny:g}, dtype={self.dtype})"
        )


class iinfo:
    """Machine limits of an integer dtype: ``bits``, ``min``, ``max``, ``dtype``.

    Raises:
        TypeError: for floating-point, complex or bool dtypes.
    """

    def __init__(self, type):  # noqa: A002
        if type.category != INTEGRAL:
            raise TypeError(f"iinfo: expected an integer dtype, got {type}")
        info = np.iinfo(type.numpy_dtype)
        self.bits, self.min, self.max, self.dtype = info.bits, _builtin_int(info.min), _builtin_int(info.max), type.name

    def __repr__(self):
        return f"iinfo(min={self.min}, max={self.max}, dtype={self.dtype})"
