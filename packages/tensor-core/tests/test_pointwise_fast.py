"""The pointwise ops' checked CPU kernels in C (``ember._C.make_unary_fast``/``make_binary_fast``,
csrc/pointwise_fast.h) against their Python references (``unary``'s checked_cpu, ``BinaryRule.direct``).

The compiled kernels take the common call (float tensors of one shape and dtype, below the native
kernel's size) and hand everything else to the reference; both must give the same bits, dtype and
errors, numpy's floating-point errors stay quiet, and the user's numpy error state is left as it was.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import ember
from ember._ops import _cpu_pointwise, _dispatch, registry

_UNARY = ("sin", "cos", "exp", "tanh", "log", "sqrt", "neg", "abs", "sigmoid", "reciprocal")
_BINARY = ("add", "sub", "mul", "div", "maximum", "eq", "lt", "pow")


def _compiled(op):
    kernel = op.checked_kernels.get("cpu")
    return kernel if type(kernel).__name__ == "builtin_function_or_method" else None


def _rng_tensor(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    values = np.asarray(rng.standard_normal(shape) * 3)
    if values.size >= 3 and np.dtype(dtype).kind == "f":
        values.flat[:3] = [0.0, np.inf, np.nan]  # 1/0, log(0), overflow, NaN: all silent
    return ember.from_numpy(np.asarray(values.astype(dtype)))


_CASES = [((16,), np.float32), ((3, 5), np.float64), ((), np.float32), ((16,), np.float16), ((4,), np.int64),
          ((2 * _cpu_pointwise.MIN_ELEMENTS,), np.float32)]


def _same(a, b):
    if isinstance(a, Exception) or isinstance(b, Exception):
        return type(a) is type(b) and str(a) == str(b)
    if a is None or b is None:
        return a is b
    return a.dtype == b.dtype and a.shape == b.shape and np.asarray(a).tobytes() == np.asarray(b).tobytes()


def _general(op, *args):
    """The op's result array by the general path (meta function, general kernel, no plans)."""
    with _dispatch.fast_paths_disabled():
        result = _run(op, *args)
    return result if isinstance(result, Exception) else result._data


def _run(fn, *args):
    try:
        return fn(*args)
    except Exception as exc:  # noqa: BLE001 - compared
        return exc


@pytest.mark.parametrize("name", _UNARY)
def test_unary_compiled_kernel_matches_the_general_path(name):
    op = registry[name]
    kernel = _compiled(op)
    if kernel is None:
        pytest.skip(f"{name}: no compiled checked kernel (an extra check, or no float dtype computes as is)")
    computed = 0
    for i, (shape, dtype) in enumerate(_CASES):
        t = _rng_tensor(shape, dtype, i)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with np.errstate(all="raise"):
                got = _run(kernel, t)
                assert np.geterr()["over"] == "raise"
        expected = _general(op, t)
        if got is None:
            continue  # declined: the meta path runs
        assert _same(got, expected), f"{name} {shape} {dtype}"
        computed += 1
    assert computed >= 2  # (the float32 and float64 cases at least)


@pytest.mark.parametrize("name", _BINARY)
def test_binary_compiled_direct_matches_the_general_path(name):
    op = registry[name]
    kernel = _compiled(op)
    if kernel is None:
        pytest.skip(f"{name}: no compiled direct kernel")
    computed = 0
    for i, (shape, dtype) in enumerate(_CASES):
        a, b = _rng_tensor(shape, dtype, i), _rng_tensor(shape, dtype, i + 100)
        for args in ((a, b), (a, 2.5), (a, _rng_tensor((1,) * len(shape), dtype, 7)) if shape else (a, b)):
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                got = _run(kernel, *args)
                expected = _general(op, *args)
            if got is None:
                continue
            assert _same(got, expected), f"{name} {shape} {dtype} {[type(x).__name__ for x in args]}"
            computed += 1
    assert computed >= 2


def test_the_compiled_kernels_are_installed_and_hand_other_calls_on():
    mul, sin = registry["mul"], registry["sin"]
    assert _compiled(mul) is not None and _compiled(sin) is not None
    assert mul.binary_rule.direct is mul.checked_kernels["cpu"]

    class Sub(ember.Tensor):
        pass

    x = ember.ones(4)
    assert _compiled(sin)(x.as_subclass(Sub)) is None  # the reference declines a subclass
    assert mul.binary_rule.direct(x, ember.ones(4, dtype=ember.float64)) is None  # promotion: the general path
    np.testing.assert_array_equal(_compiled(sin)(x), np.sin(np.ones(4, np.float32)))
    with pytest.raises(TypeError):
        _compiled(sin)(x, x)  # the reference's own error for a wrong call


def test_plans_disabled_empties_what_the_compiled_direct_takes():
    from ember._ops._binary_plan import plans_disabled

    add = registry["add"]
    a = ember.ones(3)
    assert add.binary_rule.direct(a, a) is not None
    with plans_disabled():
        assert add.binary_rule.direct(a, a) is None
    assert add.binary_rule.direct(a, a) is not None
