"""Random sampling ops: ``rand``, ``randn``, ``randint``, ``randperm``, ``normal``,
``bernoulli``, ``multinomial``, their ``*_like`` forms, and the in-place samplers
``uniform_``, ``normal_``, ``random_``, ``exponential_`` and ``bernoulli_``.

Every op takes a keyword-only ``generator`` (an :class:`ember.Generator`) and
draws from :data:`ember.default_generator` when it is omitted. Meta functions
check arguments and dtypes (the same errors on every device); checks that
depend on tensor *values* (a negative element of ``std``, a probability
outside [0, 1]) are made by the kernels, before anything is written.

CPU kernels draw in float64 (or int64) from the generator's numpy
``Generator`` and convert to the target dtype, except the normal samplers
(``randn``, ``normal``, ``normal_`` and what builds on them), which draw from the
same PCG64 stream through the native Box-Muller sampler of csrc/random.cpp
(:meth:`ember.Generator._fill_normal`), in float32 (float16 and bfloat16 too)
or float64. Uniform draws for a float
dtype with ``d`` significand bits are taken on the grid ``k / 2**d``, so
after conversion they stay in ``[0, 1)`` even for float16 and bfloat16.
"""

from __future__ import annotations

import math
import numbers
import operator
import warnings

import numpy as np

from .. import _dtype as D
from .. import _random
from .._device import canonical_device
from .._layout import check_strided
from .._meta import MetaArray
from .._tensor import Tensor
from ._registry import COMPOSITE, defop
from ._shapes import broadcast_shapes, normalize_size

__all__ = []  # ops are exported by ember/__init__.py from the registry

#: Ops of this module that are also Tensor methods (see ember._tensor_methods).
METHODS = ["uniform_", "normal_", "random_", "exponential_", "bernoulli_", "bernoulli", "multinomial"]


_RANDOM = ("random",)
_RANDOM_FACTORY = ("random", "factory")

# Significand bits (implicit bit included) of each float dtype.
_DIGITS = {D.float16: 11, D.bfloat16: 8, D.float32: 24, D.float64: 53}


# -- argument helpers --------------------------------------------------------------------------


def _generator(generator):
    """``generator``, or the default generator when None."""
    return _random.default_generator if generator is None else generator


def _numpy_rng(generator):
    """The numpy Generator behind ``generator`` (the default generator when None)."""
    return _generator(generator)._rng


def _default_noise(data):
    """The default generator's sampler for a kernel that draws noise for array ``data``: numpy's
    ``Generator`` of the CPU default generator for numpy arrays; for GPU arrays, a sampler that draws on
    the GPU from that GPU's default generator (:class:`ember.cuda.random.DeviceNoise`)."""
    if type(data) is np.ndarray:
        return _random.default_generator._rng
    from ..cuda.random import device_rng

    return device_rng()


def _check_generator(op, generator, device):
    """Check ``generator``'s type, and that it serves ``device`` (meta accepts any generator).

    Raises:
        TypeError: if ``generator`` is not an :class:`ember.Generator`.
        RuntimeError: if it belongs to another device type.
    """
    if generator is None:
        return
    if not isinstance(generator, _random.Generator):
        raise TypeError(f"{op}(): argument 'generator' must be ember.Generator, not {type(generator).__name__}")
    if device.type != "meta" and generator.device.type != device.type:
        raise RuntimeError(
            f"{op}(): expected a '{device.type}' device type for generator but found '{generator.device.type}'"
        )


def _check_dtype_arg(op, dtype):
    if dtype is not None and not isinstance(dtype, D.dtype):
        raise TypeError(f"{op}(): argument 'dtype' must be ember.dtype, not {type(dtype).__name__}")


def _check_tensor(op, name, value):
    if not isinstance(value, Tensor):
        raise TypeError(f"{op}(): argument '{name}' must be Tensor, not {type(value).__name__}")


def _check_continuous(op, dtype, *, complex_ok=True):
    """Raise unless ``dtype`` can hold a continuous distribution's samples.

    Raises:
        NotImplementedError: for integer and bool dtypes (and complex when not ``complex_ok``).
    """
    if dtype.is_floating_point or (complex_ok and dtype.is_complex):
        return
    kinds = "floating-point or complex" if complex_ok else "floating-point"
    raise NotImplementedError(
        f'"{op}" not implemented for {dtype}: it samples a continuous distribution; use a {kinds} dtype'
    )


def _real_number(op, name, value):
    """``value`` as a Python float.

    Raises:
        TypeError: if it is not a real number (0-dim tensors count as numbers).
    """
    if isinstance(value, Tensor):
        if value.numel() != 1 or value.is_complex():
            raise TypeError(
                f"{op}(): argument '{name}' must be a real number, got a tensor of shape {list(value.shape)}"
            )
        return float(value.item())
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{op}(): argument '{name}' must be a real number, not {type(value).__name__}")
    return float(value)


def _integer(op, name, value):
    """``value`` as a Python int.

    Raises:
        TypeError: if it is not an integer (floats and bools are rejected).
    """
    if isinstance(value, bool) or not hasattr(type(value), "__index__"):
        raise TypeError(f"{op}(): argument '{name}' must be int, not {type(value).__name__}")
    return operator.index(value)


def _check_std(op, std):
    if not std >= 0.0:  # also rejects nan
        raise RuntimeError(f"{op} expects std >= 0.0, but found std {std}")


def _check_probability(op, p):
    if not 0.0 <= p <= 1.0:
        raise RuntimeError(f"{op} expects p to be in [0, 1], but got p={p}")


def _check_probability_values(op, probs):
    """Raise naming the first value of the float64 array ``probs`` outside [0, 1] (nan included)."""
    bad = ~((probs >= 0.0) & (probs <= 1.0))
    if bad.any():
        value = probs[bad].flat[0]
        raise RuntimeError(f"{op} expects all probabilities in [0, 1], but found {value}")


# -- sampling helpers (numpy in, numpy out) ----------------------------------------------------------


def _largest_below(value, np_dtype):
    """The largest ``np_dtype`` number strictly below ``value``."""
    x = np.array(value, dtype=np_dtype)
    down = np.array(-np.inf, dtype=np_dtype)
    while float(x) >= value:
        x = np.nextafter(x, down)
    return x


def _uniform_real(rng, shape, dtype, low, high):
    """Samples of U[low, high) as a ``dtype`` (real float) array; none rounds up to ``high``."""
    u = rng.random(shape)
    digits = _DIGITS[dtype]
    if digits < 53:  # snap to the dtype's grid so that conversion is exact and [0, 1) stays half-open
        scale = float(2**digits)
        u *= scale
        np.floor(u, out=u)
        u /= scale
    if low == 0.0 and high == 1.0:
        return u.astype(dtype.numpy_dtype)
    out = (low + (high - low) * u).astype(dtype.numpy_dtype)
    if high > low:
        top = _largest_below(high, dtype.numpy_dtype)
        out = np.minimum(out, top).astype(dtype.numpy_dtype, copy=False)
    return out


def _uniform(rng, shape, dtype, low=0.0, high=1.0):
    """U[low, high) samples of ``dtype``; complex dtypes get independent real and imaginary parts."""
    if dtype.is_complex:
        parts = _uniform_real(rng, (*shape, 2), dtype.to_real(), low, high)
        return _complex_from_parts(parts, dtype)
    return _uniform_real(rng, shape, dtype, low, high)


def _complex_from_parts(parts, dtype):
    out = np.empty(parts.shape[:-1], dtype.numpy_dtype)
    out.real = parts[..., 0]
    out.imag = parts[..., 1]
    return out


def _normal_real(generator, shape, dtype, mean=0.0, std=1.0):
    """Samples of N(mean, std**2) as a new array of the real float ``dtype``.

    The native sampler writes float64 for float64 and float32 for the other float dtypes; float16 and
    bfloat16 samples are drawn as float32 and rounded (``mean + std * z`` computed in float64 first,
    so that ``std=0`` gives ``mean`` rounded once).
    """
    if dtype is D.float64 or dtype is D.float32:
        out = np.empty(shape, dtype.numpy_dtype)
        _generator(generator)._fill_normal(out, mean, std)
        return out
    z = np.empty(shape, np.float32)
    _generator(generator)._fill_normal(z)
    if mean == 0.0 and std == 1.0:
        return z.astype(dtype.numpy_dtype)
    return (mean + std * z.astype(np.float64)).astype(dtype.numpy_dtype)


def _standard_normal(generator, shape, dtype):
    """Standard normal samples as a ``dtype`` array (from the generator ``generator``, the default when None).

    Complex dtypes get a complex standard normal: independent real and imaginary parts of variance 1/2.
    """
    if dtype.is_complex:
        parts = _normal_real(generator, (*shape, 2), dtype.to_real(), 0.0, math.sqrt(0.5))
        return parts.view(dtype.numpy_dtype)[..., 0]
    return _normal_real(generator, shape, dtype)


def _integers(rng, shape, low, high):
    """int64 samples of the discrete uniform distribution on ``[low, high)``."""
    return rng.integers(low, high - 1, size=shape, dtype=np.int64, endpoint=True)


# -- bounds of discrete uniform draws (randint, random_) -------------------------------------------------


def _check_int_range(op, low, high, dtype, low_name="from", high_name="to"):
    """Check that the integers in ``[low, high)`` exist and fit ``dtype``.

    Raises:
        RuntimeError: if ``low >= high``, or a bound does not fit an integer/bool dtype.
        NotImplementedError: for complex dtypes.
    """
    if dtype.is_complex:
        raise NotImplementedError(
            f'"{op}" not implemented for {dtype}: it draws integers; use an integer, bool or float dtype'
        )
    if low >= high:
        raise RuntimeError(
            f"{op} expects '{low_name}' to be less than '{high_name}', but got {low_name}={low} >= {high_name}={high}"
        )
    if dtype.is_floating_point:
        limit = 2 ** _DIGITS[dtype]
        for name, v in ((low_name, low), (f"{high_name} - 1", high - 1)):
            if not -limit <= v <= limit:
                warnings.warn(
                    f"{op}: {name}={v} is out of bounds [-(2^{_DIGITS[dtype]}), 2^{_DIGITS[dtype]}]; {dtype} can "
                    "represent every integer of the range only within these bounds, so samples are rounded",
                    UserWarning,
                    stacklevel=2,
                )
        if not -(2**63) <= low or not high - 1 < 2**63:
            raise RuntimeError(f"{op}: the range [{low}, {high}) exceeds 64-bit integers, which samples are drawn as")
        return
    lo, hi = (0, 1) if dtype is D.bool else (int(D.iinfo(dtype).min), int(D.iinfo(dtype).max))
    if not lo <= low <= hi:
        raise RuntimeError(f"{op}: {low_name}={low} is out of bounds for {dtype}, whose values are in [{lo}, {hi}]")
    if not lo <= high - 1 <= hi:
        raise RuntimeError(
            f"{op}: {high_name} - 1 = {high - 1} is out of bounds for {dtype}, whose values are in [{lo}, {hi}]"
        )


def _full_int_range(dtype):
    """``[from, to)`` of ``random_()`` without bounds.

    Every value ``>= 0`` of an integer dtype, ``{0, 1}`` for bool, ``0, ..., 2**digits`` for floats.
    """
    if dtype is D.bool:
        return 0, 2
    if dtype.is_floating_point:
        return 0, 2 ** _DIGITS[dtype] + 1
    return 0, int(D.iinfo(dtype).max) + 1


# -- rand / randn ------------------------------------------------------------------------------------


def _float_dtype(dtype):
    return D.get_default_dtype() if dtype is None else dtype


def _rand_meta(*size, generator=None, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False):
    """Samples of the uniform distribution on ``[0, 1)``, in a tensor of shape ``size``.

    Complex dtypes get independent uniform real and imaginary parts.

    Args:
        *size (int or sequence of int): the shape.
        generator (ember.Generator, optional): where to draw from (the default generator if omitted).
        dtype (ember.dtype, optional): a floating-point or complex dtype (the default float dtype if omitted).
        device (ember.device or str, optional): where to allocate.
        requires_grad (bool): whether autograd records operations on the result.

    Returns:
        Tensor: the samples.

    Raises:
        NotImplementedError: for integer and bool dtypes.
        RuntimeError: for negative sizes, or a generator of another device.
        TypeError: for non-integer sizes or a ``generator`` that is not an :class:`ember.Generator`.

    Example:
        >>> import ember
        >>> g = ember.Generator().manual_seed(0)
        >>> x = ember.rand(2, 3, generator=g)
        >>> x.shape, x.dtype
        (ember.Size([2, 3]), ember.float32)
        >>> all(0 <= v < 1 for row in x.tolist() for v in row)
        True
    """
    check_strided("rand", layout)
    return _factory_meta("rand", size, generator, dtype, device)


def _factory_meta(op, size, generator, dtype, device):
    shape = normalize_size(size)
    _check_dtype_arg(op, dtype)
    dtype = _float_dtype(dtype)
    _check_continuous(op, dtype)
    _check_generator(op, generator, canonical_device(device))
    return MetaArray(shape, dtype.numpy_dtype)


def _rand_cpu(*size, generator=None, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False):
    return _uniform(_numpy_rng(generator), normalize_size(size), _float_dtype(dtype))


rand = defop("rand", _rand_meta, cpu=_rand_cpu, has_out=True, tags=_RANDOM_FACTORY)


def _randn_meta(*size, generator=None, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False):
    """Samples of the standard normal distribution (mean 0, variance 1), in a tensor of shape ``size``.

    For complex dtypes the real and imaginary parts are independent normals of
    variance 1/2 each, so that the complex samples have variance 1.

    Args:
        *size (int or sequence of int): the shape.
        generator (ember.Generator, optional): where to draw from (the default generator if omitted).
        dtype (ember.dtype, optional): a floating-point or complex dtype (the default float dtype if omitted).
        device (ember.device or str, optional): where to allocate.
        requires_grad (bool): whether autograd records operations on the result.

    Returns:
        Tensor: the samples.

    Raises:
        NotImplementedError: for integer and bool dtypes.
        RuntimeError: for negative sizes, or a generator of another device.
        TypeError: for non-integer sizes or a ``generator`` that is not an :class:`ember.Generator`.

    Example:
        >>> import ember
        >>> g = ember.Generator().manual_seed(0)
        >>> [round(v, 4) for v in ember.randn(4, generator=g, dtype=ember.float64).tolist()]
        [0.874, 1.1237, 0.2246, -0.1822]
    """
    check_strided("randn", layout)
    return _factory_meta("randn", size, generator, dtype, device)


def _randn_cpu(*size, generator=None, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False):
    return _standard_normal(generator, normalize_size(size), _float_dtype(dtype))


randn = defop("randn", _randn_meta, cpu=_randn_cpu, has_out=True, tags=_RANDOM_FACTORY)


# -- randint ------------------------------------------------------------------------------------------


def _randint_args(low, high, size):
    """Resolve PyTorch's overloads ``randint(high, size)`` and ``randint(low, high, size)``.

    Returns:
        tuple: ``(low, high, shape)`` with int bounds and a tuple shape.

    Raises:
        TypeError: for a missing or non-sequence ``size``, or non-integer bounds.
    """
    if size is None:
        if high is None:
            raise TypeError(
                "randint(): missing required argument 'size' (call randint(high, size) or randint(low, high, size))"
            )
        if isinstance(high, (tuple, list)):
            low, high, size = 0, low, high  # randint(high, size)
        else:
            raise TypeError(f"randint(): argument 'size' must be tuple of ints, not {type(high).__name__}")
    elif high is None:
        low, high = 0, low  # randint(high, size=...)
    if not isinstance(size, (tuple, list)):
        raise TypeError(f"randint(): argument 'size' must be tuple of ints, not {type(size).__name__}")
    return _integer("randint", "low", low), _integer("randint", "high", high), normalize_size((size,))


def _randint_meta(
    low=0, high=None, size=None, *, generator=None, dtype=None, layout=None, device=None, requires_grad=False,
    pin_memory=False,
):
    """Integers drawn uniformly from ``[low, high)``, in a tensor of shape ``size``.

    Called as ``randint(high, size)`` or ``randint(low, high, size)``, as in PyTorch.

    Args:
        low (int): the smallest possible value (0 by default).
        high (int): one above the largest possible value.
        size (sequence of int): the shape.
        generator (ember.Generator, optional): where to draw from (the default generator if omitted).
        dtype (ember.dtype, optional): the result's dtype (``ember.int64`` by default); integer,
            bool or floating point.
        device (ember.device or str, optional): where to allocate.
        requires_grad (bool): whether autograd records operations on the result (float dtypes only).

    Returns:
        Tensor: the samples.

    Raises:
        RuntimeError: if ``low >= high``, or a bound is out of range for ``dtype``.
        NotImplementedError: for complex dtypes.
        TypeError: for non-integer bounds or a ``size`` that is not a sequence.

    Example:
        >>> import ember
        >>> g = ember.Generator().manual_seed(0)
        >>> ember.randint(10, (5,), generator=g).tolist()
        [8, 6, 5, 2, 3]
        >>> ember.randint(-3, 3, (2, 2), generator=g).shape
        ember.Size([2, 2])
    """
    check_strided("randint", layout)
    low, high, shape = _randint_args(low, high, size)
    _check_dtype_arg("randint", dtype)
    dtype = D.int64 if dtype is None else dtype
    _check_int_range("randint", low, high, dtype, "low", "high")
    _check_generator("randint", generator, canonical_device(device))
    return MetaArray(shape, dtype.numpy_dtype)


def _randint_cpu(
    low=0, high=None, size=None, *, generator=None, dtype=None, layout=None, device=None, requires_grad=False,
    pin_memory=False,
):
    low, high, shape = _randint_args(low, high, size)
    dtype = D.int64 if dtype is None else dtype
    return _integers(_numpy_rng(generator), shape, low, high).astype(dtype.numpy_dtype)


randint = defop("randint", _randint_meta, cpu=_randint_cpu, has_out=True, tags=_RANDOM_FACTORY)


# -- randperm --------------------------------------------------------------------------------------


def _randperm_meta(n, *, generator=None, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False):
    """A random permutation of ``0, 1, ..., n - 1``.

    Args:
        n (int): the number of elements.
        generator (ember.Generator, optional): where to draw from (the default generator if omitted).
        dtype (ember.dtype, optional): integer or floating dtype (``ember.int64`` by default).
        device (ember.device or str, optional): where to allocate.
        requires_grad (bool): whether autograd records operations on the result (float dtypes only).

    Returns:
        Tensor: a 1-D tensor of ``n`` elements.

    Raises:
        RuntimeError: if ``n`` is negative or too large for ``dtype`` to hold every value exactly.
        NotImplementedError: for bool and complex dtypes.
        TypeError: if ``n`` is not an int.

    Example:
        >>> import ember
        >>> g = ember.Generator().manual_seed(0)
        >>> sorted(ember.randperm(5, generator=g).tolist())
        [0, 1, 2, 3, 4]
    """
    check_strided("randperm", layout)
    n = _integer("randperm", "n", n)
    _check_dtype_arg("randperm", dtype)
    dtype = D.int64 if dtype is None else dtype
    if n < 0:
        raise RuntimeError(f"randperm expects n to be non-negative, but got n={n}")
    if dtype is D.bool or dtype.is_complex:
        raise NotImplementedError(f'"randperm" not implemented for {dtype}: use an integer or floating-point dtype')
    if dtype.is_floating_point:
        limit = 2 ** _DIGITS[dtype] + 1
        if n > limit:
            raise RuntimeError(f"randperm: n cannot be greater than {limit} for {dtype} (got n={n})")
    elif n - 1 > int(D.iinfo(dtype).max):
        raise RuntimeError(f"randperm: n={n} is too large for {dtype}, whose largest value is {D.iinfo(dtype).max}")
    _check_generator("randperm", generator, canonical_device(device))
    return MetaArray((n,), dtype.numpy_dtype)


def _randperm_cpu(n, *, generator=None, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False):
    dtype = D.int64 if dtype is None else dtype
    return _numpy_rng(generator).permutation(operator.index(n)).astype(dtype.numpy_dtype)


randperm = defop("randperm", _randperm_meta, cpu=_randperm_cpu, has_out=True, tags=_RANDOM_FACTORY)


# -- normal -----------------------------------------------------------------------------------------


def _normal_spec(mean, std, size, dtype, device):
    """``(shape, dtype, device)`` of ``normal``'s result, after checking which overload the call is."""
    mean_t, std_t = isinstance(mean, Tensor), isinstance(std, Tensor)
    if not mean_t:
        _real_number("normal", "mean", mean)
    if not std_t:
        _check_std("normal", _real_number("normal", "std", std))
    if not mean_t and not std_t:
        if size is None:
            raise TypeError("normal(): when mean and std are both numbers, size is required")
        _check_dtype_arg("normal", dtype)
        dtype = _float_dtype(dtype)
        _check_continuous("normal", dtype)
        return normalize_size((size,)), dtype, canonical_device(device)
    if size is not None:
        raise TypeError("normal(): size can only be given when mean and std are both numbers")
    if dtype is not None:
        raise TypeError("normal(): dtype can only be given when mean and std are both numbers")
    out_dtype = mean.dtype if mean_t else std.dtype
    _check_continuous("normal", out_dtype)
    shape = broadcast_shapes(mean._data.shape if mean_t else (), std._data.shape if std_t else ())
    return shape, out_dtype, (mean if mean_t else std).device


def _normal_meta(
    mean, std=1.0, size=None, *, generator=None, dtype=None, layout=None, device=None, requires_grad=False,
    pin_memory=False,
):
    """Samples of normal distributions with the given means and standard deviations.

    The overloads of PyTorch:

    * ``normal(mean: Tensor, std: Tensor)``: one sample per element of the
      broadcast of ``mean`` and ``std``;
    * ``normal(mean: Tensor, std=1.0)`` and ``normal(mean: float, std: Tensor)``:
      the number is shared by every element;
    * ``normal(mean: float, std: float, size)``: a tensor of shape ``size``
      (``dtype``, ``device``, ``requires_grad`` apply only here).

    The result has ``mean``'s dtype when it is a tensor, else ``std``'s, else
    ``dtype`` (the default float dtype if omitted).

    Args:
        mean (Tensor or float): the means.
        std (Tensor or float): the standard deviations, all ``>= 0``.
        size (sequence of int, optional): the shape, when ``mean`` and ``std`` are numbers.
        generator (ember.Generator, optional): where to draw from (the default generator if omitted).
        dtype (ember.dtype, optional): the result's dtype (number overload only).
        device (ember.device or str, optional): where to allocate (number overload only).
        requires_grad (bool): whether autograd records operations on the result (number overload only).

    Returns:
        Tensor: the samples.

    Raises:
        RuntimeError: if ``std`` is negative or nan (for a tensor ``std``, any element; checked
            on the values, so not on the meta device), or ``mean`` and ``std`` don't broadcast.
        NotImplementedError: if the result dtype is not floating point or complex.
        TypeError: if ``size`` is missing for numbers, or given with a tensor.

    Example:
        >>> import ember
        >>> g = ember.Generator().manual_seed(0)
        >>> ember.normal(ember.zeros(2, 1), ember.ones(3), generator=g).shape
        ember.Size([2, 3])
        >>> ember.normal(5.0, 0.0, (3,), generator=g).tolist()
        [5.0, 5.0, 5.0]
    """
    check_strided("normal", layout)
    shape, out_dtype, dev = _normal_spec(mean, std, size, dtype, device)
    _check_generator("normal", generator, dev)
    return MetaArray(shape, out_dtype.numpy_dtype)


def _as_float64(value):
    """A tensor's values (or a number) as float64 (complex128 for complex) for sampling arithmetic."""
    if isinstance(value, Tensor):
        data = value._data
        return data.astype(np.complex128 if data.dtype.kind == "c" else np.float64)
    return value


def _normal_cpu(
    mean, std=1.0, size=None, *, generator=None, dtype=None, layout=None, device=None, requires_grad=False,
    pin_memory=False,
):
    shape, out_dtype, _ = _normal_spec(mean, std, size, dtype, device)
    mean_v, std_v = _as_float64(mean), _as_float64(std)
    if isinstance(std, Tensor):
        bad = ~(std_v >= 0.0)
        if bad.any():
            raise RuntimeError(f"normal expects all elements of std >= 0.0, but found std {std_v[bad].flat[0]}")
    if not isinstance(mean, Tensor):
        mean_v = _real_number("normal", "mean", mean)
    if not isinstance(std, Tensor):
        std_v = _real_number("normal", "std", std)
    if not isinstance(mean, Tensor) and not isinstance(std, Tensor) and not out_dtype.is_complex:
        return _normal_real(generator, shape, out_dtype, mean_v, std_v)  # the kernel applies mean and std
    z = _standard_normal(generator, shape, out_dtype)
    return (mean_v + std_v * z).astype(out_dtype.numpy_dtype)


normal = defop("normal", _normal_meta, cpu=_normal_cpu, has_out=True, tags=_RANDOM_FACTORY)


# -- bernoulli / multinomial -----------------------------------------------------------------------


def _bernoulli_meta(input, p=None, *, generator=None):
    """Samples of Bernoulli distributions: 1 with probability ``p``, else 0.

    With ``p`` omitted, ``input`` holds the probabilities (one sample per
    element; ``input`` must be floating point). With a number ``p``, every
    element of the result is 1 with probability ``p`` and ``input`` only gives
    the shape. The result has ``input``'s shape and dtype.

    Args:
        input (Tensor): probabilities in [0, 1], or a tensor giving shape and dtype when ``p`` is given.
        p (float, optional): one probability for every element.
        generator (ember.Generator, optional): where to draw from (the default generator if omitted).

    Returns:
        Tensor: zeros and ones.

    Raises:
        RuntimeError: for a probability outside [0, 1] (for ``input``, checked on the values).
        NotImplementedError: if ``p`` is omitted and ``input`` is not floating point.
        TypeError: if ``input`` is not a tensor or ``p`` not a number.

    Example:
        >>> import ember
        >>> g = ember.Generator().manual_seed(0)
        >>> ember.bernoulli(ember.tensor([0.0, 1.0, 0.0, 1.0]), generator=g).tolist()
        [0.0, 1.0, 0.0, 1.0]
    """
    _check_tensor("bernoulli", "input", input)
    if p is None:
        _check_continuous("bernoulli", input.dtype, complex_ok=False)
    else:
        _check_probability("bernoulli", _real_number("bernoulli", "p", p))
    _check_generator("bernoulli", generator, input.device)
    return MetaArray(input._data.shape, input._data.dtype)


def _bernoulli_cpu(input, p=None, *, generator=None):
    if p is None:
        probs = input._data.astype(np.float64)
        _check_probability_values("bernoulli", probs)
    else:
        probs = _real_number("bernoulli", "p", p)
    u = _numpy_rng(generator).random(input._data.shape)
    return (u < probs).astype(input._data.dtype)


bernoulli = defop("bernoulli", _bernoulli_meta, cpu=_bernoulli_cpu, has_out=True, tags=_RANDOM)

_MAX_CATEGORIES = 2**24


def _multinomial_meta(input, num_samples, replacement=False, *, generator=None):
    """Indices sampled from the categorical distributions given by the rows of ``input``.

    ``input`` holds non-negative weights (they need not sum to 1): a 1-D
    tensor of ``k`` categories, or a 2-D tensor with one distribution per row.
    Without replacement, each row's indices are distinct, drawn one after the
    other in proportion to the weights that remain (by the exponential-keys
    method: Efraimidis and Spirakis, "Weighted random sampling with a
    reservoir", 2006); categories of weight 0 come only after every
    positive-weight category, in random order.

    Args:
        input (Tensor): weights of shape ``(k,)`` or ``(m, k)``, floating point.
        num_samples (int): samples per row, ``> 0``; at most ``k`` without replacement.
        replacement (bool): whether a category may be drawn more than once.
        generator (ember.Generator, optional): where to draw from (the default generator if omitted).

    Returns:
        Tensor: int64 indices of shape ``(num_samples,)`` or ``(m, num_samples)``.

    Raises:
        RuntimeError: if ``input`` is not 1-D or 2-D, not floating point, has
            more than 2**24 categories, if ``num_samples <= 0``, or exceeds ``k``
            without replacement; on the values: a weight that is negative, inf or
            nan, or a row whose weights sum to 0.
        TypeError: if ``num_samples`` is not an int.

    Example:
        >>> import ember
        >>> g = ember.Generator().manual_seed(0)
        >>> ember.multinomial(ember.tensor([0.0, 10.0, 0.0]), 2, replacement=True, generator=g).tolist()
        [1, 1]
        >>> sorted(ember.multinomial(ember.tensor([1.0, 2.0, 3.0]), 3, generator=g).tolist())
        [0, 1, 2]
    """
    _check_tensor("multinomial", "input", input)
    n = _integer("multinomial", "num_samples", num_samples)
    ndim = input._data.ndim
    if ndim not in (1, 2):
        raise RuntimeError(
            f"multinomial: prob_dist must be 1 or 2 dim, got a {ndim}-dim tensor of shape {list(input.shape)}"
        )
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"multinomial only supports floating-point dtypes for input, got: {input.dtype}")
    k = input._data.shape[-1]
    if k > _MAX_CATEGORIES:
        raise RuntimeError(f"multinomial: number of categories cannot exceed 2^24, got {k}")
    if n <= 0:
        raise RuntimeError(f"multinomial: cannot sample n_sample <= 0 samples (num_samples={n})")
    if not replacement and n > k:
        raise RuntimeError(
            f"multinomial: cannot sample n_sample > prob_dist.size(-1) samples without replacement "
            f"(num_samples={n}, categories={k})"
        )
    _check_generator("multinomial", generator, input.device)
    return MetaArray((*input._data.shape[:-1], n), np.int64)


def _multinomial_cpu(input, num_samples, replacement=False, *, generator=None):
    n = operator.index(num_samples)
    shape = input._data.shape
    rows, k = math.prod(shape[:-1]), shape[-1]
    weights = input._data.astype(np.float64).reshape(rows, k)
    if rows == 0:
        return np.empty((*shape[:-1], n), np.int64)
    check_multinomial_weights(np, weights)
    rng = _numpy_rng(generator)
    if replacement:
        out = _multinomial_with_replacement(rng, weights, n)
    else:
        out = _multinomial_without_replacement(rng, weights, n)
    return out.reshape(*shape[:-1], n)


def check_multinomial_weights(xp, weights):
    """Check the (rows, categories) float64 ``weights`` of ``multinomial`` (numpy or CuPy arrays, ``xp``).

    Raises:
        RuntimeError: on weights that are negative, inf or nan, or a row that sums to 0 (on the GPU the
            check reads one flag back, as PyTorch's does).
    """
    if not bool((xp.isfinite(weights) & (weights >= 0)).all()):
        raise RuntimeError("multinomial: probability tensor contains either `inf`, `nan` or element < 0")
    empty_rows = xp.flatnonzero(~(weights.sum(axis=1) > 0))
    if empty_rows.size:
        raise RuntimeError(
            f"multinomial: invalid multinomial distribution (sum of probabilities <= 0) in row {int(empty_rows[0])}"
        )


#: Elements of the (rows, samples, categories) comparison that one block of rows of
#: :func:`_multinomial_with_replacement` may build (8 MB of booleans).
_MULTINOMIAL_BLOCK = 1 << 23
#: Draws per row from which :func:`_multinomial_with_replacement` searches each row's CDF (one
#: ``searchsorted`` call per row) instead of counting a block of rows' comparisons: a million draws from
#: one row of 10 categories took 45 ms counted (10 comparisons a draw) and 20 ms searched.
_SEARCH_ROW_SAMPLES = 1024


def _multinomial_with_replacement(rng, weights, n):
    """Inverse-CDF sampling: ``n`` indices per row, never one of weight 0.

    ``weights`` is (rows, k) float64, checked by :func:`check_multinomial_weights`. The index of a draw
    ``v = u * total`` is the number of CDF entries ``<= v`` (what ``searchsorted(cdf, v, side="right")``
    returns on a non-decreasing CDF): counted for a block of rows at once instead of one searchsorted per
    row, whose Python loop cost 2 ms for 256 rows of 4 categories (an RL policy's sampling per step); rows
    of at least :data:`_SEARCH_ROW_SAMPLES` draws take the per-row search, whose loop is then negligible.
    """
    rows, k = weights.shape
    cdf = np.cumsum(weights, axis=1)
    u = rng.random((rows, n))
    targets = u * cdf[:, -1:]
    # u * total rounds to total once in a while: clamp to the last category of positive weight
    last = (k - 1 - np.argmax(weights[:, ::-1] > 0, axis=1))[:, None]
    if n >= _SEARCH_ROW_SAMPLES:  # long rows: a binary search per draw beats k comparisons per draw
        out = np.empty((rows, n), np.int64)
        for r in range(rows):
            out[r] = np.searchsorted(cdf[r], targets[r], side="right")
        return np.minimum(out, last)
    block = max(1, _MULTINOMIAL_BLOCK // max(n * k, 1))
    if block >= rows:
        return np.minimum(_count_at_most(cdf, targets), last)
    out = np.empty((rows, n), np.int64)
    for start in range(0, rows, block):
        stop = start + block
        out[start:stop] = np.minimum(_count_at_most(cdf[start:stop], targets[start:stop]), last[start:stop])
    return out


def _count_at_most(cdf, targets):
    """Per row ``r`` and sample ``i``: how many of ``cdf[r]`` are ``<= targets[r, i]`` (int64)."""
    return np.count_nonzero(cdf[:, None, :] <= targets[:, :, None], axis=2).astype(np.int64, copy=False)


def _multinomial_without_replacement(rng, weights, n):
    """Exponential keys ``E / w``: the ``n`` smallest keys are a sequential weighted sample."""
    e = rng.standard_exponential(weights.shape)
    with np.errstate(divide="ignore"):
        keys = e / weights  # weight 0 -> inf: after every positive weight, ordered among themselves by e
    order = np.lexsort((e, keys), axis=1)
    return np.ascontiguousarray(order[:, :n]).astype(np.int64, copy=False)


multinomial = defop("multinomial", _multinomial_meta, cpu=_multinomial_cpu, has_out=True, tags=_RANDOM)


# -- *_like --------------------------------------------------------------------------------------


def _like_doc(name, what):
    return f"""{what}, in a tensor shaped like ``input``.

    ``ember.{name[:-5]}(input.shape, ...)`` with ``input``'s dtype and device unless ``dtype``/``device``
    are given.

    Args:
        input (Tensor): gives the shape, and the default dtype and device.
        generator (ember.Generator, optional): where to draw from (the default generator if omitted).
        dtype (ember.dtype, optional): the result's dtype.
        device (ember.device or str, optional): where to allocate.
        requires_grad (bool): whether autograd records operations on the result.

    Returns:
        Tensor: the samples.

    Raises:
        NotImplementedError: for a dtype that can't hold the samples (see ``ember.{name[:-5]}``).

    Example:
        >>> import ember
        >>> ember.{name}(ember.zeros(2, 3, dtype=ember.float64)).dtype
        ember.float64
    """


def _like_meta(name, sampler):
    def meta(input, *, generator=None, dtype=None, layout=None, device=None, requires_grad=False, memory_format=None):
        check_strided(name, layout)
        _check_tensor(name, "input", input)
        _check_dtype_arg(name, dtype)
        out_dtype = input.dtype if dtype is None else dtype
        _check_continuous(name, out_dtype)
        _check_generator(name, generator, input.device if device is None else canonical_device(device))
        return MetaArray(input._data.shape, out_dtype.numpy_dtype)

    def decomposition(
        input, *, generator=None, dtype=None, layout=None, device=None, requires_grad=False, memory_format=None
    ):
        return sampler(
            input.shape, generator=generator, dtype=input.dtype if dtype is None else dtype,
            device=input.device if device is None else device, requires_grad=requires_grad,
        )

    meta.__name__ = name
    return meta, decomposition


_rand_like_meta, _rand_like_decomp = _like_meta("rand_like", rand)
_rand_like_meta.__doc__ = _like_doc("rand_like", "Samples of the uniform distribution on ``[0, 1)``")
rand_like = defop(
    "rand_like", _rand_like_meta, category=COMPOSITE, decomposition=_rand_like_decomp, tags=_RANDOM_FACTORY
)

_randn_like_meta, _randn_like_decomp = _like_meta("randn_like", randn)
_randn_like_meta.__doc__ = _like_doc("randn_like", "Samples of the standard normal distribution")
randn_like = defop(
    "randn_like", _randn_like_meta, category=COMPOSITE, decomposition=_randn_like_decomp, tags=_RANDOM_FACTORY
)


def _randint_like_bounds(low, high):
    return (0, low) if high is None else (low, high)


def _randint_like_meta(
    input, low=0, high=None, *, generator=None, dtype=None, layout=None, device=None, requires_grad=False,
    memory_format=None,
):
    """Integers drawn uniformly from ``[low, high)``, in a tensor shaped like ``input``.

    Called as ``randint_like(input, high)`` or ``randint_like(input, low, high)``.
    The result has ``input``'s dtype and device unless ``dtype``/``device`` are given.

    Args:
        input (Tensor): gives the shape, and the default dtype and device.
        low (int): the smallest possible value (0 by default).
        high (int): one above the largest possible value.
        generator (ember.Generator, optional): where to draw from (the default generator if omitted).
        dtype (ember.dtype, optional): the result's dtype.
        device (ember.device or str, optional): where to allocate.
        requires_grad (bool): whether autograd records operations on the result.

    Returns:
        Tensor: the samples.

    Raises:
        RuntimeError: if ``low >= high`` or a bound is out of range for the dtype.

    Example:
        >>> import ember
        >>> x = ember.randint_like(ember.zeros(4, dtype=ember.int32), 3, 5)
        >>> x.dtype, all(3 <= v < 5 for v in x.tolist())
        (ember.int32, True)
    """
    check_strided("randint_like", layout)
    _check_tensor("randint_like", "input", input)
    low = _integer("randint_like", "low", low)
    high = None if high is None else _integer("randint_like", "high", high)
    low, high = _randint_like_bounds(low, high)
    _check_dtype_arg("randint_like", dtype)
    out_dtype = input.dtype if dtype is None else dtype
    _check_int_range("randint_like", low, high, out_dtype, "low", "high")
    _check_generator("randint_like", generator, input.device if device is None else canonical_device(device))
    return MetaArray(input._data.shape, out_dtype.numpy_dtype)


def _randint_like_decomp(
    input, low=0, high=None, *, generator=None, dtype=None, layout=None, device=None, requires_grad=False,
    memory_format=None,
):
    low, high = _randint_like_bounds(low, high)
    return randint(
        low, high, input.shape, generator=generator, dtype=input.dtype if dtype is None else dtype,
        device=input.device if device is None else device, requires_grad=requires_grad,
    )


randint_like = defop(
    "randint_like", _randint_like_meta, category=COMPOSITE, decomposition=_randint_like_decomp, tags=_RANDOM_FACTORY
)


# -- in-place samplers -------------------------------------------------------------------------------


def _uniform_bounds(dtype, from_, to):
    """Check ``[from_, to)`` for ``uniform_`` on ``dtype``; returns the bounds as floats."""
    from_ = _real_number("uniform_", "from_", from_)
    to = _real_number("uniform_", "to", to)
    if from_ > to:
        raise RuntimeError(f"uniform_ expects to return a [from, to) range, but found from={from_} > to={to}")
    limit = float(D.finfo(dtype.to_real()).max)
    for name, v in (("from", from_), ("to", to)):
        if not -limit <= v <= limit:
            raise RuntimeError(f"uniform_: {name}={v} is out of bounds for {dtype} (finite values up to {limit})")
    if to - from_ > limit:
        raise RuntimeError(
            f"uniform_ expects to - from <= {limit} (the largest {dtype} value), but found to={to} and from={from_}"
        )
    return from_, to


def _uniform__meta(self, from_=0.0, to=1.0, *, generator=None):
    """Fill ``self`` with samples of the uniform distribution on ``[from_, to)``, in place.

    Complex tensors get independent uniform real and imaginary parts.

    Args:
        self (Tensor): the tensor to fill; floating point or complex.
        from_ (float): the lower bound (included).
        to (float): the upper bound (excluded, unless ``from_ == to``).
        generator (ember.Generator, optional): where to draw from (the default generator if omitted).

    Returns:
        Tensor: ``self``.

    Raises:
        NotImplementedError: for integer and bool tensors.
        RuntimeError: if ``from_ > to`` or a bound or the width exceeds the dtype's range.

    Example:
        >>> import ember
        >>> g = ember.Generator().manual_seed(0)
        >>> x = ember.empty(1000, dtype=ember.bfloat16).uniform_(-2, 2, generator=g)
        >>> all(-2 <= v < 2 for v in x.tolist())
        True
    """
    _check_tensor("uniform_", "self", self)
    _check_continuous("uniform_", self.dtype)
    _uniform_bounds(self.dtype, from_, to)
    _check_generator("uniform_", generator, self.device)


def _uniform__cpu(self, from_=0.0, to=1.0, *, generator=None):
    low, high = _uniform_bounds(self.dtype, from_, to)
    self._data[...] = _uniform(_numpy_rng(generator), self._data.shape, self.dtype, low, high)


uniform_ = defop("uniform_", _uniform__meta, cpu=_uniform__cpu, kind="inplace", tags=_RANDOM)


def _normal__meta(self, mean=0.0, std=1.0, *, generator=None):
    """Fill ``self`` with samples of the normal distribution ``N(mean, std**2)``, in place.

    For complex tensors, the real and imaginary parts are independent normals
    with mean ``mean`` and standard deviation ``std / sqrt(2)``.

    Args:
        self (Tensor): the tensor to fill; floating point or complex.
        mean (float): the mean.
        std (float): the standard deviation, ``>= 0``.
        generator (ember.Generator, optional): where to draw from (the default generator if omitted).

    Returns:
        Tensor: ``self``.

    Raises:
        NotImplementedError: for integer and bool tensors.
        RuntimeError: if ``std`` is negative or nan.

    Example:
        >>> import ember
        >>> g = ember.Generator().manual_seed(0)
        >>> ember.empty(3).normal_(2.0, 0.0, generator=g).tolist()
        [2.0, 2.0, 2.0]
    """
    _check_tensor("normal_", "self", self)
    _check_continuous("normal_", self.dtype)
    _real_number("normal_", "mean", mean)
    _check_std("normal_", _real_number("normal_", "std", std))
    _check_generator("normal_", generator, self.device)


def _normal__cpu(self, mean=0.0, std=1.0, *, generator=None):
    mean = _real_number("normal_", "mean", mean)
    std = _real_number("normal_", "std", std)
    data = self._data
    if type(data) is np.ndarray and data.dtype in (np.float32, np.float64) and data.flags.c_contiguous \
            and data.flags.writeable:
        _generator(generator)._fill_normal(data, mean, std)  # in place: no temporary
        return
    if not self.dtype.is_complex:
        data[...] = _normal_real(generator, data.shape, self.dtype, mean, std)
        return
    z = _standard_normal(generator, data.shape, self.dtype)
    data[...] = (mean + std * z.real) + 1j * (mean + std * z.imag)


normal_ = defop("normal_", _normal__meta, cpu=_normal__cpu, kind="inplace", tags=_RANDOM)


def _random_bounds(self, from_, to):
    """``[low, high)`` of ``random_``: ``random_()``, ``random_(to)`` or ``random_(from_, to)``."""
    from_ = _integer("random_", "from_", from_)
    if to is None:
        if from_ == 0:
            return _full_int_range(self.dtype)
        return 0, from_  # random_(to)
    return from_, _integer("random_", "to", to)


def _random__meta(self, from_=0, to=None, *, generator=None):
    """Fill ``self`` with integers drawn uniformly from ``[from_, to)``, in place.

    * ``random_(from_, to)``: the integers ``from_, ..., to - 1``;
    * ``random_(to)``: ``0, ..., to - 1``;
    * ``random_()``: every value of an integer dtype that is ``>= 0`` (``{0, 1}``
      for bool), or ``0, ..., 2**d`` for a float dtype with ``d`` significand
      bits (so every value is exact: up to 2**24 for float32, 2**53 for float64).

    PyTorch also reads ``random_(from_, None)`` as "from ``from_`` to the dtype's
    maximum"; here a single bound is always the upper one.

    Args:
        self (Tensor): the tensor to fill; integer, bool or floating point.
        from_ (int): the lower bound (included), or the upper bound when ``to`` is omitted.
        to (int, optional): the upper bound (excluded).
        generator (ember.Generator, optional): where to draw from (the default generator if omitted).

    Returns:
        Tensor: ``self``.

    Raises:
        RuntimeError: if ``from_ >= to`` or a bound is out of range for the dtype.
        NotImplementedError: for complex tensors.
        TypeError: for non-integer bounds.

    Example:
        >>> import ember
        >>> g = ember.Generator().manual_seed(0)
        >>> ember.zeros(6, dtype=ember.int64).random_(3, generator=g).tolist()
        [2, 1, 1, 0, 0, 0]
    """
    _check_tensor("random_", "self", self)
    if self.dtype.is_complex:
        raise NotImplementedError(f'"random_" not implemented for {self.dtype}: use an integer, bool or float dtype')
    low, high = _random_bounds(self, from_, to)
    _check_int_range("random_", low, high, self.dtype)
    _check_generator("random_", generator, self.device)


def _random__cpu(self, from_=0, to=None, *, generator=None):
    low, high = _random_bounds(self, from_, to)
    self._data[...] = _integers(_numpy_rng(generator), self._data.shape, low, high).astype(self._data.dtype)


random_ = defop("random_", _random__meta, cpu=_random__cpu, kind="inplace", tags=_RANDOM)


def _exponential__meta(self, lambd=1.0, *, generator=None):
    """Fill ``self`` with samples of the exponential distribution of rate ``lambd``, in place.

    The density is ``lambd * exp(-lambd * x)`` for ``x >= 0`` (mean ``1 / lambd``).

    Args:
        self (Tensor): the tensor to fill; floating point.
        lambd (float): the rate, ``> 0``.
        generator (ember.Generator, optional): where to draw from (the default generator if omitted).

    Returns:
        Tensor: ``self``.

    Raises:
        RuntimeError: if ``lambd <= 0`` or nan, or ``self`` is not floating point.

    Example:
        >>> import ember
        >>> g = ember.Generator().manual_seed(0)
        >>> x = ember.empty(10000, dtype=ember.float64).exponential_(4.0, generator=g)
        >>> round(sum(x.tolist()) / 10000, 2)
        0.25
    """
    _check_tensor("exponential_", "self", self)
    if not self.dtype.is_floating_point:
        raise RuntimeError(
            f"exponential_ samples a continuous distribution: self must have a floating-point dtype, got {self.dtype}"
        )
    lambd = _real_number("exponential_", "lambd", lambd)
    if not lambd > 0.0:
        raise RuntimeError(f"exponential_ expects lambda > 0.0, but found lambda={lambd}")
    _check_generator("exponential_", generator, self.device)


def _exponential__cpu(self, lambd=1.0, *, generator=None):
    lambd = _real_number("exponential_", "lambd", lambd)
    e = _numpy_rng(generator).standard_exponential(self._data.shape)
    e /= lambd
    self._data[...] = e.astype(self._data.dtype)


exponential_ = defop("exponential_", _exponential__meta, cpu=_exponential__cpu, kind="inplace", tags=_RANDOM)


def _bernoulli__meta(self, p=0.5, *, generator=None):
    """Fill ``self`` with Bernoulli samples (1 with probability ``p``, else 0), in place.

    Args:
        self (Tensor): the tensor to fill; any dtype.
        p (float or Tensor): one probability, or a floating-point tensor of
            probabilities that broadcasts to ``self``'s shape.
        generator (ember.Generator, optional): where to draw from (the default generator if omitted).

    Returns:
        Tensor: ``self``.

    Raises:
        RuntimeError: for a probability outside [0, 1] (a tensor ``p`` is checked on
            its values), or a ``p`` that does not broadcast to ``self``.
        NotImplementedError: if ``p`` is a tensor that is not floating point.

    Example:
        >>> import ember
        >>> g = ember.Generator().manual_seed(0)
        >>> ember.zeros(2, 3, dtype=ember.bool).bernoulli_(ember.tensor([1.0, 0.0, 1.0]), generator=g).tolist()
        [[True, False, True], [True, False, True]]
    """
    _check_tensor("bernoulli_", "self", self)
    if isinstance(p, Tensor):
        _check_continuous("bernoulli_", p.dtype, complex_ok=False)
        target = tuple(self._data.shape)
        if len(p._data.shape) > len(target) or broadcast_shapes(target, p._data.shape) != target:
            raise RuntimeError(
                f"bernoulli_: p of shape {list(p.shape)} does not broadcast to self's shape {list(self.shape)}"
            )
    else:
        _check_probability("bernoulli_", _real_number("bernoulli_", "p", p))
    _check_generator("bernoulli_", generator, self.device)


def _bernoulli__cpu(self, p=0.5, *, generator=None):
    if isinstance(p, Tensor):
        probs = p._data.astype(np.float64)
        _check_probability_values("bernoulli_", probs)
    else:
        probs = _real_number("bernoulli_", "p", p)
    u = _numpy_rng(generator).random(self._data.shape)
    self._data[...] = (u < probs).astype(self._data.dtype)


bernoulli_ = defop("bernoulli_", _bernoulli__meta, cpu=_bernoulli__cpu, kind="inplace", tags=_RANDOM)
