"""``assert_close``: compare tensors (and numbers, arrays, nested containers) with dtype-aware tolerances."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from .. import _dtype as D
from .._tensor import Tensor

__all__ = ["assert_close", "default_tolerances"]

# (rtol, atol) per dtype, as PyTorch's assert_close uses.
_TOLERANCES = {
    D.float16: (1e-3, 1e-5),
    D.bfloat16: (1.6e-2, 1e-5),
    D.float32: (1.3e-6, 1e-5),
    D.float64: (1e-7, 1e-7),
    D.complex64: (1.3e-6, 1e-5),
    D.complex128: (1e-7, 1e-7),
}


def default_tolerances(dtype):
    """``(rtol, atol)`` for comparing values of ``dtype`` (zero for integers and bool)."""
    return _TOLERANCES.get(dtype, (0.0, 0.0))


def _as_numpy(x):
    if isinstance(x, Tensor):
        data = x._host_array()
        if data.dtype.name == "bfloat16":
            data = data.astype(np.float32)
        return data
    return np.asarray(x)


def assert_close(
    actual,
    expected,
    *,
    rtol=None,
    atol=None,
    equal_nan=False,
    check_device=True,
    check_dtype=True,
    check_stride=False,
    msg=None,
):
    """Raise ``AssertionError`` unless ``actual`` and ``expected`` are close.

    Tensors must match in shape, and (unless turned off) dtype and device; values
    must satisfy ``|actual - expected| <= atol + rtol * |expected|`` elementwise
    (NaNs match only with ``equal_nan``). Containers (sequences, mappings) are
    compared element by element. Numbers and numpy arrays are accepted too.

    Args:
        rtol, atol (float, optional): tolerances; both or neither. Defaults depend
            on the dtype (e.g. float32: 1.3e-6 and 1e-5; integers: exact).
        equal_nan (bool): whether NaN equals NaN.
        check_device, check_dtype, check_stride (bool): which metadata must match.
        msg (str, optional): replaces the generated message.

    Raises:
        AssertionError: describing the first mismatch (the greatest absolute and
            relative differences and their index for values).
        ValueError: if only one of ``rtol``/``atol`` is given.

    Example:
        >>> import ember
        >>> ember.testing.assert_close(ember.tensor([1.0, 2.0]), ember.tensor([1.0, 2.0 + 1e-7]))
    """
    if (rtol is None) != (atol is None):
        raise ValueError("assert_close: rtol and atol must both be given or both omitted")
    _compare(actual, expected, rtol, atol, equal_nan, check_device, check_dtype, check_stride, msg, path="")


def _compare(actual, expected, rtol, atol, equal_nan, check_device, check_dtype, check_stride, msg, path):
    if isinstance(actual, Mapping) and isinstance(expected, Mapping):
        if set(actual) != set(expected):
            _fail(msg, f"mappings{path} differ in keys: {sorted(map(str, actual))} vs {sorted(map(str, expected))}")
        for key in actual:
            _compare(
                actual[key],
                expected[key],
                rtol,
                atol,
                equal_nan,
                check_device,
                check_dtype,
                check_stride,
                msg,
                f"{path}[{key!r}]",
            )
        return
    if _is_sequence(actual) and _is_sequence(expected):
        if len(actual) != len(expected):
            _fail(msg, f"sequences{path} differ in length: {len(actual)} vs {len(expected)}")
        for i, (a, e) in enumerate(zip(actual, expected)):
            _compare(a, e, rtol, atol, equal_nan, check_device, check_dtype, check_stride, msg, f"{path}[{i}]")
        return
    a_t, e_t = isinstance(actual, Tensor), isinstance(expected, Tensor)
    where = f" at {path}" if path else ""
    if a_t and e_t:
        if tuple(actual.shape) != tuple(expected.shape):
            _fail(msg, f"The values for attribute 'shape' do not match{where}: {actual.shape} != {expected.shape}.")
        if check_device and actual.device != expected.device:
            _fail(msg, f"The values for attribute 'device' do not match{where}: {actual.device} != {expected.device}.")
        if check_dtype and actual.dtype is not expected.dtype:
            _fail(msg, f"The values for attribute 'dtype' do not match{where}: {actual.dtype} != {expected.dtype}.")
        if check_stride and actual.stride() != expected.stride():
            _fail(
                msg,
                f"The values for attribute 'stride()' do not match{where}: {actual.stride()} != {expected.stride()}.",
            )
        dtype = D.promote_types(actual.dtype, expected.dtype)
    elif a_t or e_t:
        tensor = actual if a_t else expected
        dtype = tensor.dtype
    else:
        dtype = D.result_type_of([actual, expected]) if _is_number(actual) and _is_number(expected) else None
    if rtol is None:
        rtol, atol = default_tolerances(dtype) if dtype is not None else (1e-7, 1e-7)
    _compare_values(_as_numpy(actual), _as_numpy(expected), rtol, atol, equal_nan, msg, where)


def _is_sequence(x):
    return isinstance(x, Sequence) and not isinstance(x, (str, bytes))


def _is_number(x):
    return isinstance(x, (bool, int, float, complex))


def _compare_values(a, e, rtol, atol, equal_nan, msg, where):
    if a.shape != e.shape:
        _fail(msg, f"Shapes do not match{where}: {a.shape} != {e.shape}.")
    if a.size == 0:
        return
    if a.dtype == np.bool_ or e.dtype == np.bool_:
        mismatch = a != e
    else:
        kind = np.complex128 if np.iscomplexobj(a) or np.iscomplexobj(e) else np.float64
        a64, e64 = a.astype(kind), e.astype(kind)
        with np.errstate(invalid="ignore", over="ignore"):
            diff = np.abs(a64 - e64)
            close = diff <= atol + rtol * np.abs(e64)
            close |= a64 == e64  # equal infinities
            nan_a, nan_e = np.isnan(a64), np.isnan(e64)
            close &= ~(nan_a | nan_e)
            if equal_nan:
                close |= nan_a & nan_e
        mismatch = ~close
    count = int(np.count_nonzero(mismatch))
    if count == 0:
        return
    idx = np.unravel_index(int(np.argmax(mismatch)), a.shape) if a.ndim else ()
    detail = f"Mismatched elements: {count} / {a.size} ({100.0 * count / a.size:.1f}%)"
    if a.dtype != np.bool_ and e.dtype != np.bool_:
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            d = np.abs(a.astype(np.complex128) - e.astype(np.complex128))
            d = np.where(np.isnan(d), math.inf, d)
            worst = np.unravel_index(int(np.argmax(d)), a.shape) if a.ndim else ()
            rel = d / np.abs(e.astype(np.complex128))
        detail += (
            f"\nGreatest absolute difference: {float(d[worst])} at index {tuple(int(i) for i in worst)}"
            f" (up to {atol} allowed)\nGreatest relative difference: {float(np.nan_to_num(rel, nan=math.inf).max())}"
            f" (up to {rtol} allowed)"
        )
    _fail(
        msg,
        f"Tensor-likes are not close{where}!\n\n{detail}\nFirst mismatch at index {tuple(int(i) for i in idx)}: "
        f"{a[idx]!r} vs {e[idx]!r}",
    )


def _fail(msg, text):
    raise AssertionError(msg if msg is not None else text)
