"""Factory ops (empty, zeros, arange, ...), copies and conversions.

Factory ops take ``dtype``, ``device`` and ``requires_grad`` keywords; the
dispatcher picks the device from ``device`` when no tensor argument gives one.
"""

from __future__ import annotations

import builtins
import math

import numpy as np

from .. import _dtype as D
from .._device import canonical_device, get_backend
from .._layout import check_strided
from .._meta import MetaArray, contiguous_strides, dense_strides_like
from .._tensor import Tensor
from ._array_module import array_namespace, as_array
from ._registry import COMPOSITE, defop
from ._shapes import broadcast_shapes, normalize_size
from ._strided_copy import copy_array, copy_into

__all__ = []  # ops are exported by ember/__init__.py from the registry

#: Ops of this module that are also Tensor methods (see ember._tensor_methods).
METHODS = ["clone", "copy_", "fill_", "zero_"]


_FACTORY = ("factory",)


def _float_dtype(dtype):
    return D.get_default_dtype() if dtype is None else dtype


def _check_dtype(dtype, name="dtype"):
    if dtype is not None and not isinstance(dtype, D.dtype):
        raise TypeError(f"{name} must be an ember.dtype, not {type(dtype).__name__}")


# -- empty / zeros / ones / full ----------------------------------------------


def _factory_meta(name):
    def meta(*size, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False, memory_format=None):
        check_strided(name, layout)
        _check_dtype(dtype)
        return MetaArray(normalize_size(size), _float_dtype(dtype).numpy_dtype)

    meta.__name__ = name
    meta.__doc__ = f"""A tensor of shape ``size`` filled with {name_doc[name]}.

    Args:
        *size (int or sequence of int): the shape.
        dtype (ember.dtype, optional): element type; the default float dtype if omitted.
        device (ember.device or str, optional): where to allocate (cpu by default).
        requires_grad (bool): whether autograd records operations on the result.

    Raises:
        RuntimeError: for negative sizes.
        TypeError: for non-integer sizes.

    Example:
        >>> import ember
        >>> ember.{name}(2, 3).shape
        ember.Size([2, 3])
    """
    return meta


name_doc = {"empty": "uninitialised values", "zeros": "zeros", "ones": "ones"}


def _factory_kernel(np_fn):
    def kernel(*size, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False, memory_format=None):
        return np_fn(normalize_size(size), _float_dtype(dtype).numpy_dtype)

    return kernel


empty = defop("empty", _factory_meta("empty"), cpu=_factory_kernel(np.empty), has_out=True, tags=_FACTORY)
zeros = defop("zeros", _factory_meta("zeros"), cpu=_factory_kernel(np.zeros), has_out=True, tags=_FACTORY)
ones = defop("ones", _factory_meta("ones"), cpu=_factory_kernel(np.ones), has_out=True, tags=_FACTORY)


def check_number_argument(op, name, position, value, *, tensor_ok=True):
    """Refuse a fill value that is not a number, as PyTorch's argument parser does.

    A zero-dim tensor counts as a number (``ember.full((2,), ember.tensor(3.))``), as in PyTorch;
    ``tensor_ok=False`` refuses tensors with dimensions in the same words, where PyTorch's parser
    does (``full``), and leaves them to the op's own check otherwise (``fill_``'s RuntimeError).

    Raises:
        TypeError: "full(): argument 'fill_value' (position 2) must be Number, not NoneType" for
            None, strings, lists and other non-numbers (None once became NaN silently).
    """
    if isinstance(value, (builtins.bool, builtins.int, builtins.float, builtins.complex, np.number, np.bool_)):
        return
    if isinstance(value, Tensor) and (tensor_ok or value._data.ndim == 0):
        return
    expected = "Number or Tensor" if tensor_ok else "Number"
    raise TypeError(f"{op}(): argument '{name}' (position {position}) must be {expected}, not {type(value).__name__}")


def _fill_dtype(fill_value, dtype):
    if dtype is not None:
        return dtype
    if isinstance(fill_value, Tensor):
        return fill_value.dtype
    return D.scalar_dtype(fill_value)


def _full_meta(size, fill_value, *, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False):
    """A tensor of shape ``size`` filled with ``fill_value``.

    Args:
        size (sequence of int): the shape.
        fill_value (number): the value; it also picks the dtype when ``dtype`` is
            omitted (bool -> bool, int -> int64, float -> default float, complex ->
            default complex).
        dtype (ember.dtype, optional): element type.
        device (ember.device or str, optional): where to allocate.

    Example:
        >>> import ember
        >>> ember.full((2,), 7)
        tensor([7, 7])
    """
    check_strided("full", layout)
    _check_dtype(dtype)
    check_number_argument("full", "fill_value", 2, fill_value, tensor_ok=False)
    out_dtype = _fill_dtype(fill_value, dtype)
    if not isinstance(fill_value, Tensor):
        check_scalar_fits(fill_value, out_dtype)
    return MetaArray(normalize_size((size,)), out_dtype.numpy_dtype)


def _full_cpu(size, fill_value, *, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False):
    np_dtype = _fill_dtype(fill_value, dtype).numpy_dtype
    return np.full(normalize_size((size,)), _cast_scalar(fill_value, np_dtype), dtype=np_dtype)


def check_scalar_fits(value, dtype):
    """Check that the Python number ``value`` can be stored as ``dtype``, as PyTorch does.

    Anything converts to bool, and a float is truncated toward zero for an integer
    dtype; what can't be stored raises: a complex number with an imaginary part
    for a real dtype, a finite number beyond the dtype's range (for an unsigned
    dtype, negative numbers down to ``-max`` wrap around, as in PyTorch), NaN or
    infinity for an integer dtype.

    Raises:
        RuntimeError: "value cannot be converted to type ... without overflow".
    """
    if dtype is D.bool or dtype.category == D.COMPLEX:
        return
    if isinstance(value, (builtins.complex, np.complexfloating)):
        if value.imag != 0:
            raise RuntimeError(f"value cannot be converted to type {dtype.name} without overflow")
        value = value.real
    if isinstance(value, (bool, np.bool_)):
        return
    if dtype.category == D.FLOATING:
        if isinstance(value, (float, np.floating)) and math.isfinite(value) and abs(value) > D.finfo(dtype).max:
            raise RuntimeError(f"value cannot be converted to type {dtype.name} without overflow")
        if isinstance(value, (int, np.integer)) and abs(value) > D.finfo(dtype).max:
            raise RuntimeError(f"value cannot be converted to type {dtype.name} without overflow")
        return
    info = D.iinfo(dtype)
    if isinstance(value, (float, np.floating)) and not math.isfinite(value):
        raise RuntimeError(f"value cannot be converted to type {dtype.name} without overflow")
    low = -info.max if info.min == 0 else info.min
    if not low <= value <= info.max:
        raise RuntimeError(f"value cannot be converted to type {dtype.name} without overflow")


def _cast_scalar(value, np_dtype):
    """``value`` as a numpy scalar of ``np_dtype``, wrapping integers like a C cast."""
    if isinstance(value, Tensor):
        value = value.item()
    return _convert_array(np.asarray(value), np_dtype)[()]


full = defop("full", _full_meta, cpu=_full_cpu, has_out=True, tags=_FACTORY)


def _empty_strided_meta(size, stride, *, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False):
    """An uninitialised tensor with the given ``size`` and ``stride`` (elements)."""
    check_strided("empty_strided", layout)
    size = normalize_size((size,))
    stride = tuple(stride)
    if len(stride) != len(size):
        raise RuntimeError(f"mismatch in length of strides and shape: {len(stride)} vs {len(size)}")
    return MetaArray(size, _float_dtype(dtype).numpy_dtype, stride)


def _empty_strided_cpu(size, stride, *, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False):
    size = normalize_size((size,))
    np_dtype = _float_dtype(dtype).numpy_dtype
    extent = 1 + sum((n - 1) * s for n, s in zip(size, stride)) if all(size) else 0
    buf = np.empty(extent, np_dtype)
    return np.ndarray(size, np_dtype, buffer=buf, strides=tuple(s * np_dtype.itemsize for s in stride))


empty_strided = defop("empty_strided", _empty_strided_meta, cpu=_empty_strided_cpu, tags=_FACTORY)


# -- *_like ------------------------------------------------------------------------


def _like(name, factory, doc_fill):
    def decomposition(input, *, dtype=None, layout=None, device=None, requires_grad=False, memory_format=None):
        return factory(
            input.shape,
            dtype=input.dtype if dtype is None else dtype,
            device=input.device if device is None else device,
            requires_grad=requires_grad,
        )

    def meta(input, *, dtype=None, layout=None, device=None, requires_grad=False, memory_format=None):
        check_strided(name, layout)
        _check_dtype(dtype)
        return MetaArray(input._data.shape, (input.dtype if dtype is None else dtype).numpy_dtype)

    meta.__name__ = name
    meta.__doc__ = f"""A tensor shaped like ``input`` filled with {doc_fill}, with ``input``'s dtype and device
    unless ``dtype``/``device`` are given."""
    return defop(name, meta, category=COMPOSITE, decomposition=decomposition, tags=_FACTORY)


empty_like = _like("empty_like", empty, "uninitialised values")
zeros_like = _like("zeros_like", zeros, "zeros")
ones_like = _like("ones_like", ones, "ones")


def _full_like_decomp(
    input, fill_value, *, dtype=None, layout=None, device=None, requires_grad=False, memory_format=None
):
    return full(
        input.shape,
        fill_value,
        dtype=input.dtype if dtype is None else dtype,
        device=input.device if device is None else device,
        requires_grad=requires_grad,
    )


def _full_like_meta(
    input, fill_value, *, dtype=None, layout=None, device=None, requires_grad=False, memory_format=None
):
    """A tensor shaped like ``input`` filled with ``fill_value`` (``input``'s dtype unless ``dtype``).

    Raises:
        TypeError: if ``fill_value`` is not a number (or a zero-dim tensor).
    """
    check_strided("full_like", layout)
    check_number_argument("full_like", "fill_value", 2, fill_value, tensor_ok=False)
    return MetaArray(input._data.shape, (input.dtype if dtype is None else dtype).numpy_dtype)


full_like = defop("full_like", _full_like_meta, category=COMPOSITE, decomposition=_full_like_decomp, tags=_FACTORY)


# -- ranges --------------------------------------------------------------------------


def _arange_args(start, end, step):
    if end is None:
        start, end = 0, start
    values = [v.item() if isinstance(v, Tensor) else v for v in (start, end, step)]
    return values


def _arange_dtype(values, dtype):
    if dtype is not None:
        return dtype
    if all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in values):
        return D.int64
    return D.get_default_dtype()


def _arange_length(start, end, step):
    if step == 0:
        raise RuntimeError("step must be nonzero")
    for name, v in (("start", start), ("end", end)):
        if isinstance(v, float) and not math.isfinite(v):
            raise RuntimeError(f"unsupported range: {name} must be finite, got {v}")
    if (step > 0 and start > end) or (step < 0 and start < end):
        raise RuntimeError(
            f"upper bound and lower bound inconsistent with step sign: start={start}, end={end}, step={step}"
        )
    if all(isinstance(v, (int, np.integer)) for v in (start, end, step)):
        # exact for any size: (end - start) / step in floats rounds past 2**53 (arange(2**63 - 1) gave 2**63)
        return max(0, -((int(start) - int(end)) // int(step)))
    return max(0, math.ceil((end - start) / step))


def _arange_meta(
    start, end=None, step=1, *, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False
):
    """Values from ``start`` (inclusive) to ``end`` (exclusive) spaced by ``step``.

    ``arange(n)`` counts from 0. The dtype is int64 when every bound is an int,
    the default float dtype otherwise.

    Raises:
        RuntimeError: for ``step == 0``, non-finite bounds, or a step pointing away from ``end``.

    Example:
        >>> import ember
        >>> ember.arange(1, 4)
        tensor([1, 2, 3])
    """
    check_strided("arange", layout)
    start, end, step = _arange_args(start, end, step)
    n = _arange_length(start, end, step)
    return MetaArray((n,), _arange_dtype((start, end, step), dtype).numpy_dtype)


def _arange_cpu(
    start, end=None, step=1, *, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False
):
    start, end, step = _arange_args(start, end, step)
    n = _arange_length(start, end, step)
    out_dtype = _arange_dtype((start, end, step), dtype).numpy_dtype
    # Compute as start + i*step in double (or int64) precision, as PyTorch does, then cast.
    work = np.int64 if out_dtype.kind in "iub" and all(isinstance(v, int) for v in (start, end, step)) else np.float64
    return (start + np.arange(n, dtype=work) * step).astype(out_dtype, copy=False)


arange = defop("arange", _arange_meta, cpu=_arange_cpu, has_out=True, tags=_FACTORY)


def _linspace_meta(start, end, steps, *, dtype=None, layout=None, device=None, requires_grad=False):
    """``steps`` values evenly spaced from ``start`` to ``end``, both included.

    Raises:
        RuntimeError: if ``steps`` is negative.

    Example:
        >>> import ember
        >>> ember.linspace(0, 1, 5)
        tensor([0.0000, 0.2500, 0.5000, 0.7500, 1.0000])
    """
    check_strided("linspace", layout)
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    complex_bounds = any(
        isinstance(v, (builtins.complex, np.complexfloating)) or (isinstance(v, Tensor) and v.is_complex())
        for v in (start, end)
    )
    default = D.default_complex_dtype() if complex_bounds else D.get_default_dtype()
    return MetaArray((steps,), (default if dtype is None else dtype).numpy_dtype)


def _scalar_value(v):
    return v.item() if isinstance(v, Tensor) else v


def _linspace_cpu(start, end, steps, *, dtype=None, layout=None, device=None, requires_grad=False):
    out = _linspace_meta(start, end, steps, dtype=dtype)
    start, end = _scalar_value(start), _scalar_value(end)
    if out.dtype.kind in "biu":
        # As PyTorch: the bounds become integers first, the points are truncated.
        start, end = math.trunc(start.real if isinstance(start, builtins.complex) else start), math.trunc(
            end.real if isinstance(end, builtins.complex) else end
        )
        return np.trunc(_symmetric_linspace(float(start), float(end), steps)).astype(out.dtype)
    if isinstance(start, builtins.complex) or isinstance(end, builtins.complex):
        return np.linspace(start, end, steps).astype(out.dtype)
    return _symmetric_linspace(float(start), float(end), steps).astype(out.dtype)


def _symmetric_linspace(start, end, steps):
    """``steps`` float64 points from ``start`` to ``end``: the first half counted up from
    ``start``, the second half down from ``end``, so both ends are exact (PyTorch's rounding)."""
    if steps == 1:
        return np.array([start])
    step = (end - start) / (steps - 1) if steps > 1 else 0.0
    i = np.arange(steps, dtype=np.float64)
    half = steps // 2
    return np.concatenate([start + step * i[:half], end - step * (steps - 1 - i[half:])])


linspace = defop("linspace", _linspace_meta, cpu=_linspace_cpu, has_out=True, tags=_FACTORY)


def _logspace_meta(start, end, steps, base=10.0, *, dtype=None, layout=None, device=None, requires_grad=False):
    """``steps`` values ``base ** x`` for ``x`` evenly spaced from ``start`` to ``end``.

    Example:
        >>> import ember
        >>> ember.logspace(0, 2, 3)
        tensor([  1.,  10., 100.])
    """
    check_strided("logspace", layout)
    return _linspace_meta(start, end, steps, dtype=dtype)


def _logspace_cpu(start, end, steps, base=10.0, *, dtype=None, layout=None, device=None, requires_grad=False):
    out = _logspace_meta(start, end, steps, base, dtype=dtype)
    values = np.power(float(base), np.linspace(_scalar_value(start), _scalar_value(end), steps))
    return values.astype(out.dtype)


logspace = defop("logspace", _logspace_meta, cpu=_logspace_cpu, has_out=True, tags=_FACTORY)


def _eye_meta(n, m=None, *, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False):
    """A 2-D tensor with ones on the diagonal: shape ``(n, m)`` (``m`` defaults to ``n``).

    Raises:
        RuntimeError: for negative ``n`` or ``m``.

    Example:
        >>> import ember
        >>> ember.eye(2)
        tensor([[1., 0.],
                [0., 1.]])
    """
    check_strided("eye", layout)
    m = n if m is None else m
    if n < 0 or m < 0:
        raise RuntimeError(f"n and m must be non-negative, got n={n}, m={m}")
    return MetaArray((n, m), _float_dtype(dtype).numpy_dtype)


def _eye_cpu(n, m=None, *, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False):
    return np.eye(n, n if m is None else m, dtype=_float_dtype(dtype).numpy_dtype)


eye = defop("eye", _eye_meta, cpu=_eye_cpu, has_out=True, tags=_FACTORY)


def _scalar_tensor_meta(s, *, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False):
    """A zero-dim tensor holding the number ``s`` (default float dtype unless ``dtype``).

    Raises:
        TypeError: if ``s`` is not a number.
    """
    check_strided("scalar_tensor", layout)
    check_number_argument("scalar_tensor", "s", 1, s, tensor_ok=False)
    return MetaArray((), _float_dtype(dtype).numpy_dtype)


def _scalar_tensor_cpu(s, *, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False):
    return np.array(s).astype(_float_dtype(dtype).numpy_dtype)


scalar_tensor = defop("scalar_tensor", _scalar_tensor_meta, cpu=_scalar_tensor_cpu, tags=_FACTORY)


# -- complex / polar -------------------------------------------------------------------


def _complex_meta(real, imag):
    """A complex tensor from its real and imaginary parts (float32 -> complex64, float64 -> complex128).

    Raises:
        RuntimeError: if the parts are not both float or float64, or differ in dtype.
    """
    if real.dtype is not imag.dtype:
        raise RuntimeError(
            f"Expected object of scalar type {real.dtype} but got scalar type {imag.dtype} for second argument"
        )
    if real.dtype not in (D.float16, D.float32, D.float64):
        raise RuntimeError(
            f"Expected both inputs to be Half, Float or Double tensors but got {real.dtype} and {imag.dtype}"
        )
    return MetaArray(broadcast_shapes(real._data.shape, imag._data.shape), real.dtype.to_complex().numpy_dtype)


def _complex_cpu(real, imag):
    if type(real._data) is not np.ndarray:
        return _complex_xp(array_namespace(real._data), real, imag)
    out = np.empty(np.broadcast_shapes(real._data.shape, imag._data.shape), real.dtype.to_complex().numpy_dtype)
    out.real = real._data
    out.imag = imag._data
    return out


def _complex_xp(xp, real, imag):
    """:func:`complex` on GPU arrays (``xp`` is CuPy): the parts interleaved, then read as complex numbers.

    Exact for every value (``real + 1j * imag`` is not: ``1j * inf`` has a NaN real part).
    """
    dtype = real.dtype.to_complex().numpy_dtype
    part = np.dtype(np.float32 if dtype == np.complex64 else np.float64)
    re, im = xp.broadcast_arrays(real._data.astype(part, copy=False), imag._data.astype(part, copy=False))
    pairs = xp.stack((re, im), axis=-1)  # (..., 2), C-contiguous
    return pairs.view(dtype).reshape(re.shape)


complex = defop("complex", _complex_meta, cpu=_complex_cpu, has_out=True)  # noqa: A001 - PyTorch's name


def _polar_meta(abs, angle):  # noqa: A002
    """The complex tensor ``abs * (cos(angle) + i sin(angle))``.

    Raises:
        RuntimeError: as :func:`ember.complex` for mismatched or non-float dtypes.
    """
    return _complex_meta(abs, angle)


def _polar_cpu(abs, angle):  # noqa: A002
    # as_array: numpy arithmetic on zero-dim arrays gives a scalar, not an array (CuPy arrays stay on the GPU)
    return as_array(abs._data * np.exp(1j * angle._data.astype(abs.dtype.to_complex().numpy_dtype))).astype(
        abs.dtype.to_complex().numpy_dtype
    )


polar = defop("polar", _polar_meta, cpu=_polar_cpu, has_out=True)


# -- copies and conversions -------------------------------------------------------------


class memory_format:
    """How a copy lays out its elements: ``contiguous_format`` (row-major) or
    ``preserve_format`` (the input's layout, see :func:`ember._meta.dense_strides_like`)."""

    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"ember.{self.name}"

    def __reduce__(self):
        return self.name


contiguous_format = memory_format("contiguous_format")
preserve_format = memory_format("preserve_format")


def _clone_strides(input, memory_format):
    shape = input._data.shape
    if memory_format is None or memory_format is preserve_format:
        return dense_strides_like(shape, input.stride())
    if memory_format is contiguous_format:
        return contiguous_strides(shape)
    raise RuntimeError(f"clone: unsupported memory_format {memory_format!r}; use contiguous_format or preserve_format")


def _clone_meta(input, *, memory_format=None):
    """A copy of ``input`` with its own storage (same shape, dtype, device).

    Args:
        memory_format: ``preserve_format`` (the default: a dense input keeps its
            strides, as a transposed matrix does) or ``contiguous_format`` (row-major).
    """
    return MetaArray(input._data.shape, input._data.dtype, _clone_strides(input, memory_format))


def _clone_cpu(input, *, memory_format=None):
    data = input._data
    strides = _clone_strides(input, memory_format)
    copied = copy_array(data, strides=strides)  # large arrays: the threaded copy of ember._C
    if copied is not None:
        return copied
    if strides == contiguous_strides(data.shape):
        return np.array(data, copy=True, order="C")
    itemsize = data.dtype.itemsize
    buf = np.empty(data.size, data.dtype)
    out = np.ndarray(data.shape, data.dtype, buffer=buf, strides=tuple(s * itemsize for s in strides))
    np.copyto(out, data)
    return out


clone = defop("clone", _clone_meta, cpu=_clone_cpu)


def _to_copy_meta(
    input, *, dtype=None, layout=None, device=None, pin_memory=False, non_blocking=False, memory_format=None
):
    """A copy of ``input`` converted to ``dtype`` and/or moved to ``device``.

    Raises:
        NotImplementedError: when copying data out of a meta tensor.
    """
    check_strided("_to_copy", layout)
    _check_dtype(dtype)
    target = canonical_device(device) if device is not None else input.device
    if input.device.type == "meta" and target.type != "meta":
        raise NotImplementedError("Cannot copy out of meta tensor; no data!")
    shape = input._data.shape
    strides = dense_strides_like(shape, input.stride())  # a copy keeps the layout (preserve_format)
    array = MetaArray(shape, (input.dtype if dtype is None else dtype).numpy_dtype, strides)
    return Tensor._make(array, canonical_device("meta"))


def _convert_array(array, np_dtype):
    if np_dtype.kind == "b":
        # non-zero is True; a complex value is zero only when both parts are
        value = np.not_equal(array, 0)
        return np.asarray(value) if isinstance(value, np.generic) else value  # a CuPy array stays one
    if np_dtype.kind in "iu" and array.dtype.kind in "fc":
        # float -> int truncates toward zero like C; complex drops the imaginary part
        if array.dtype.kind == "c":
            array = array.real
        with np.errstate(invalid="ignore"):
            return array.astype(np_dtype)
    with np.errstate(over="ignore", invalid="ignore"):  # overflow gives inf, as a C cast does
        if np_dtype.kind == "f" and array.dtype.kind == "c":
            return array.real.astype(np_dtype)
        return array.astype(np_dtype)


def _to_copy_cpu(
    input, *, dtype=None, layout=None, device=None, pin_memory=False, non_blocking=False, memory_format=None
):
    data = input._data
    np_dtype = data.dtype if dtype is None else dtype.numpy_dtype
    target = canonical_device(device) if device is not None else input.device
    strides = dense_strides_like(data.shape, input.stride())  # a copy keeps the layout, as clone
    if target.type == "meta":
        return Tensor._make(MetaArray(data.shape, np_dtype, strides), target)
    if target.type == "cuda" and np_dtype == data.dtype:
        # straight from the source's memory (no host copy first): pinned memory goes by DMA, asynchronously
        # with non_blocking=True (see ember.cuda._pinned.to_device)
        from ..cuda._pinned import to_device

        return Tensor._make(to_device(np.asarray(data, order="C"), target.index, non_blocking), target)
    if target.type == "cpu":
        copied = copy_array(data, np_dtype, dense_strides_like(data.shape, input.stride()))  # large arrays
        if copied is not None:
            return Tensor._make(copied, target)
    array = _convert_array(data, np_dtype)
    if target.type != "cpu":
        return Tensor._make(get_backend(target.type).from_numpy(np.asarray(array, order="C"), target.index), target)
    itemsize = np_dtype.itemsize
    if array.strides != tuple(s * itemsize for s in strides):
        out = np.ndarray(data.shape, np_dtype, buffer=np.empty(data.size, np_dtype),
                         strides=tuple(s * itemsize for s in strides))
        np.copyto(out, array)
        array = out
    return Tensor._make(array, target)


# kind="other": the kernel builds the result tensor itself, since its device may differ from the input's.
_to_copy = defop("_to_copy", _to_copy_meta, cpu=_to_copy_cpu, kind="other")


def _copy_meta(self, src, non_blocking=False):
    """Copy ``src`` into ``self`` in place, broadcasting ``src`` and converting its dtype.

    Copies between devices are allowed (it is how data moves).

    Raises:
        RuntimeError: if ``src`` does not broadcast to ``self``'s shape.
    """
    src_shape = src._data.shape if isinstance(src, Tensor) else ()
    if broadcast_shapes(self._data.shape, src_shape) != tuple(self._data.shape):
        raise RuntimeError(
            f"output with shape {list(self._data.shape)} doesn't match the broadcast shape "
            f"{list(broadcast_shapes(self._data.shape, src_shape))}"
        )


def _copy_cpu(self, src, non_blocking=False):
    if isinstance(src, Tensor):
        data = src._data if src.device.type == "cpu" else src._host_array()
    else:
        data = np.asarray(src)
    if copy_into(self._data, data):  # large arrays: the threaded copy of ember._C, converting as it goes
        return
    if data.dtype != self._data.dtype:
        data = _convert_array(data, self._data.dtype)
    np.copyto(self._data, data, casting="unsafe")


copy_ = defop("copy_", _copy_meta, cpu=_copy_cpu, kind="inplace", tags=("cross_device",))


def _fill_meta(self, value):
    """Fill ``self`` with ``value`` (a number or a zero-dim tensor), in place.

    Raises:
        TypeError: if ``value`` is neither a number nor a tensor (None, a string, a list).
        RuntimeError: if ``value`` is a tensor with dimensions, or a number that
            ``self``'s dtype can't hold (see :func:`check_scalar_fits`).
    """
    check_number_argument("fill_", "value", 2, value)
    if isinstance(value, Tensor):
        if value.ndim != 0:
            raise RuntimeError(
                f"fill_ only supports 0-dimension value tensor but got tensor with {value.ndim} dimensions."
            )
    else:
        check_scalar_fits(value, self.dtype)


def _fill_cpu(self, value):
    self._data[...] = _cast_scalar(value, self._data.dtype)


fill_ = defop("fill_", _fill_meta, cpu=_fill_cpu, kind="inplace")


def _zero_meta(self):
    """Fill ``self`` with zeros, in place."""


def _zero_cpu(self):
    self._data[...] = 0


zero_ = defop("zero_", _zero_meta, cpu=_zero_cpu, kind="inplace")


# -- CUDA kernels ------------------------------------------------------------------------------
# CuPy is imported when a kernel first runs (never by ``import ember``). Factories that make small
# arrays from host-side arithmetic (arange, linspace, eye...) build them with the CPU kernel and copy.


def _cupy():
    from ..cuda._runtime import cupy_module

    return cupy_module()


def _cuda_index(device):
    return canonical_device(device).index or 0


def _cuda_factory(name):
    def kernel(*size, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False, memory_format=None):
        cp = _cupy()
        with cp.cuda.Device(_cuda_index(device)):
            return getattr(cp, name)(normalize_size(size), _float_dtype(dtype).numpy_dtype)

    return kernel


def _full_cuda(size, fill_value, *, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False):
    cp = _cupy()
    np_dtype = _fill_dtype(fill_value, dtype).numpy_dtype
    with cp.cuda.Device(_cuda_index(device)):
        return cp.full(normalize_size((size,)), _cast_scalar(fill_value, np_dtype), dtype=np_dtype)


def _empty_strided_cuda(size, stride, *, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False):
    cp = _cupy()
    size = normalize_size((size,))
    np_dtype = _float_dtype(dtype).numpy_dtype
    extent = 1 + sum((n - 1) * s for n, s in zip(size, stride)) if all(size) else 0
    with cp.cuda.Device(_cuda_index(device)):
        buf = cp.empty(extent, np_dtype)
    return cp.ndarray(size, np_dtype, memptr=buf.data, strides=tuple(s * np_dtype.itemsize for s in stride))


def _uploaded(cpu_kernel):
    """A CUDA kernel that builds the (small, host-computed) result on the CPU and copies it to the GPU."""

    def kernel(*args, device=None, **kwargs):
        cp = _cupy()
        with cp.cuda.Device(_cuda_index(device)):
            return cp.asarray(cpu_kernel(*args, device=device, **kwargs))

    return kernel


def _clone_cuda(input, *, memory_format=None):
    cp = _cupy()
    data = input._data
    strides = _clone_strides(input, memory_format)
    with cp.cuda.Device(input.device.index or 0):
        if strides == contiguous_strides(data.shape):
            return cp.array(data, copy=True, order="C")
        itemsize = data.dtype.itemsize
        buf = cp.empty(data.size, data.dtype)
    out = cp.ndarray(data.shape, data.dtype, memptr=buf.data, strides=tuple(s * itemsize for s in strides))
    out[...] = data
    return out


def _to_copy_cuda(
    input, *, dtype=None, layout=None, device=None, pin_memory=False, non_blocking=False, memory_format=None
):
    cp = _cupy()
    data = input._data
    np_dtype = data.dtype if dtype is None else dtype.numpy_dtype
    target = canonical_device(device) if device is not None else input.device
    if target.type == "meta":
        strides = dense_strides_like(data.shape, input.stride())
        return Tensor._make(MetaArray(data.shape, np_dtype, strides), target)
    with cp.cuda.Device(input.device.index or 0):
        array = _convert_array(data, np_dtype)
        if array is data:  # astype may hand back its input
            array = array.copy()
    if target.type == "cpu":
        from ..cuda._backend import to_numpy

        # waits for the GPU work that writes it (a host synchronisation; flagged GPU errors surface here)
        return Tensor._make(to_numpy(array, "a copy of a cuda tensor to the cpu"), target)
    if target.type != "cuda":
        from ..cuda._backend import to_numpy

        return Tensor._make(get_backend(target.type).from_numpy(to_numpy(array), target.index), target)
    if (target.index or 0) != (input.device.index or 0):
        with cp.cuda.Device(target.index or 0):
            array = cp.array(array, copy=True)
    return Tensor._make(array, target)


def _copy_cuda(self, src, non_blocking=False):
    cp = _cupy()
    if isinstance(src, Tensor):
        data = src._data if src.device.type == "cuda" else src._host_array()
    else:
        data = np.asarray(src)
    if data.dtype != self._data.dtype:
        data = _convert_array(data, self._data.dtype)
    with cp.cuda.Device(self.device.index or 0):
        if isinstance(data, np.ndarray):
            data = cp.asarray(data)
        cp.copyto(self._data, data, casting="unsafe")


for _op, _kernel in (
    (empty, _cuda_factory("empty")),
    (zeros, _cuda_factory("zeros")),
    (ones, _cuda_factory("ones")),
    (full, _full_cuda),
    (empty_strided, _empty_strided_cuda),
    (arange, _uploaded(_arange_cpu)),
    (linspace, _uploaded(_linspace_cpu)),
    (logspace, _uploaded(_logspace_cpu)),
    (eye, _uploaded(_eye_cpu)),
    (scalar_tensor, _uploaded(_scalar_tensor_cpu)),
    (clone, _clone_cuda),
    (_to_copy, _to_copy_cuda),
    (copy_, _copy_cuda),
):
    _op.register_kernel("cuda", _kernel)
del _op, _kernel
