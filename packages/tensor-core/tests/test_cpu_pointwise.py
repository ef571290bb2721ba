"""ember._C's pointwise kernels (csrc/pointwise.cpp) against numpy, bit for bit.

The kernel tests call ``ember._C`` directly on numpy arrays of every dtype, broadcast pattern and
layout (hypothesis draws shapes, broadcast dims, transpositions, steps and flips); the op tests
check that the ops which compute through the kernels (large arrays) give what numpy's path gives
(small arrays, or the threshold raised), and that ``out=`` and in-place ops write into the
destination's memory.
"""

from __future__ import annotations

import contextlib

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ember
from ember import _C
from ember._ops import _cpu_pointwise, _out

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = [np.dtype(t) for t in (np.bool_, np.uint8, np.int8, np.int16, np.int32, np.int64, np.float16)] + [
    BF16, np.dtype(np.float32), np.dtype(np.float64)]
FUNCTIONS = [np.add, np.subtract, np.multiply, np.true_divide, np.maximum, np.minimum, np.equal, np.not_equal,
             np.less, np.less_equal, np.greater, np.greater_equal]


def _takes(fn, dtype):
    """Whether the kernel takes ``fn`` on ``dtype`` (as _cpu_pointwise decides)."""
    return _cpu_pointwise._binary_code(_cpu_pointwise.BINARY_OPS[fn], dtype) is not None and not (
        fn is np.subtract and dtype.kind == "b")


def _values(rng, dtype, shape):
    """Values of ``dtype`` with the awkward ones mixed in: NaN, infinities, signed zeros, integer extremes."""
    if dtype.kind == "b":
        return rng.integers(0, 2, shape).astype(dtype)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, shape, endpoint=True, dtype=dtype)
    x = (rng.standard_normal(shape) * 100).astype(np.float32)
    specials = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, 1.0], np.float32)
    pick = rng.integers(0, 3 * len(specials), shape)
    x = np.where(pick < len(specials), specials[np.minimum(pick, len(specials) - 1)], x)
    return np.asarray(x).astype(dtype)


def _bits(a):
    return np.ascontiguousarray(a).view(np.uint8).tobytes() if a.ndim else a.tobytes()


def _assert_same(actual, expected):
    """The same bits, except that a NaN may stand for another NaN (sign, payload) where both are NaN.

    With two NaN operands, which one the result carries depends on the order a compiler gives the
    operands of a commutative instruction (numpy's own SIMD and scalar loops differ there);
    test_a_single_nan_keeps_its_sign checks the bits of a NaN that meets a number.
    """
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    if actual.dtype.kind == "f" or actual.dtype == BF16:
        both = np.isnan(actual.astype(np.float64)) & np.isnan(expected.astype(np.float64))
        actual, expected = np.where(both, np.nan, actual).astype(actual.dtype), np.where(both, np.nan, expected).astype(
            expected.dtype)
    assert _bits(actual) == _bits(expected), (actual, expected)


@st.composite
def layouts(draw, max_dims=4):
    """A shape, a way to lay an array of it out (transposed, stepped, flipped), and broadcast variants."""
    ndim = draw(st.integers(0, max_dims))
    shape = tuple(draw(st.lists(st.integers(1, 7), min_size=ndim, max_size=ndim)))
    perm = draw(st.permutations(range(ndim)))
    steps = tuple(draw(st.lists(st.sampled_from([1, 1, 2, -1]), min_size=ndim, max_size=ndim)))
    # the other operand's shape: some dims of size 1 (a row, a column, a middle dim), maybe fewer dims
    ones = draw(st.lists(st.booleans(), min_size=ndim, max_size=ndim))
    drop = draw(st.integers(0, ndim))
    other = tuple(1 if o else s for s, o in zip(shape, ones))[drop:]
    return shape, perm, steps, other


def _laid_out(base, perm, steps):
    """``base``'s values in an array with the given transposition and steps (negative: a flipped view)."""
    if base.ndim == 0:
        return base
    inverse = np.argsort(perm)
    big_shape = tuple(base.shape[p] * abs(steps[i]) for i, p in enumerate(perm))
    store = np.zeros(big_shape, base.dtype)
    view = store[tuple(slice(None, None, s) if s > 0 else slice(None, None, s) for s in steps)]
    view = view[tuple(slice(0, base.shape[p]) for p in perm)]
    view[...] = np.transpose(base, perm)
    return np.transpose(view, inverse)


@contextlib.contextmanager
def threads(n):
    previous = ember.get_num_threads()
    ember.set_num_threads(n)
    try:
        yield
    finally:
        ember.set_num_threads(previous)


@contextlib.contextmanager
def isa(name):
    previous = _C.set_pointwise_isa(name)
    try:
        yield
    finally:
        _C.set_pointwise_isa(previous)


# -- the kernels ----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@SETTINGS
@given(layout=layouts(), seed=st.integers(0, 2**32 - 1), swap=st.booleans())
def test_binary_kernel_matches_numpy(dtype, layout, seed, swap):
    shape, perm, steps, other_shape = layout
    rng = np.random.default_rng(seed)
    a = _laid_out(_values(rng, dtype, shape), perm, steps)
    b = _values(rng, dtype, other_shape)
    if swap:
        a, b = b, a
    for fn in FUNCTIONS:
        if not _takes(fn, dtype):
            continue
        with np.errstate(all="ignore"):
            expected = np.asarray(fn(a, b))
        out = np.empty(expected.shape, expected.dtype)
        _C.pointwise_binary(_cpu_pointwise.BINARY_OPS[fn], _cpu_pointwise.dtype_code(dtype), out, a, b)
        _assert_same(out, expected)


@pytest.mark.parametrize("dtype", [d for d in DTYPES if d.kind == "f" or d == BF16], ids=str)
def test_a_single_nan_keeps_its_sign(dtype):
    nans = np.array([np.nan, -np.nan, np.nan, -np.nan], np.float32).astype(dtype)
    numbers = np.array([1.0, 2.0, -0.0, np.inf], np.float32).astype(dtype)
    for a, b in ((nans, numbers), (numbers, nans)):
        for fn in FUNCTIONS:
            if _takes(fn, dtype):
                with np.errstate(all="ignore"):
                    expected = fn(a, b)
                out = np.empty(expected.shape, expected.dtype)
                _C.pointwise_binary(_cpu_pointwise.BINARY_OPS[fn], _cpu_pointwise.dtype_code(dtype), out, a, b)
                assert _bits(out) == _bits(expected), fn


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_binary_kernel_with_alpha(dtype):
    if dtype.kind == "b" or dtype in (np.dtype(np.float16), BF16):
        pytest.skip("alpha is not taken for bool (refused) nor float16/bfloat16 (numpy rounds the product)")
    rng = np.random.default_rng(0)
    a, b = _values(rng, dtype, (33, 65)), _values(rng, dtype, (65,))
    alpha = 3 if dtype.kind in "iu" else 0.1
    alpha_array = np.asarray(alpha, dtype)
    for code, fn in ((0, np.add), (1, np.subtract)):
        with np.errstate(all="ignore"):
            expected = fn(a, np.multiply(b, alpha_array))
        out = np.empty_like(expected)
        _C.pointwise_binary(code, _cpu_pointwise.dtype_code(dtype), out, a, b, alpha_f=float(alpha_array),
                            alpha_i=int(alpha), has_alpha=True)
        _assert_same(out, expected)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@SETTINGS
@given(layout=layouts(), seed=st.integers(0, 2**32 - 1))
def test_where_kernel_matches_numpy(dtype, layout, seed):
    shape, perm, steps, other_shape = layout
    rng = np.random.default_rng(seed)
    condition = _laid_out(rng.integers(0, 2, shape).astype(bool), perm, steps)
    a, b = _values(rng, dtype, other_shape), _laid_out(_values(rng, dtype, shape), perm[::-1], steps)
    expected = np.where(condition, a, b)
    out = np.empty(expected.shape, dtype)
    _C.pointwise_where(out, condition, a, b)
    _assert_same(out, expected)


@pytest.mark.parametrize("dtype", [d for d in DTYPES if d.kind != "b" and d != np.dtype(np.float16)], ids=str)
@SETTINGS
@given(layout=layouts(), seed=st.integers(0, 2**32 - 1), bounds=st.sampled_from(["both", "low", "high"]))
def test_clamp_kernel_matches_numpy(dtype, layout, seed, bounds):
    shape, perm, steps, other_shape = layout
    rng = np.random.default_rng(seed)
    x = _laid_out(_values(rng, dtype, shape), perm, steps)
    # one bound: any shape (numpy's maximum/minimum); both: numbers, as the ops pass them (numpy's clip
    # with array bounds returns the bound where it equals the value, and the ops keep that path)
    low = _values(rng, dtype, other_shape if bounds == "low" else ()) if bounds != "high" else None
    high = _values(rng, dtype, other_shape if bounds == "high" else ()) if bounds != "low" else None
    scalar = (lambda v: v if v is None or v.ndim else v[()]) if bounds == "both" else (lambda v: v)
    with np.errstate(all="ignore"):
        expected = np.asarray(np.clip(x, scalar(low), scalar(high))).astype(dtype)
    out = np.empty(expected.shape, dtype)
    _C.pointwise_clamp(_cpu_pointwise.dtype_code(dtype), out, x, low, high)
    _assert_same(out, expected)


@pytest.mark.parametrize("source", DTYPES, ids=str)
def test_convert_kernel_matches_numpy(source):
    rng = np.random.default_rng(1)
    values = _values(rng, source, (40, 70))
    for target in DTYPES:
        if not _cpu_pointwise._converts(_cpu_pointwise.dtype_code(source), _cpu_pointwise.dtype_code(target)):
            continue
        x = values
        if source.kind == "f" and target.kind in "biu":
            # a float out of the integer's range (or NaN) converts to what the C cast happens to give: not compared
            x = np.clip(np.nan_to_num(values.astype(np.float64)), -100, 100).astype(source)
        with np.errstate(all="ignore"):
            expected = x.astype(target)
        out = np.empty(x.shape, target)
        _C.pointwise_convert(_cpu_pointwise.dtype_code(target), _cpu_pointwise.dtype_code(source), out, x[:, ::-1])
        _assert_same(out, expected[:, ::-1])


@pytest.mark.parametrize("target", [np.dtype(np.float16), BF16], ids=str)
def test_rounding_to_16_bits_matches_numpy_for_every_kind_of_float32(target):
    # random bit patterns: subnormals, NaNs with payloads, values next to ties and to the overflow threshold
    bits = np.random.default_rng(2).integers(0, 2**32, 200_000, dtype=np.uint64).astype(np.uint32)
    bits[:4] = [0x477FEFFF, 0x477FF000, 0x33000000, 0x33000001]  # float16: below/at overflow, tiny ties
    x = bits.view(np.float32)
    with np.errstate(all="ignore"):
        expected = x.astype(target)
    out = np.empty(x.shape, target)
    _C.pointwise_convert(_cpu_pointwise.dtype_code(target), 8, out, x)
    _assert_same(out, expected)


@pytest.mark.parametrize("name,fn", [("neg", np.negative), ("abs", np.abs), ("relu", None)])
@pytest.mark.parametrize("dtype", [d for d in DTYPES if d.kind != "b"], ids=str)
def test_unary_kernel_matches_numpy(name, fn, dtype):
    if _cpu_pointwise._unary_code(name, dtype) is None:
        pytest.skip("numpy keeps this op for this dtype")
    x = _values(np.random.default_rng(3), dtype, (50, 37)).T
    with np.errstate(all="ignore"):
        expected = np.maximum(x, dtype.type(0)) if fn is None else fn(x)
    out = np.empty(x.shape, dtype)
    _C.pointwise_unary(_cpu_pointwise.UNARY_OPS[name], _cpu_pointwise.dtype_code(dtype), out, x)
    _assert_same(out, expected)


@pytest.mark.parametrize("dtype", [np.dtype(np.float32), np.dtype(np.int64), BF16], ids=str)
def test_results_do_not_depend_on_threads_or_instruction_set(dtype):
    rng = np.random.default_rng(4)
    a = _values(rng, dtype, (300, 1001))[:, 1:]  # rows that don't start on a vector boundary
    b = _values(rng, dtype, (300, 1))
    results = []
    for n, name in ((1, "baseline"), (2, "baseline"), (1, _C.pointwise_isa()), (2, _C.pointwise_isa())):
        with threads(n), isa(name):
            out = np.empty(a.shape, dtype)
            _C.pointwise_binary(2, _cpu_pointwise.dtype_code(dtype), out, a, b)
            results.append(out)
    with np.errstate(all="ignore"):
        expected = np.multiply(a, b)
    for r in results:  # (NaN times NaN: either NaN, see _assert_same)
        _assert_same(r, expected)


def test_the_loop_collapses_contiguous_dims_and_orders_by_the_output():
    out = np.empty((4, 5, 6), np.float32)
    # contiguous: one dim
    assert _C.pointwise_loop_shape(out, [np.ones((4, 5, 6), np.float32)]) == ((120,), ((4,), (4,)))
    # a column broadcast along the rows: two dims, the input's inner stride 0
    shape, strides = _C.pointwise_loop_shape(out, [np.ones((4, 5, 1), np.float32)])
    assert shape == (20, 6) and strides[1] == (4, 0)
    # a transposed output is walked in its memory order
    out_t = np.empty((6, 5, 4), np.float32).transpose(2, 1, 0)
    shape, strides = _C.pointwise_loop_shape(out_t, [np.ones((4, 5, 6), np.float32)])
    assert shape == (6, 5, 4) and strides == ((80, 16, 4), (4, 24, 120))


def test_the_kernels_refuse_what_does_not_broadcast_and_read_only_outputs():
    out = np.empty((3, 4), np.float32)
    with pytest.raises(ValueError, match="does not broadcast"):
        _C.pointwise_binary(0, 8, out, np.ones((3, 5), np.float32), np.ones((3, 4), np.float32))
    with pytest.raises(ValueError, match="more dims"):
        _C.pointwise_binary(0, 8, out, np.ones((2, 3, 4), np.float32), np.ones((3, 4), np.float32))
    out.flags.writeable = False
    with pytest.raises(ValueError):
        _C.pointwise_binary(0, 8, out, np.ones((3, 4), np.float32), np.ones((3, 4), np.float32))


# -- the ops --------------------------------------------------------------------------------

N = _cpu_pointwise.MIN_ELEMENTS  # the smallest array computed in C++


@contextlib.contextmanager
def numpy_only():
    """The ops' numpy path: no array is large enough for the C++ kernels."""
    previous = _cpu_pointwise.MIN_ELEMENTS
    _cpu_pointwise.MIN_ELEMENTS = 1 << 62
    try:
        from ember._ops import _binary_plan

        with _binary_plan.plans_disabled():  # the plan's closures read the threshold when they are made
            yield
    finally:
        _cpu_pointwise.MIN_ELEMENTS = previous


def _tensor(rng, dtype, shape):
    dtype = np.dtype(dtype)
    return ember.from_numpy(np.ascontiguousarray(_values(rng, dtype, shape)))


CALLS = {
    "add": lambda a, b: a + b,
    "add_scalar": lambda a, b: a + 2.5 if a.dtype.is_floating_point else a + 3,
    "radd_scalar": lambda a, b: 0.5 - a if a.dtype.is_floating_point else 3 * a,
    "sub_alpha": lambda a, b: ember.sub(a, b, alpha=2),
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "div_scalar": lambda a, b: a / 3.0,
    "maximum": ember.maximum,
    "minimum": ember.minimum,
    "eq": lambda a, b: a == b,
    "lt": lambda a, b: a < b,
    "ge": lambda a, b: a >= b,
    "gt_scalar": lambda a, b: a > 0.5 if a.dtype.is_floating_point else a > 3,
    "ne_scalar": lambda a, b: a != 1,
    "where": lambda a, b: ember.where(a > b, a, b),
    "where_scalar": lambda a, b: ember.where(a > b, a, 0),
    "clamp": lambda a, b: ember.clamp(a, -1, 1),
    "clamp_tensor": lambda a, b: ember.clamp(a, min=b),
    "neg": lambda a, b: -b,
    "abs": lambda a, b: ember.abs(b),
    "relu": lambda a, b: ember.relu(b),
}


@pytest.mark.parametrize("call", sorted(CALLS))
@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16", "float16", "int64", "int32", "int8", "uint8"])
@pytest.mark.parametrize("layout", ["same", "column", "row", "transposed"])
def test_ops_give_numpys_results(call, dtype, layout):
    dtype = getattr(ember, dtype)
    np_dtype = dtype.numpy_dtype
    if np_dtype.kind in "iu" and call in ("div", "div_scalar"):
        pytest.skip("integer true division promotes: numpy's path")
    rng = np.random.default_rng(5)
    rows, cols = 64, N // 64 + 3
    a = _tensor(rng, np_dtype, (rows, cols))
    b = {"same": (rows, cols), "column": (rows, 1), "row": (cols,), "transposed": (cols, rows)}[layout]
    b = _tensor(rng, np_dtype, b)
    if layout == "transposed":
        b = b.t()
    fn = CALLS[call]
    try:
        with numpy_only():
            expected = fn(a, b)
    except (RuntimeError, NotImplementedError, TypeError):
        pytest.skip("the op refuses this dtype")
    actual = fn(a, b)
    _assert_same(actual.numpy(), expected.numpy())


def test_large_ops_use_the_kernel_and_small_ones_do_not(monkeypatch):
    calls = []
    real = _C.pointwise_binary
    monkeypatch.setattr(_C, "pointwise_binary", lambda *args, **kw: calls.append(1) or real(*args, **kw))
    a = ember.ones(N)
    _ = a + a
    assert calls == [1]
    small = ember.ones(N - 1)
    _ = small + small
    _ = small * 2.0
    assert calls == [1]


@pytest.mark.parametrize("n", [1, 2])
def test_ops_do_not_depend_on_the_thread_count(n):
    rng = np.random.default_rng(6)
    a, b = _tensor(rng, np.float32, (512, 300)), _tensor(rng, np.float32, (512, 1))
    with threads(1):
        expected = [(a + b).numpy(), ember.where(a > 0, a, b).numpy(), ember.clamp(a, -1, 1).numpy()]
    with threads(n):
        actual = [(a + b).numpy(), ember.where(a > 0, a, b).numpy(), ember.clamp(a, -1, 1).numpy()]
    for x, y in zip(actual, expected):
        _assert_same(x, y)


# -- out= and in place --------------------------------------------------------------------------


@pytest.fixture
def no_copy(monkeypatch):
    """Fails a test whose out= call copies a computed result into out (write_out's path)."""

    def refuse(op, out, result):
        raise AssertionError(f"{op.name}: out= went through a temporary and a copy")

    monkeypatch.setattr(_out, "write_out", refuse)


OUT_CALLS = {
    "add": lambda a, b, out: ember.add(a, b, out=out),
    "add_alpha": lambda a, b, out: ember.add(a, b, alpha=0.5, out=out),
    "sub": lambda a, b, out: ember.sub(a, 2.0, out=out),
    "mul": lambda a, b, out: ember.mul(a, b, out=out),
    "div": lambda a, b, out: ember.div(a, b, out=out),
    "maximum": lambda a, b, out: ember.maximum(a, b, out=out),
    "where": lambda a, b, out: ember.where(a > 0, a, b, out=out),
    "clamp": lambda a, b, out: ember.clamp(a, -0.5, 0.5, out=out),
    "neg": lambda a, b, out: ember.neg(a, out=out),
}


@pytest.mark.parametrize("call", sorted(OUT_CALLS))
def test_out_is_written_in_place(call, no_copy):
    rng = np.random.default_rng(7)
    a, b = _tensor(rng, np.float32, (1024, 20)), _tensor(rng, np.float32, (1024, 1))
    with numpy_only(), _unpatched_write_out():
        expected = OUT_CALLS[call](a, b, ember.empty(1024, 20)).numpy()
    out = ember.empty(1024, 20)
    pointer, version = out.data_ptr(), out._version
    result = OUT_CALLS[call](a, b, out)
    assert result is out and out.data_ptr() == pointer and out._version == version + 1
    _assert_same(out.numpy(), expected)


@contextlib.contextmanager
def _unpatched_write_out():
    patched = _out.write_out
    _out.write_out = _REAL_WRITE_OUT
    try:
        yield
    finally:
        _out.write_out = patched


_REAL_WRITE_OUT = _out.write_out


def test_out_into_a_transposed_tensor(no_copy):
    rng = np.random.default_rng(8)
    a, b = _tensor(rng, np.float32, (300, 200)), _tensor(rng, np.float32, (300, 1))
    out = ember.empty(200, 300).t()
    ember.add(a, b, out=out)
    with np.errstate(all="ignore"):
        _assert_same(out.numpy(), a.numpy() + b.numpy())


def test_out_of_another_dtype_or_shape_takes_the_copy_path():
    a = ember.ones(N)
    out = ember.empty(N, dtype=ember.float64)
    ember.add(a, a, out=out)
    assert out.dtype is ember.float64 and bool((out == 2).all())
    with pytest.raises(RuntimeError, match="out has shape"):
        ember.add(a, a, out=ember.empty(N + 1))
    with pytest.raises(RuntimeError, match="can't be cast"):
        ember.add(a, a, out=ember.empty(N, dtype=ember.int64))


def test_out_that_requires_grad_still_raises():
    a = ember.ones(N, requires_grad=True)
    with pytest.raises(RuntimeError, match="don't support automatic differentiation"):
        ember.add(a, a, out=ember.empty(N))


@pytest.mark.parametrize("op", ["add_", "sub_", "mul_", "div_", "clamp_", "iadd", "imul", "relu_", "neg_", "abs_"])
def test_inplace_ops_write_into_self(op, monkeypatch):
    rng = np.random.default_rng(9)
    x, y = _tensor(rng, np.float32, (512, 64)), _tensor(rng, np.float32, (512, 1))
    expected = x.clone()
    with numpy_only():
        _apply(expected, op, y)
    copies = []
    monkeypatch.setattr(np, "copyto", lambda *a, **k: copies.append(a))  # make_inplace's copy of a result
    pointer, version = x.data_ptr(), x._version
    _apply(x, op, y)
    monkeypatch.undo()
    assert not copies and x.data_ptr() == pointer and x._version == version + 1
    _assert_same(x.numpy(), expected.numpy())


def _apply(x, op, y):
    if op == "iadd":
        x += y
    elif op == "imul":
        x *= y
    elif op == "clamp_":
        x.clamp_(-0.5, 0.5)
    elif op == "sub_":
        x.sub_(y, alpha=3)
    elif op in ("relu_", "neg_", "abs_"):
        getattr(x, op)()
    else:
        getattr(x, op)(y)


@pytest.mark.parametrize("dtype", [ember.int32, ember.uint8, ember.bfloat16, ember.float64])
def test_inplace_add_of_other_dtypes(dtype):
    rng = np.random.default_rng(10)
    x, y = _tensor(rng, dtype.numpy_dtype, (N,)), _tensor(rng, dtype.numpy_dtype, (N,))
    expected = x.clone()
    with numpy_only():
        expected.add_(y)
    pointer = x.data_ptr()
    x.add_(y)
    assert x.data_ptr() == pointer
    _assert_same(x.numpy(), expected.numpy())


def test_partial_overlap_falls_back_to_a_temporary():
    x = ember.arange(float(N + 1))
    before = x.numpy().copy()
    ember.add(x[:-1], x[1:], out=x[1:])  # out overlaps the inputs shifted by one element
    _assert_same(x.numpy()[1:], before[:-1] + before[1:])
    y = ember.arange(float(N + 1))
    y[1:].add_(y[:-1])
    _assert_same(y.numpy()[1:], before[1:] + before[:-1])


def test_out_that_is_an_input_element_for_element():
    rng = np.random.default_rng(11)
    x, y = _tensor(rng, np.float32, (N,)), _tensor(rng, np.float32, (N,))
    with np.errstate(all="ignore"):
        expected = x.numpy() * y.numpy()
    ember.mul(x, y, out=x)
    _assert_same(x.numpy(), expected)


# -- small out= ------------------------------------------------------------------------------------------

# name -> the call with out= of x, y; the op without it (out=None)
_SMALL_OUT_CALLS = {
    "add": lambda x, y, out: ember.add(x, y, out=out),
    "sub_alpha": lambda x, y, out: ember.sub(x, y, alpha=2, out=out),
    "mul_column": lambda x, y, out: ember.mul(x, y[:, :1], out=out),
    "div": lambda x, y, out: ember.div(x, y, out=out),
    "maximum": lambda x, y, out: ember.maximum(x, y, out=out),
    "where": lambda x, y, out: ember.where(x > y, x, y, out=out),
    "clamp": lambda x, y, out: ember.clamp(x, min=-1, max=2, out=out),
    "neg": lambda x, y, out: ember.neg(x, out=out),
    "sqrt": lambda x, y, out: ember.sqrt(x, out=out),
    "exp": lambda x, y, out: ember.exp(x, out=out),
}
# the float32 exp kernel is a few ulp from numpy's loop, which small calls use: exp has no small writer
_NO_SMALL_WRITER = {"exp"}


@pytest.mark.parametrize("dtype", [np.dtype(np.float32), np.dtype(np.float16), BF16, np.dtype(np.int32)], ids=str)
@pytest.mark.parametrize("name", sorted(_SMALL_OUT_CALLS))
def test_small_out_gives_the_bits_of_the_call_without_out(name, dtype, monkeypatch):
    # outputs below MIN_ELEMENTS go straight to the C++ writers of numpy's bits (write_direct's small twins)
    if dtype.kind == "i" and name in ("div", "sqrt", "exp"):
        pytest.skip("promotes to float")
    rng = np.random.default_rng(7)
    x, y = (ember.tensor(_values(rng, dtype, (5, 6))) for _ in range(2))
    call = _SMALL_OUT_CALLS[name]
    with np.errstate(all="ignore"):
        without = call(x, y, None)
        if name not in _NO_SMALL_WRITER and dtype == np.float32:  # no general path (result, then a copy)
            monkeypatch.setattr(_out, "write_out", None)
        out = ember.empty((5, 6), dtype=x.dtype)
        returned = call(x, y, out)
    assert returned is out
    _assert_same(out.numpy(), without.numpy())


def test_small_out_overlapping_an_input_is_computed_as_if_from_a_copy():
    x = ember.arange(12.0)
    ember.add(x[:10], 1.0, out=x[2:])  # the writer refuses a partial overlap: the general path
    np.testing.assert_array_equal(x.numpy(), np.r_[0.0, 1.0, np.arange(10.0) + 1.0])
    y = ember.arange(6.0)
    ember.mul(y, y, out=y)  # the same elements: written in place
    np.testing.assert_array_equal(y.numpy(), np.arange(6.0) ** 2)


@pytest.mark.parametrize("dtype", [np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.int8), BF16], ids=str)
def test_transposed_operands_walked_in_tiles_give_numpys_values(dtype):
    # a 2-D loop with a transposed operand runs in tiles of 128 x 8 (pointwise_loops.h, wants_tiles):
    # sizes that are not multiples of the tile, a stepped transposed operand, a column, 1 and 2 threads
    # (78k elements: two threads' rows)
    rng = np.random.default_rng(5)
    a = _values(rng, dtype, (259, 301))
    b = _values(rng, dtype, (301, 259))
    col = _values(rng, dtype, (301, 1))
    cond = rng.integers(0, 2, (301, 259)).astype(bool)
    stepped = _values(rng, dtype, (259, 602))[:, ::2]
    code = _cpu_pointwise.dtype_code(dtype)
    for n in (1, 2):
        with threads(n), np.errstate(all="ignore"):
            for x in (a.T, stepped.T):
                out = np.empty(b.shape, dtype)
                _C.pointwise_binary(0, code, out, x, b)
                _assert_same(out, np.add(x, b))
                out_t = np.empty(b.shape[::-1], dtype).T  # a transposed output, contiguous inputs: no tiles
                _C.pointwise_binary(2, code, out_t, b, col)
                _assert_same(np.ascontiguousarray(out_t), np.multiply(b, col))
                out = np.empty(b.shape, dtype)
                _C.pointwise_where(out, cond, x, b)
                _assert_same(out, np.where(cond, x, b))
                out = np.empty(b.shape, dtype)
                _C.pointwise_unary(0 if dtype.kind == "i" else 1, code, out, x)  # neg / abs
                _assert_same(out, np.negative(x) if dtype.kind == "i" else np.abs(x))
