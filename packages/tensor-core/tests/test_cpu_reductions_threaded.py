"""The threaded C++ reductions behind amax/amin, max/min(dim), argmax/argmin, var/std and the vector norms.

csrc/reduce.cpp's extreme_dims, arg_extreme_dim, var_dims and norm_dims, reached through the ops (inputs
of at least ``_C_MIN_ELEMENTS`` elements take them) and directly, against numpy on float64 copies of the
data: every dim, sets of dims (adjacent or not), keepdim, C-contiguous, transposed, permuted and strided
inputs, NaN, ties, and one and two threads for every instruction set the CPU runs.
"""

import math

import numpy as np
import pytest

import ember
from ember import _C
from ember._ops._reduction_helpers import _C_MIN_ELEMENTS

EPS32 = float(np.finfo(np.float32).eps)


@pytest.fixture(params=_C.supported_reduce_isas())
def isa(request):
    previous = _C.set_reduce_isa(request.param)
    yield request.param
    _C.set_reduce_isa(previous)


def _data(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "i":
        return rng.integers(-50, 50, shape).astype(dtype)  # many ties
    return (rng.standard_normal(shape) + 0.25).astype(dtype)


def _layout(a, layout):
    """``a``'s values in another memory layout (same shape)."""
    if layout == "contiguous":
        return a
    if layout == "transposed":  # F-contiguous
        return np.asfortranarray(a)
    if layout == "permuted":  # neither C- nor F-contiguous
        order = list(range(a.ndim))[1:] + [0]
        return np.ascontiguousarray(np.moveaxis(a, 0, -1)).transpose(np.argsort(order))
    if layout == "strided":  # every other element along the last dim
        wide = np.repeat(a, 2, axis=-1)
        return wide[..., ::2]
    raise AssertionError(layout)


LAYOUTS = ["contiguous", "transposed", "permuted", "strided"]
SHAPE3 = (19, 33, 40)  # 25,080 elements; rows shorter and longer than the vectors, columns across blocks
DIMS3 = [0, 1, 2, -1, (0, 1), (1, 2), (0, 2), (0, 1, 2)]


def test_large_inputs_take_the_c_kernels(monkeypatch):
    # A test that can fail if the ops quietly stayed on numpy: count the kernel calls.
    calls = []
    for name in ("extreme_dims", "arg_extreme_dim", "var_dims", "norm_dims"):
        real = getattr(_C, name)
        monkeypatch.setattr(_C, name, lambda *a, _real=real, _name=name: calls.append(_name) or _real(*a))
    x = ember.from_numpy(_data(SHAPE3, np.float32))
    x.amax(1), x.argmax(2), x.var((0, 2)), ember.linalg.vector_norm(x, 2, dim=0), x.norm(1, dim=(0, 1))
    assert calls == ["extreme_dims", "arg_extreme_dim", "var_dims", "norm_dims", "norm_dims"]
    calls.clear()
    ember.from_numpy(_data((4, 5), np.float32)).amax(0)  # small: numpy's path
    assert calls == []
    assert math.prod(SHAPE3) >= _C_MIN_ELEMENTS


# -- amax / amin ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
@pytest.mark.parametrize("dim", DIMS3, ids=str)
def test_amax_amin_match_numpy(threads, layout, dtype, dim):
    a = _data(SHAPE3, dtype, seed=3)
    x = ember.from_numpy(_layout(a, layout))
    axis = dim if isinstance(dim, int) else tuple(dim)
    for keepdim in (False, True):
        np.testing.assert_array_equal(x.amax(dim, keepdim).numpy(), a.max(axis=axis, keepdims=keepdim))
        np.testing.assert_array_equal(x.amin(dim, keepdim).numpy(), a.min(axis=axis, keepdims=keepdim))


@pytest.mark.parametrize("shape", [(1, 70_000), (70_000, 1), (3, 5000), (5000, 3), (2, 40, 300), (1000, 9)], ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
def test_extreme_kernel_every_path(isa, threads, shape, dtype):
    a = _data(shape, dtype, seed=len(shape))
    for d in range(len(shape)):
        for kind, want in ((0, a.max(d)), (1, a.min(d))):
            np.testing.assert_array_equal(_C.extreme_dims(a, d, d, False, kind), want)
        if dtype != np.int64:
            np.testing.assert_array_equal(_C.extreme_dims(a, d, d, False, 2), np.abs(a).max(d))
            np.testing.assert_array_equal(_C.extreme_dims(a, d, d, False, 3), np.abs(a).min(d))


@pytest.mark.parametrize("dim", [0, 1, (0, 1)], ids=str)
def test_amax_propagates_nan(threads, dim):
    a = _data((300, 200), np.float32)
    a[17, 3] = np.nan
    a[299, 199] = np.nan
    a[5, 150] = -np.inf
    x = ember.from_numpy(a)
    np.testing.assert_array_equal(x.amax(dim).numpy(), a.max(axis=dim))
    np.testing.assert_array_equal(x.amin(dim).numpy(), a.min(axis=dim))


def test_amax_of_bfloat16_and_float16(threads):
    a = _data((100, 80), np.float32)
    for dtype in (ember.bfloat16, ember.float16):
        x = ember.from_numpy(a).to(dtype)
        wide = x.float().numpy()
        got = x.amax(1)
        assert got.dtype is dtype
        np.testing.assert_array_equal(got.float().numpy(), wide.max(1))
        np.testing.assert_array_equal(x.argmax(0).numpy(), wide.argmax(0))


def test_empty_reductions_keep_their_errors_and_identities():
    x = ember.zeros(5000, 0)
    with pytest.raises(IndexError):
        x.amax(1)
    with pytest.raises(RuntimeError):
        x.amax()
    with pytest.raises(IndexError):
        x.argmax(1)
    assert x.amax(0).shape == (0,)
    np.testing.assert_array_equal(x.sum(1).numpy(), np.zeros(5000, np.float32))
    assert np.isnan(x.var(1).numpy()).all()
    np.testing.assert_array_equal(ember.linalg.vector_norm(x, 2, dim=1).numpy(), np.zeros(5000, np.float32))


# -- argmax / argmin / max(dim) / min(dim) -----------------------------------------------------------------


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
def test_argmax_argmin_and_max_min_values(threads, layout, dtype):
    a = _data(SHAPE3, dtype, seed=5)  # the int data has many ties: the first index must win
    x = ember.from_numpy(_layout(a, layout))
    for dim in (0, 1, 2, -2):
        for keepdim in (False, True):
            np.testing.assert_array_equal(x.argmax(dim, keepdim).numpy(), a.argmax(dim, keepdims=keepdim))
            np.testing.assert_array_equal(x.argmin(dim, keepdim).numpy(), a.argmin(dim, keepdims=keepdim))
            values, indices = x.max(dim, keepdim)
            np.testing.assert_array_equal(values.numpy(), a.max(dim, keepdims=keepdim))
            np.testing.assert_array_equal(indices.numpy(), a.argmax(dim, keepdims=keepdim))
            values, indices = x.min(dim, keepdim)
            np.testing.assert_array_equal(values.numpy(), a.min(dim, keepdims=keepdim))
            np.testing.assert_array_equal(indices.numpy(), a.argmin(dim, keepdims=keepdim))
    assert x.argmax().item() == a.argmax() and x.argmin().item() == a.argmin()
    assert x.max().item() == a.max() and x.min().item() == a.min()
    assert x.argmax(keepdim=True).shape == (1, 1, 1)


@pytest.mark.parametrize("shape", [(1, 70_000), (70_000, 1), (3, 5000), (5000, 3), (2, 40, 300), (1000, 9)], ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_arg_kernel_every_path_with_nan_and_ties(isa, threads, shape, dtype):
    a = _data(shape, dtype, seed=7)
    if dtype != np.int32:
        flat = a.reshape(-1)
        flat[len(flat) // 3] = np.nan
        flat[len(flat) // 2] = np.nan  # a second NaN on some rows: the first one's index wins
    for d in range(len(shape)):
        for is_max, np_arg, np_ext in ((True, np.argmax, np.max), (False, np.argmin, np.min)):
            values, indices = _C.arg_extreme_dim(a, d, False, is_max)
            np.testing.assert_array_equal(indices, np_arg(a, d))
            np.testing.assert_array_equal(values, np_ext(a, d))


def test_argmax_first_nan_and_first_tie_on_a_long_row(threads):
    a = np.zeros(100_000, np.float32)
    a[[70_001, 90_000]] = 1.0
    assert ember.from_numpy(a).argmax().item() == 70_001
    a[[60_000, 80_000]] = np.nan
    assert ember.from_numpy(a).argmax().item() == 60_000
    assert ember.from_numpy(a).argmin().item() == 60_000


@pytest.mark.parametrize("shape", [(1, 300_000), (300_000, 1), (4, 100_000), (100_000, 4), (64, 5000)], ids=str)
def test_amax_and_argmax_are_bit_identical_across_thread_counts(shape):
    a = _data(shape, np.float32, seed=11)
    a.reshape(-1)[::9973] = a.reshape(-1).max()  # ties across the pieces of a split row
    previous = _C.get_num_threads()
    results = []
    try:
        for n in (1, 2, 3):
            _C.set_num_threads(n)
            results.append([_C.extreme_dims(a, d, d, False, 0) for d in (0, 1)] +
                           [_C.arg_extreme_dim(a, d, False, True)[1] for d in (0, 1)])
    finally:
        _C.set_num_threads(previous)
    for other in results[1:]:
        for got, want in zip(other, results[0]):
            np.testing.assert_array_equal(got, want)


# -- var / std ---------------------------------------------------------------------------------------------


def _var_reference(a, axis, correction, keepdim=False):
    # x86's 80-bit long double: 11 more bits than float64, so that the reference's own error (numpy's
    # pairwise float64 sums are off by up to ~11 ulp on these sizes) does not count against the kernel's.
    wide = a.astype(np.longdouble)
    n = wide.size // np.mean(wide, axis=axis, keepdims=True).size
    dev = wide - wide.mean(axis=axis, keepdims=True)
    with np.errstate(all="ignore"):
        return (dev * dev).sum(axis=axis, keepdims=keepdim) / max(0, n - correction)


def _assert_ulps(got, want, dtype, ulps):
    want = np.asarray(want).astype(dtype)
    assert got.dtype == dtype
    assert np.all(np.abs(got.astype(np.float64) - want) <= ulps * np.spacing(np.abs(want))), \
        np.max(np.abs(got.astype(np.float64) - want) / np.spacing(np.abs(want)))


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("dim", DIMS3, ids=str)
def test_var_std_match_float64_numpy(threads, layout, dtype, dim):
    a = _data(SHAPE3, dtype, seed=13)
    x = ember.from_numpy(_layout(a, layout))
    axis = dim if isinstance(dim, int) else tuple(dim)
    for correction in (1, 0, 2.5):
        want = _var_reference(a, axis, correction)
        # float32: float64 two-pass, then one rounding (numpy's float32 var is off by a few ulp itself);
        # float64: the float64 reference's own error dominates.
        _assert_ulps(x.var(dim, correction=correction).numpy(), want, dtype, 1 if dtype == np.float32 else 8)
        _assert_ulps(x.std(dim, correction=correction).numpy(), np.sqrt(want), dtype, 1 if dtype == np.float32 else 8)
    got = x.var(dim, keepdim=True).numpy()
    assert got.shape == np.var(a, axis=axis, keepdims=True).shape
    var, mean = ember.var_mean(x, dim, correction=0)
    _assert_ulps(var.numpy(), _var_reference(a, axis, 0), dtype, 1 if dtype == np.float32 else 8)
    # the mean: near zero its error is one of the summands', not its own
    bound = 4 * np.finfo(dtype).eps * np.abs(a.astype(np.float64)).mean(axis=axis)
    assert np.all(np.abs(mean.numpy() - a.astype(np.float64).mean(axis=axis)) <= bound)


@pytest.mark.parametrize("shape", [(1, 300_000), (300_000, 1), (5, 3000), (3000, 5), (2, 40, 300)], ids=str)
def test_var_kernel_every_path_is_accurate(isa, threads, shape):
    # A large mean against a small spread: the naive sum(x^2) - n mean^2 loses every digit here.
    a = (_data(shape, np.float64, seed=17) + 1e4).astype(np.float32)
    for d in range(len(shape)):
        if shape[d] == 1:
            continue  # NaN (0 / 0): test_var_of_one_element_nan_and_inf
        var, mean = _C.var_dims(a, d, d, 1.0, False)
        _assert_ulps(var, _var_reference(a, d, 1), np.float32, 1)
        _assert_ulps(mean, a.astype(np.float64).mean(d), np.float32, 1)


def test_var_of_one_element_nan_and_inf():
    a = _data((5000, 1), np.float32)
    x = ember.from_numpy(a)
    assert np.isnan(x.var(1).numpy()).all()  # 0 / 0, as numpy and PyTorch
    np.testing.assert_array_equal(x.var(1, correction=0).numpy(), np.zeros(5000, np.float32))
    b = _data((100, 100), np.float32)
    b[3, 4] = np.nan
    b[50, 60] = np.inf
    got = ember.from_numpy(b).var(1).numpy()
    assert np.isnan(got[3]) and np.isnan(got[50]) and np.isfinite(np.delete(got, [3, 50])).all()


def test_var_is_deterministic_for_a_thread_count():
    a = _data((1, 500_000), np.float32, seed=19)
    previous = _C.get_num_threads()
    try:
        for n in (1, 2):
            _C.set_num_threads(n)
            first = _C.var_dims(a, 1, 1, 1.0, False)[0]
            np.testing.assert_array_equal(_C.var_dims(a, 1, 1, 1.0, False)[0], first)
    finally:
        _C.set_num_threads(previous)


# -- norms -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("dim", DIMS3, ids=str)
def test_vector_norms_match_float64_numpy(threads, layout, dtype, dim):
    a = _data(SHAPE3, dtype, seed=23)
    x = ember.from_numpy(_layout(a, layout))
    axis = dim if isinstance(dim, int) else tuple(dim)
    wide = a.astype(np.longdouble)  # see _var_reference
    ulps = 1 if dtype == np.float32 else 8
    _assert_ulps(ember.linalg.vector_norm(x, 2, dim=dim).numpy(), np.sqrt((wide * wide).sum(axis)), dtype, ulps)
    _assert_ulps(ember.linalg.vector_norm(x, 1, dim=dim).numpy(), np.abs(wide).sum(axis), dtype, ulps)
    np.testing.assert_array_equal(ember.linalg.vector_norm(x, math.inf, dim=dim).numpy(), np.abs(a).max(axis))
    np.testing.assert_array_equal(ember.linalg.vector_norm(x, -math.inf, dim=dim).numpy(), np.abs(a).min(axis))
    _assert_ulps(x.norm(2, dim=dim, keepdim=True).numpy(), np.sqrt((wide * wide).sum(axis, keepdims=True)), dtype,
                 ulps)
    _assert_ulps(x.norm(1, dim=dim).numpy(), np.abs(wide).sum(axis), dtype, ulps)
    np.testing.assert_array_equal(x.norm(math.inf, dim=dim).numpy(), np.abs(a).max(axis))


def test_norm_of_everything_and_of_low_precision(threads):
    a = _data((300, 200), np.float32)
    a[0, 0] = -0.0
    x = ember.from_numpy(a)
    assert np.isclose(x.norm().item(), np.linalg.norm(a.astype(np.float64)), rtol=EPS32, atol=0)
    assert x.norm(float("inf")).item() == np.abs(a).max()
    h = x.to(ember.bfloat16)
    got = ember.linalg.vector_norm(h, 2, dim=1)
    assert got.dtype is ember.bfloat16
    wide = h.float().numpy().astype(np.float64)
    want = np.sqrt((wide * wide).sum(1)).astype(np.float32)
    np.testing.assert_array_equal(got.float().numpy(), ember.from_numpy(want).to(ember.bfloat16).float().numpy())


# -- sum and mean over dim sets and layouts -----------------------------------------------------------------


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
@pytest.mark.parametrize("dim", DIMS3, ids=str)
def test_sum_mean_over_any_dims_and_layouts(threads, layout, dtype, dim):
    a = _data(SHAPE3, dtype, seed=29)
    x = ember.from_numpy(_layout(a, layout))
    axis = dim if isinstance(dim, int) else tuple(dim)
    for keepdim in (False, True):
        got = x.sum(dim, keepdim).numpy()
        if dtype == np.int64:
            np.testing.assert_array_equal(got, a.sum(axis, keepdims=keepdim))
            continue
        want = a.astype(np.float64).sum(axis, keepdims=keepdim)
        bound = 64 * np.finfo(dtype).eps * np.abs(a.astype(np.float64)).sum(axis, keepdims=keepdim)
        assert got.dtype == dtype and np.all(np.abs(got - want) <= bound)
        mean = x.mean(dim, keepdim).numpy()
        count = a.size // want.size
        assert mean.dtype == dtype and np.all(np.abs(mean - want / count) <= bound / count + np.spacing(mean))

