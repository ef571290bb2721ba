"""The C++ kernels behind softmax, log_softmax, layer_norm, gelu, cross_entropy, gather and scatter_add
(``ember._C``, csrc/nn_kernels.cpp).

They are checked directly against float64 numpy references, for every instruction set they are
compiled for that this CPU runs, on one thread and on two, at shapes that reach every code path:
one row or one column, rows shorter than a vector, lengths that are no multiple of the vector
width, 1e5-element rows, middle-dim softmax with several column blocks, and the threaded drivers.
NaN and inf propagate as in PyTorch. The op-level tests (test_ops.py, the parity suite) check the
ops built on these kernels with small samples.
"""

import numpy as np
import pytest

import ember
from ember import _C

SQRT_HALF = np.sqrt(0.5)

# (shape, dim) for softmax: dim last (rows), or a middle dim whose inner size is < a vector,
# between vectors, or spans several 256-column blocks with a partial last one.
SOFTMAX_CASES = [
    ((1,), 0), ((1, 1), 1), ((1, 7), 1), ((7, 1), 1), ((3, 15), 1), ((3, 16), 1), ((5, 17), 1), ((4, 33), 1),
    ((2, 100), 1), ((64, 513), 1), ((2, 100_003), 1), ((300, 200), 1), ((7, 1), 0), ((1, 5), 0), ((3, 4, 5), 1),
    ((2, 9, 17), 1), ((2, 33, 300), 1), ((3, 5, 600), 1), ((40, 3, 1000), 0), ((129, 257), 0), ((6, 2, 3, 4), 2),
]
LAYER_NORM_SHAPES = [(1, 1), (1, 7), (5, 1), (3, 15), (3, 17), (4, 33), (2, 768), (300, 129), (2, 100_003)]
GELU_SIZES = [1, 7, 15, 16, 17, 33, 127, 128, 129, 1000, 70_001]
CE_SHAPES = [(1, 1), (1, 7), (7, 1), (5, 15), (9, 17), (33, 100), (300, 1000), (2, 100_003)]


@pytest.fixture(params=_C.supported_nn_isas())
def isa(request):
    previous = _C.set_nn_isa(request.param)
    yield request.param
    _C.set_nn_isa(previous)


@pytest.fixture(params=[1, 2], ids=["1thread", "2threads"])
def threads(request):
    previous = _C.get_num_threads()
    _C.set_num_threads(request.param)
    yield request.param
    _C.set_num_threads(previous)


def _normal(shape, dtype, seed=0, scale=1.0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * scale).astype(dtype)


def _tol(dtype):
    """(rtol, atol) for results of unit size computed in ``dtype``."""
    return (2e-5, 1e-6) if dtype == np.float32 else (1e-12, 1e-14)


# -- softmax ---------------------------------------------------------------------------------------


def _softmax_ref(x, dim, log):
    x = x.astype(np.float64)
    shifted = x - x.max(axis=dim, keepdims=True)
    total = np.exp(shifted).sum(axis=dim, keepdims=True)
    return shifted - np.log(total) if log else np.exp(shifted) / total


@pytest.mark.parametrize("shape,dim", SOFTMAX_CASES, ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
def test_softmax_matches_float64_reference(isa, threads, shape, dim, dtype, log):
    x = _normal(shape, dtype, seed=sum(shape), scale=3.0)
    got = _C.softmax(x, dim, log)
    assert got.dtype == dtype and got.shape == x.shape
    rtol, atol = _tol(dtype)
    np.testing.assert_allclose(got, _softmax_ref(x, dim, log), rtol=rtol, atol=atol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_softmax_of_empty_and_input_untouched(dtype):
    x = np.zeros((3, 0), dtype)
    assert _C.softmax(x, 1, False).shape == (3, 0)
    y = _normal((4, 50), dtype)
    before = y.copy()
    _C.softmax(y, 1, True)
    np.testing.assert_array_equal(y, before)


@pytest.mark.parametrize("n", [3, 40])  # shorter than a vector, and with a vector tail
@pytest.mark.parametrize("dim", [0, 1], ids=["middle_dim", "last_dim"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_softmax_nan_and_inf_like_pytorch(isa, n, dim, dtype):
    inf, nan = np.inf, np.nan
    rows = np.zeros((5, n), dtype)
    rows[0, 1] = inf  # +inf: NaN throughout (inf - inf)
    rows[1, :] = -inf  # only -inf: NaN throughout
    rows[2, 2] = nan  # NaN: NaN throughout
    rows[3, 0] = -inf  # some -inf: 0 (log: -inf) there, the rest a proper softmax
    x = rows if dim == 1 else np.ascontiguousarray(rows.T)
    for log in (False, True):
        got = _C.softmax(x, dim, log)
        got = got if dim == 1 else got.T
        assert np.isnan(got[:3]).all()
        assert got[3, 0] == (-inf if log else 0.0)
        np.testing.assert_allclose(got[3, 1:], _softmax_ref(rows[3, 1:], 0, log), rtol=1e-5)
        np.testing.assert_allclose(got[4], _softmax_ref(rows[4], 0, log), rtol=1e-5)


def test_softmax_sums_to_one_on_long_rows(isa, threads):
    x = _normal((3, 100_003), np.float32, scale=10.0)
    np.testing.assert_allclose(_C.softmax(x, 1, False).astype(np.float64).sum(axis=1), 1.0, rtol=1e-5)


def test_softmax_rejects_what_would_be_unsafe():
    with pytest.raises(ValueError, match="float32 or float64"):
        _C.softmax(np.zeros(3, np.float16), 0, False)
    with pytest.raises(ValueError, match="C-contiguous"):
        _C.softmax(np.zeros((3, 4), np.float32).T, 0, False)
    with pytest.raises(ValueError, match="dim out of range"):
        _C.softmax(np.zeros((3, 4), np.float32), 2, False)


# -- layer_norm ------------------------------------------------------------------------------------


def _layer_norm_ref(x, w, b, eps):
    x = x.astype(np.float64)
    out = (x - x.mean(axis=1, keepdims=True)) / np.sqrt(x.var(axis=1, keepdims=True) + eps)
    if w is not None:
        out = out * w
    if b is not None:
        out = out + b
    return out


@pytest.mark.parametrize("shape", LAYER_NORM_SHAPES, ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("params", ["both", "weight", "bias", "none"])
def test_layer_norm_matches_float64_reference(isa, threads, shape, dtype, params):
    x = _normal(shape, dtype, seed=sum(shape), scale=2.0) + dtype(5)
    w = _normal(shape[1], dtype, seed=1) if params in ("both", "weight") else None
    b = _normal(shape[1], dtype, seed=2) if params in ("both", "bias") else None
    got = _C.layer_norm(x, shape[1], w, b, 1e-5)
    assert got.dtype == dtype and got.shape == x.shape
    rtol, atol = (1e-4, 2e-5) if dtype == np.float32 else (1e-10, 1e-12)
    np.testing.assert_allclose(got, _layer_norm_ref(x, w, b, 1e-5), rtol=rtol, atol=atol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_layer_norm_keeps_precision_with_a_large_offset(dtype):
    x = (_normal((4, 1000), dtype) + dtype(1e4)).astype(dtype)
    got = _C.layer_norm(x, 1000, None, None, 1e-5)
    np.testing.assert_allclose(got, _layer_norm_ref(x, None, None, 1e-5), rtol=0, atol=2e-3 if dtype == np.float32 else 1e-9)


@pytest.mark.parametrize("n", [3, 40])
def test_layer_norm_nan_and_inf_like_pytorch(n):
    x = np.ones((3, n), np.float32)
    x[0, 1] = np.inf
    x[1, 0] = np.nan
    got = _C.layer_norm(x, n, None, None, 1e-5)
    assert np.isnan(got[:2]).all()
    np.testing.assert_array_equal(got[2], 0.0)  # a constant row: x - mean = 0


def test_layer_norm_rejects_mismatched_parameters():
    x = np.zeros((2, 4), np.float32)
    with pytest.raises(ValueError, match="weight"):
        _C.layer_norm(x, 4, np.zeros(4, np.float64), None, 1e-5)
    with pytest.raises(ValueError, match="bias has the wrong size"):
        _C.layer_norm(x, 4, None, np.zeros(3, np.float32), 1e-5)
    with pytest.raises(ValueError, match="row length"):
        _C.layer_norm(x, 3, None, None, 1e-5)


# -- gelu ------------------------------------------------------------------------------------------


def _gelu_ref(x, tanh):
    from scipy.special import expit, ndtr

    x = x.astype(np.float64)
    if tanh:  # 0.5 * (1 + tanh(u)) as expit(2u): no cancellation for u << 0
        return x * expit(2 * np.sqrt(2 / np.pi) * (x + 0.044715 * x**3))
    return x * ndtr(x)


@pytest.mark.parametrize("size", GELU_SIZES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("tanh", [False, True], ids=["erf", "tanh"])
def test_gelu_matches_float64_reference(isa, threads, size, dtype, tanh):
    x = _normal(size, dtype, seed=size, scale=3.0)
    got = _C.gelu(x, tanh)
    assert got.dtype == dtype and got.shape == x.shape
    rtol, atol = (2e-6, 1e-7) if dtype == np.float32 else (1e-13, 1e-300)
    np.testing.assert_allclose(got, _gelu_ref(x, tanh), rtol=rtol, atol=atol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gelu_keeps_relative_accuracy_in_the_negative_tail(isa, dtype):
    # float32: every value down to where x * Phi(x) leaves the normal range; float64: down to -20.
    # The error grows with x^2 / 2 ulp: the rounding of x^2 / 2 (computed in the input's type) passes into exp.
    low = -12.9 if dtype == np.float32 else -20.0
    x = np.linspace(low, 8.0, 40_001).astype(dtype)
    want = _gelu_ref(x, False)
    rel = np.abs(_C.gelu(x, False) - want) / np.abs(want)
    bound = 8 * (1 + x.astype(np.float64) ** 2 / 2) * np.finfo(dtype).eps
    assert (rel <= bound)[want != 0].all()


def test_gelu_float64_far_tail():
    # x * Phi(x) from 50-digit arithmetic (scipy's ndtr is itself off by ~1e-13 this far out)
    x = np.array([-5.0, -20.0, -37.0])
    want = np.array([-1.4332578593959695e-06, -5.507248237212468e-88, -2.1184613523340935e-298])
    np.testing.assert_allclose(_C.gelu(x, False), want, rtol=1e-13)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gelu_special_values(dtype):
    x = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0], dtype)
    for tanh in (False, True):
        got = _C.gelu(x, tanh)
        assert got[0] == np.inf and np.isnan(got[1]) and np.isnan(got[2])
        assert got[3] == 0 and got[4] == 0


def test_gelu_keeps_zero_dim_shape():
    got = _C.gelu(np.array(1.0, np.float32), False)
    assert got.shape == () and abs(float(got) - 0.8413447) < 1e-6


# -- cross_entropy ---------------------------------------------------------------------------------


def _cross_entropy_ref(x, target, weight, ignore_index, smoothing, reduction):
    x = x.astype(np.float64)
    rows, classes = x.shape
    m = x.max(axis=1, keepdims=True)
    logp = x - (m + np.log(np.exp(x - m).sum(axis=1, keepdims=True)))
    w = np.ones(classes) if weight is None else weight.astype(np.float64)
    keep = target != ignore_index
    safe = np.where(keep, target, 0)
    wt = np.where(keep, w[safe], 0.0)
    nll = np.where(keep, -logp[np.arange(rows), safe] * wt, 0.0)
    smooth = np.where(keep, -(logp * w).sum(axis=1), 0.0)
    loss = (1 - smoothing) * nll + smoothing / classes * smooth
    if reduction == 0:
        return loss
    if reduction == 2:
        return loss.sum()
    return loss.sum() / wt.sum()


@pytest.mark.parametrize("shape", CE_SHAPES, ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
@pytest.mark.parametrize("reduction", [0, 1, 2], ids=["none", "mean", "sum"])
def test_cross_entropy_matches_float64_reference(isa, threads, shape, dtype, weighted, smoothing, reduction):
    rows, classes = shape
    rng = np.random.default_rng(rows + classes)
    x = _normal(shape, dtype, seed=rows, scale=3.0)
    target = rng.integers(0, classes, rows)
    if rows > 2:
        target[::3] = -100  # some ignored rows
    weight = rng.uniform(0.5, 2.0, classes).astype(dtype) if weighted else None
    got = _C.cross_entropy(x, target, weight, -100, smoothing, reduction)
    assert got.dtype == dtype and got.shape == ((rows,) if reduction == 0 else ())
    want = _cross_entropy_ref(x, target, weight, -100, smoothing, reduction)
    rtol = 2e-5 if dtype == np.float32 else 1e-11
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol)


def test_cross_entropy_ignore_index_anywhere():
    x = _normal((4, 5), np.float32)
    target = np.array([1, 7, 7, 4])  # 7 is ignored, although outside [0, 5)
    got = _C.cross_entropy(x, target, None, 7, 0.0, 0)
    assert got[1] == 0 and got[2] == 0
    np.testing.assert_allclose(got, _cross_entropy_ref(x, target, None, 7, 0.0, 0), rtol=1e-5)


@pytest.mark.parametrize("smoothing", [0.0, 0.2])
def test_cross_entropy_all_ignored(smoothing):
    x = _normal((3, 4), np.float32)
    target = np.full(3, -100)
    assert np.isnan(_C.cross_entropy(x, target, None, -100, smoothing, 1))  # 0 / 0, as in PyTorch
    assert _C.cross_entropy(x, target, None, -100, smoothing, 2) == 0
    np.testing.assert_array_equal(_C.cross_entropy(x, target, None, -100, smoothing, 0), 0)


def test_cross_entropy_out_of_range_target():
    x = _normal((3, 4), np.float32)
    with pytest.raises(IndexError, match="Target 4 is out of bounds"):
        _C.cross_entropy(x, np.array([0, 4, -3]), None, -100, 0.0, 1)
    with pytest.raises(IndexError, match="Target -3 is out of bounds"):
        _C.cross_entropy(x, np.array([0, -3, 9]), None, -100, 0.0, 1)


@pytest.mark.parametrize("classes", [3, 40])
def test_cross_entropy_nan_and_inf_like_pytorch(classes):
    x = np.zeros((4, classes), np.float32)
    x[0, 1] = np.inf  # NaN loss, whichever the target (log_softmax is NaN throughout)
    x[1, :] = -np.inf  # NaN
    x[2, 0] = -np.inf  # target 0: inf; target 1: finite
    target = np.array([0, 0, 0, 1])
    got = _C.cross_entropy(x, target, None, -100, 0.0, 0)
    assert np.isnan(got[0]) and np.isnan(got[1]) and got[2] == np.inf
    np.testing.assert_allclose(got[3], np.log(classes), rtol=1e-6)
    x[2, 0] = 0
    x[3, 2] = -np.inf  # smoothing adds -(-inf) for a -inf logit
    got = _C.cross_entropy(x, target, None, -100, 0.1, 0)
    assert got[3] == np.inf and np.isfinite(got[2])


# -- gather / scatter_add --------------------------------------------------------------------------

# (input shape, dim, size of index along dim)
INDEX_CASES = [
    ((1,), 0, 1), ((1000,), 0, 100_000), ((7,), 0, 3), ((5, 1), 1, 4), ((1, 5), 0, 3), ((6, 9), 0, 11),
    ((6, 9), 1, 20), ((300, 40), 1, 500), ((4, 7, 5), 1, 9), ((2, 50, 300), 1, 64), ((2, 3, 2000), 0, 5),
    ((3, 4, 5, 6), 2, 7), ((100, 3), 0, 40_000),
]


def _index(shape, dim, n, dtype, seed=0):
    rng = np.random.default_rng(seed)
    ishape = shape[:dim] + (n,) + shape[dim + 1:]
    return rng.integers(0, shape[dim], ishape).astype(dtype)


def _full_index(idx, dim):
    coords = list(np.indices(idx.shape, sparse=True))
    coords[dim] = idx
    return tuple(coords)


@pytest.mark.parametrize("shape,dim,n", INDEX_CASES, ids=str)
@pytest.mark.parametrize("index_dtype", [np.int64, np.int32])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int8, np.int16, np.complex128, np.bool_])
def test_gather_matches_numpy(threads, shape, dim, n, index_dtype, dtype):
    x = (np.arange(np.prod(shape)) % 97).reshape(shape).astype(dtype)
    idx = _index(shape, dim, n, index_dtype, seed=n)
    np.testing.assert_array_equal(_C.gather(x, dim, idx), np.take_along_axis(x, idx, axis=dim))


def test_gather_out_of_range_names_the_first_bad_index(threads):
    x = np.zeros((3, 40_000), np.float32)
    idx = np.zeros((3, 40_000), np.int64)
    idx[1, 5] = 3
    idx[2, 7] = -1
    with pytest.raises(RuntimeError, match="index 3 is out of bounds for dimension 0 with size 3"):
        _C.gather(x, 0, idx)


@pytest.mark.parametrize("shape,dim,n", INDEX_CASES, ids=str)
@pytest.mark.parametrize("index_dtype", [np.int64, np.int32])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_scatter_add_matches_numpy(threads, shape, dim, n, index_dtype, dtype):
    out = _normal(shape, dtype, seed=1)
    idx = _index(shape, dim, n, index_dtype, seed=n)
    src = _normal(idx.shape, dtype, seed=2)
    want = out.astype(np.float64)
    np.add.at(want, _full_index(idx, dim), src.astype(np.float64))
    _C.scatter_add_(out, dim, idx, src)
    rtol = 1e-4 if dtype == np.float32 else 1e-11
    np.testing.assert_allclose(out, want, rtol=rtol, atol=rtol * max(1.0, n / shape[dim]) ** 0.5)


def test_scatter_add_repeated_indices_accumulate(threads):
    out = np.zeros(4, np.float32)
    idx = np.zeros(100_000, np.int64)
    idx[::2] = 3
    _C.scatter_add_(out, 0, idx, np.ones(100_000, np.float32))
    np.testing.assert_array_equal(out, [50_000, 0, 0, 50_000])


@pytest.mark.parametrize("shape,dim", [((1000,), 0), ((64, 300), 1), ((300, 64), 0)], ids=str)
def test_scatter_add_out_of_range_writes_nothing(threads, shape, dim):
    out = _normal(shape, np.float32)
    before = out.copy()
    idx = _index(shape, dim, 2000, np.int64)
    flat = idx.reshape(-1)
    flat[flat.size // 2] = shape[dim]
    flat[-1] = -5
    with pytest.raises(RuntimeError, match=f"index {shape[dim]} is out of bounds for dimension {dim} with size"):
        _C.scatter_add_(out, dim, idx, np.ones(idx.shape, np.float32))
    np.testing.assert_array_equal(out, before)


def test_scatter_add_rejects_what_would_be_unsafe():
    out = np.zeros((3, 4), np.float32)
    with pytest.raises(ValueError, match="src must have out's dtype"):
        _C.scatter_add_(out, 0, np.zeros((2, 4), np.int64), np.zeros((2, 4), np.float64))
    with pytest.raises(ValueError, match="differ in size outside dim"):
        _C.scatter_add_(out, 0, np.zeros((2, 3), np.int64), np.zeros((2, 3), np.float32))
    with pytest.raises(ValueError, match="float32 or float64"):
        _C.scatter_add_(np.zeros(3, np.int64), 0, np.zeros(3, np.int64), np.zeros(3, np.int64))


# -- paths of F.conv2d and F.embedding not reached by the generic samples ---------------------


def _conv2d_reference(x, w, padding, stride=1):
    """Direct correlation over numpy sliding windows, in float64."""
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    kh, kw = w.shape[2:]
    windows = np.lib.stride_tricks.sliding_window_view(xp, (kh, kw), axis=(2, 3))[:, :, ::stride, ::stride]
    return np.einsum("ncijhw,ochw->noij", windows, w.astype(np.float64))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape_x, shape_w, padding, stride", [
    ((2, 3, 8, 8), (4, 3, 8, 8), 1, 1),      # few outputs (3x3), large kernel: the weight-gradient shape
    ((4, 8, 16, 16), (5, 8, 16, 16), 1, 2),  # strided, 2x2 outputs
    ((1, 2, 9, 9), (3, 2, 7, 7), 0, 1),      # odd sizes
])
def test_conv2d_large_kernel_few_outputs(dtype, shape_x, shape_w, padding, stride):
    rng = np.random.default_rng(7)
    x, w = rng.standard_normal(shape_x).astype(dtype), rng.standard_normal(shape_w).astype(dtype)
    out = ember.nn.functional.conv2d(ember.from_numpy(x), ember.from_numpy(w), padding=padding, stride=stride)
    tol = 1e-4 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(out.numpy(), _conv2d_reference(x, w, padding, stride), rtol=tol, atol=tol)
    # a transposed (non-contiguous) input takes the same path
    xt = ember.from_numpy(np.ascontiguousarray(x.transpose(1, 0, 2, 3))).transpose(0, 1)
    out_t = ember.nn.functional.conv2d(xt, ember.from_numpy(w), padding=padding, stride=stride)
    np.testing.assert_allclose(out_t.numpy(), out.numpy(), rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.float16])
@pytest.mark.parametrize("index_dtype", [np.int64, np.int32])
def test_embedding_kernel_matches_take(dtype, index_dtype):
    rng = np.random.default_rng(3)
    weight = rng.standard_normal((50, 7)).astype(dtype)
    index = rng.integers(0, 50, size=(4, 9)).astype(index_dtype)
    result = ember._C.embedding(weight, index)
    np.testing.assert_array_equal(result, np.take(weight, index, axis=0))
    bad = index.copy()
    bad[1, 2] = 50
    with pytest.raises(IndexError, match="index out of range in self"):
        ember._C.embedding(weight, bad)


def test_embedding_op_on_large_output_and_bad_index():
    rng = np.random.default_rng(4)
    weight = rng.standard_normal((1000, 256)).astype(np.float32)
    index = rng.integers(0, 1000, size=4096)
    out = ember.nn.functional.embedding(ember.from_numpy(index), ember.from_numpy(weight))
    np.testing.assert_array_equal(out.numpy(), weight[index])
    with pytest.raises(IndexError, match="index out of range in self"):
        ember.nn.functional.embedding(ember.tensor([0, 1000]), ember.from_numpy(weight))


# -- convolution kernels: conv_weight_grad, conv_avx512's tiles, the BLAS thread switch -----------

_NEEDS_AVX512 = pytest.mark.skipif(not _C.conv_fast_available(), reason="conv_avx512/conv_weight_grad need AVX-512")

# (input shape, output channels, kernel, groups, stride, padding, dilation): 1-D to 3-D, strides and
# dilations that split the input into several phases, groups, output channels that are no multiple
# of a vector, a 1x1 kernel, thin groups, and the two layers of the benchmarked CNN.
CONV_CASES = [
    ((64, 32, 8, 8), 64, (3, 3), 1, (1, 1), (1, 1), (1, 1)),
    ((64, 1, 8, 8), 32, (3, 3), 1, (1, 1), (1, 1), (1, 1)),
    ((3, 5, 9, 7), 7, (3, 2), 1, (2, 1), (1, 0), (1, 2)),
    ((2, 6, 11, 10), 20, (3, 3), 2, (2, 3), (2, 1), (2, 1)),
    ((2, 4, 13), 33, (5,), 1, (3,), (2,), (2,)),
    ((2, 4, 5, 6, 7), 18, (2, 3, 2), 2, (1, 2, 1), (1, 0, 1), (1, 1, 2)),
    ((1, 3, 4, 4), 1, (1, 1), 1, (1, 1), (0, 0), (1, 1)),
    ((5, 8, 6, 6), 48, (3, 3), 4, (1, 1), (1, 1), (1, 1)),
    ((3, 6, 5, 5), 6, (3, 3), 6, (1, 1), (1, 1), (1, 1)),
    ((2, 3, 7, 7), 48, (3, 3), 3, (1, 1), (1, 1), (1, 1)),
]


def _conv_out(shape, kernel, stride, padding, dilation):
    return tuple((shape[2 + i] + 2 * padding[i] - dilation[i] * (kernel[i] - 1) - 1) // stride[i] + 1
                 for i in range(len(kernel)))


def _windows(x, kernel, stride, padding, dilation):
    """x (N, C, *spatial) zero-padded -> {tap: (N, C, *out) view of the inputs that tap reads}, in float64."""
    n = len(kernel)
    xp = np.pad(x.astype(np.float64), [(0, 0), (0, 0)] + [(p, p) for p in padding])
    out = _conv_out(x.shape, kernel, stride, padding, dilation)
    return {k: xp[(slice(None), slice(None), *(slice(k[i] * dilation[i], k[i] * dilation[i] + (out[i] - 1) * stride[i]
                                                       + 1, stride[i]) for i in range(n)))]
            for k in np.ndindex(*kernel)}


def _conv_reference(x, w, b, groups, stride, padding, dilation):
    """y[n, o] = b[o] + sum over the group's channels and taps of w * x, in float64."""
    cg, og = x.shape[1] // groups, w.shape[0] // groups
    y = 0.0
    for k, win in _windows(x, w.shape[2:], stride, padding, dilation).items():
        parts = [np.einsum("oc,nc...->no...", w[(slice(g * og, (g + 1) * og), slice(None), *k)].astype(np.float64),
                           win[:, g * cg:(g + 1) * cg]) for g in range(groups)]
        y = y + np.concatenate(parts, axis=1)
    if b is not None:
        y = y + b.astype(np.float64).reshape((-1,) + (1,) * len(stride))
    return y


def _weight_grad_reference(x, gy, kernel, groups, stride, padding, dilation):
    """dW[o, c, k] = sum over n and output positions of gy[n, o] * x[n, c] at tap k, in float64."""
    cg, og = x.shape[1] // groups, gy.shape[1] // groups
    dw = np.zeros((gy.shape[1], cg, *kernel))
    g64 = gy.astype(np.float64).reshape(gy.shape[0], gy.shape[1], -1)
    for k, win in _windows(x, kernel, stride, padding, dilation).items():
        win = win.reshape(win.shape[0], win.shape[1], -1)
        for g in range(groups):
            dw[(slice(g * og, (g + 1) * og), slice(None), *k)] = np.einsum(
                "nop,ncp->oc", g64[:, g * og:(g + 1) * og], win[:, g * cg:(g + 1) * cg])
    return dw


def _sum_tol(dtype, want):
    """Absolute tolerance for long sums: rounding grows with the terms, so relative to the largest result."""
    return (1e-5 if dtype == np.float32 else 1e-13) * max(1.0, float(np.abs(want).max()))


def _phases(x, padding, stride):
    from ember._ops.nn_conv import _stride_phases
    return _stride_phases(x, padding, padding, stride, x.dtype)


def _lift(values, fill):
    return [fill] * (3 - len(values)) + list(values)


@pytest.mark.parametrize("shape", [(4096, 1, 8, 8), (3, 2, 5, 7), (2, 3, 4, 20), (1, 1, 1, 1), (2, 1, 1, 16),
                                   (0, 1, 3, 3), (3, 1, 2, 0)], ids=str)
@pytest.mark.parametrize("lo, hi", [([0, 1, 1], [0, 1, 1]), ([1, 2, 0], [0, 0, 3]), ([0, 0, 0], [0, 0, 0]),
                                    ([2, 0, 1], [1, 3, 0])], ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_pad_zero_matches_numpy_pad(threads, shape, lo, hi, dtype):
    """Rows shorter than a vector (one masked load and store each) and longer ones, any 4- or 8-byte dtype."""
    x = (np.random.default_rng(15).standard_normal(shape) * 100).astype(dtype)
    np.testing.assert_array_equal(_C.pad_zero(x, lo, hi), np.pad(x, [(0, 0)] + list(zip(lo, hi))))


def test_pad_zero_rejects_what_would_be_unsafe():
    with pytest.raises(ValueError, match="4- or 8-byte"):
        _C.pad_zero(np.ones((1, 1, 2, 2), np.float16), [0, 1, 1], [0, 1, 1])
    with pytest.raises(ValueError, match="non-negative"):
        _C.pad_zero(np.ones((1, 1, 2, 2), np.float32), [0, -1, 1], [0, 1, 1])
    with pytest.raises(ValueError, match="C-contiguous"):
        _C.pad_zero(np.ones((1, 1, 2, 4), np.float32)[..., ::2], [0, 1, 1], [0, 1, 1])


@_NEEDS_AVX512
@pytest.mark.parametrize("case", CONV_CASES, ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_conv_weight_grad_matches_reference(threads, case, dtype):
    shape, out_channels, kernel, groups, stride, padding, dilation = case
    rng = np.random.default_rng(11)
    x = rng.standard_normal(shape).astype(dtype)
    gy = rng.standard_normal((shape[0], out_channels, *_conv_out(shape, kernel, stride, padding, dilation)))
    gy = gy.astype(dtype)
    g5 = gy.reshape(gy.shape[:2] + tuple(_lift(gy.shape[2:], 1)))
    dw = _C.conv_weight_grad(_phases(x, padding, stride), g5, _lift(kernel, 1), groups, _lift(stride, 1),
                             _lift(dilation, 1))
    assert dw.dtype == dtype
    want = _weight_grad_reference(x, gy, kernel, groups, stride, padding, dilation)
    np.testing.assert_allclose(dw.reshape(want.shape), want, rtol=0, atol=_sum_tol(dtype, want))


@_NEEDS_AVX512
def test_conv_weight_grad_empty_and_rejects_what_would_be_unsafe():
    x = np.ones((0, 3, 1, 1, 4, 4), np.float32)
    dw = _C.conv_weight_grad(x, np.ones((0, 2, 1, 2, 2), np.float32), [1, 3, 3], 1, [1, 1, 1], [1, 1, 1])
    np.testing.assert_array_equal(dw, np.zeros((2, 3, 1, 3, 3), np.float32))
    x = np.ones((2, 3, 1, 1, 4, 4), np.float32)
    g = np.ones((2, 2, 1, 2, 2), np.float32)
    with pytest.raises(ValueError, match="differ in dtype"):
        _C.conv_weight_grad(x, g.astype(np.float64), [1, 3, 3], 1, [1, 1, 1], [1, 1, 1])
    with pytest.raises(ValueError, match="groups"):
        _C.conv_weight_grad(x, g, [1, 3, 3], 2, [1, 1, 1], [1, 1, 1])
    with pytest.raises(ValueError, match="does not fit"):  # a 4x4 kernel reads past a 4x4 input for 2x2 outputs
        _C.conv_weight_grad(x, g, [1, 4, 4], 1, [1, 1, 1], [1, 1, 1])
    with pytest.raises(ValueError, match="C-contiguous"):
        _C.conv_weight_grad(x, np.ones((2, 2, 1, 2, 4), np.float32)[..., ::2], [1, 3, 3], 1, [1, 1, 1], [1, 1, 1])
    with pytest.raises(ValueError, match="float32 or float64"):
        _C.conv_weight_grad(x.astype(np.int32), g.astype(np.int32), [1, 3, 3], 1, [1, 1, 1], [1, 1, 1])


@_NEEDS_AVX512
@pytest.mark.parametrize("case", CONV_CASES, ids=str)
@pytest.mark.parametrize("variant", range(9), ids=lambda v: f"variant{v}")
def test_conv_avx512_tiles_match_reference(threads, case, variant):
    """Every tile of both kernels (variants 1-4 flat grid, 5-8 along output channels) and the automatic pick."""
    shape, out_channels, kernel, groups, stride, padding, dilation = case
    rng = np.random.default_rng(12)
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal((out_channels, shape[1] // groups, *kernel)).astype(np.float32)
    b = rng.standard_normal(out_channels).astype(np.float32)
    out = _conv_out(shape, kernel, stride, padding, dilation)
    w5 = w.reshape(w.shape[:2] + tuple(_lift(kernel, 1)))
    for bias in (None, b):
        y = _C.conv_avx512(_phases(x, padding, stride), w5, bias, groups, _lift(stride, 1), _lift(dilation, 1),
                           _lift(out, 1), variant)
        want = _conv_reference(x, w, bias, groups, stride, padding, dilation)
        np.testing.assert_allclose(y.reshape(want.shape), want, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", [CONV_CASES[0], CONV_CASES[2], CONV_CASES[4]], ids=str)
def test_conv_weight_gradient_through_autograd(case, dtype):
    """conv*d's weight gradient (the few-outputs convolution of the input with the output gradient)."""
    shape, out_channels, kernel, _, stride, padding, dilation = case
    rng = np.random.default_rng(13)
    x = rng.standard_normal(shape).astype(dtype)
    w = ember.from_numpy(rng.standard_normal((out_channels, shape[1], *kernel)).astype(dtype)).requires_grad_()
    conv = getattr(ember.nn.functional, f"conv{len(kernel)}d")
    y = conv(ember.from_numpy(x), w, stride=stride, padding=padding, dilation=dilation)
    gy = rng.standard_normal(tuple(y.shape)).astype(dtype)
    y.backward(ember.from_numpy(gy))
    want = _weight_grad_reference(x, gy, kernel, 1, stride, padding, dilation)
    np.testing.assert_allclose(w.grad.numpy(), want, rtol=0, atol=_sum_tol(dtype, want))


def test_small_blas_products_run_on_one_thread_and_restore_the_count():
    from ember._ops import _blas_threads

    switch = _blas_threads._get_switch()
    if switch is None:
        pytest.skip("numpy's BLAS is not an OpenBLAS with its own thread pool: nothing to switch")
    get, set_ = switch
    previous = get()
    set_(2)
    try:
        assert _blas_threads.one_thread(get) == 1
        assert get() == 2
        rng = np.random.default_rng(14)
        a, b = rng.standard_normal((64, 300)), rng.standard_normal((300, 10))
        np.testing.assert_allclose(_blas_threads.matmul(a, b), a @ b, rtol=1e-12)
        big = rng.standard_normal((260, 260))  # 260 ** 3 > THREADED_MACS: left to the BLAS's threads
        assert _blas_threads._macs(big, big) >= _blas_threads.THREADED_MACS > _blas_threads._macs(a, b)
        # a stack is one BLAS call per matrix: small matrices stay on one thread however many there are
        stack = rng.standard_normal((512, 64, 300))
        assert _blas_threads._macs(stack, b) < _blas_threads.THREADED_MACS < stack.size * b.shape[-1]
        np.testing.assert_allclose(_blas_threads.matmul(stack, b), stack @ b, rtol=1e-12)
        # (split over ember's threads: another summation order, so an absolute bound near cancellations)
        want = big @ big
        np.testing.assert_allclose(_blas_threads.matmul(big, big), want, rtol=1e-12, atol=1e-12 * np.abs(want).max())
        assert get() == 2
    finally:
        set_(previous)


def test_products_of_any_size_run_on_one_blas_thread_when_ember_has_one(monkeypatch):
    from ember._ops import _blas_threads

    switch = _blas_threads._get_switch()
    if switch is None:
        pytest.skip("numpy's BLAS is not an OpenBLAS with its own thread pool: nothing to switch")
    get, set_ = switch
    previous, previous_ember = get(), ember.get_num_threads()
    real = _blas_threads.one_thread
    counts = []  # the BLAS's thread count during each product

    def spy(fn, *args):
        return real(lambda *a: (counts.append(get()), fn(*a))[1], *args)

    monkeypatch.setattr(_blas_threads, "one_thread", spy)
    set_(2)
    ember.set_num_threads(1)
    try:
        big = np.random.default_rng(3).standard_normal((260, 260))  # beyond THREADED_MACS
        np.testing.assert_array_equal(_blas_threads.matmul(big, big), real(np.matmul, big, big))
        assert counts == [1] and get() == 2
    finally:
        set_(previous)
        ember.set_num_threads(previous_ember)


@pytest.mark.parametrize("trans_a, trans_b", [(False, False), (True, False), (False, True), (True, True)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_products_from_split_macs_split_on_openmp_threads_in_any_blas_layout(trans_a, trans_b, dtype):
    from ember._ops import _blas_threads

    if _blas_threads._get_switch() is None or np.dtype(dtype) not in _blas_threads._gemms:
        pytest.skip("numpy's BLAS is not an OpenBLAS whose cblas gemm ember can call")
    rng = np.random.default_rng(5)
    m, k, n = 400, 300, 290  # 34.8M multiply-adds: from SPLIT_MACS; odd sizes: ragged blocks
    a = rng.standard_normal((k, m) if trans_a else (m, k)).astype(dtype)
    b = rng.standard_normal((n, k) if trans_b else (k, n)).astype(dtype)
    a, b = (a.T if trans_a else a), (b.T if trans_b else b)
    assert _blas_threads.SPLIT_MACS <= _blas_threads._macs(a, b)
    previous = ember.get_num_threads()
    try:
        for threads in (2, 3):
            ember.set_num_threads(threads)
            got = _blas_threads._split_gemm(a, b, threads)
            want = a.astype(np.float64) @ b.astype(np.float64)
            tol = 1e-5 if dtype == np.float32 else 1e-12
            np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.abs(want).max())
            np.testing.assert_array_equal(_blas_threads.matmul(a, b), got)
    finally:
        ember.set_num_threads(previous)
    # a layout BLAS cannot read without a copy (no unit stride): numpy's product instead
    wide = rng.standard_normal((m, 2 * k)).astype(dtype)[:, ::2]
    assert _blas_threads._split_gemm(wide, b, 2) is None
    want = wide.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(_blas_threads.matmul(wide, b), want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


def test_products_below_split_macs_stay_on_one_thread(monkeypatch):
    # waking the sleeping OpenMP worker costs more than the second core saves below SPLIT_MACS
    from ember._ops import _blas_threads

    if _blas_threads._get_switch() is None:
        pytest.skip("numpy's BLAS is not an OpenBLAS with its own thread pool: products are np.matmul")
    calls = []
    real = _blas_threads._split_gemm
    monkeypatch.setattr(_blas_threads, "_split_gemm", lambda *args: calls.append(1) or real(*args))
    rng = np.random.default_rng(8)
    a, b = rng.standard_normal((256, 128)).astype(np.float32), rng.standard_normal((128, 128)).astype(np.float32)
    big = rng.standard_normal((400, 300)).astype(np.float32)
    c = rng.standard_normal((300, 290)).astype(np.float32)
    assert _blas_threads._macs(a, b) < _blas_threads.SPLIT_MACS <= _blas_threads._macs(big, c)
    previous = ember.get_num_threads()
    ember.set_num_threads(2)
    try:
        np.testing.assert_array_equal(_blas_threads.matmul(a, b), _blas_threads.one_thread(np.matmul, a, b))
        assert calls == []
        _blas_threads.matmul(big, c)
        assert calls == [1]
    finally:
        ember.set_num_threads(previous)


def test_split_gemm_refuses_leading_dimensions_smaller_than_the_rows():
    from ember import _C

    a = np.ones((4, 4), np.float32)
    with pytest.raises(ValueError, match="leading dimension"):
        _C.split_gemm(1, True, False, False, False, 4, 4, 4, a.ctypes.data, 2, a.ctypes.data, 4, a.ctypes.data, 4, 2)
    with pytest.raises(ValueError, match="positive"):
        _C.split_gemm(1, True, False, False, False, 0, 4, 4, a.ctypes.data, 4, a.ctypes.data, 4, a.ctypes.data, 4, 2)


def _conv_transpose2d_reference(x, w, b, padding, dilation):
    """Stride-1 transposed convolution as a scatter: y[n, o, i + k * d - p] += x[n, c, i] * w[c, o, k], float64."""
    (kh, kw), (H, W) = w.shape[2:], x.shape[2:]
    full = np.zeros((x.shape[0], w.shape[1], H + dilation * (kh - 1), W + dilation * (kw - 1)))
    for i, j in np.ndindex(kh, kw):
        full[:, :, i * dilation:i * dilation + H, j * dilation:j * dilation + W] += np.einsum(
            "nchw,co->nohw", x.astype(np.float64), w[:, :, i, j].astype(np.float64))
    y = full[:, :, padding:full.shape[2] - padding, padding:full.shape[3] - padding]
    return y if b is None else y + b.astype(np.float64).reshape(-1, 1, 1)


@pytest.mark.parametrize("shape, out_channels, kernel, padding, dilation", [
    ((8, 64, 32, 32), 32, 3, 1, 1),  # the input gradient of a 3x3 convolution
    ((2, 3, 7, 7), 5, 3, 0, 1),
    ((2, 4, 9, 9), 6, 3, 2, 2),
    ((2, 3, 6, 6), 4, 5, 4, 1),
], ids=str)
@pytest.mark.parametrize("bias", [False, True])
def test_conv_transpose2d_stride_1_matches_reference(shape, out_channels, kernel, padding, dilation, bias):
    """Stride 1 runs as the convolution by the flipped kernel (the forward's kernels): values as the scatter."""
    rng = np.random.default_rng(16)
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal((shape[1], out_channels, kernel, kernel)).astype(np.float32)
    b = rng.standard_normal(out_channels).astype(np.float32) if bias else None
    y = ember.nn.functional.conv_transpose2d(ember.from_numpy(x), ember.from_numpy(w),
                                             None if b is None else ember.from_numpy(b), padding=padding,
                                             dilation=dilation)
    want = _conv_transpose2d_reference(x, w, b, padding, dilation)
    np.testing.assert_allclose(y.numpy(), want, rtol=0, atol=_sum_tol(np.float32, want))


@pytest.mark.parametrize("a_shape, b_shape", [
    ((64, 784), (784, 1024)),  # few rows: split by rows (64 >= 8 * 2)
    ((6, 4000), (4000, 1500)),  # fewer rows than 8 per thread: split by columns
    ((4, 192, 300), (300, 700)),  # a contiguous stack of rows by one matrix
    ((400, 300), (300, 300)),
])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64])
def test_large_products_split_over_ember_threads_equal_numpy(a_shape, b_shape, dtype):
    # large products run as blocks on ember's threads, each on one BLAS thread, with OpenBLAS's
    # own (busy-waiting) workers left asleep; the BLAS's thread count is restored after
    from ember._ops import _blas_threads

    switch = _blas_threads._get_switch()
    if switch is None:
        pytest.skip("numpy's BLAS is not an OpenBLAS with its own thread pool: products are np.matmul")
    rng = np.random.default_rng(3)
    a = rng.standard_normal(a_shape).astype(dtype)
    b = rng.standard_normal(b_shape).astype(dtype)
    assert _blas_threads._macs(a, b) >= _blas_threads.SPLIT_MACS and _blas_threads._splittable(a, b)
    get, set_ = switch
    previous_blas, previous_ember = get(), ember.get_num_threads()
    set_(3)
    ember.set_num_threads(2)
    try:
        # float32/float64: blocks on ember's OpenMP threads (_C.split_gemm); complex: on Python threads
        splitter = "_split_matmul" if np.iscomplexobj(a) else "_split_gemm"
        calls = []
        real = getattr(_blas_threads, splitter)
        setattr(_blas_threads, splitter, lambda *args: calls.append(1) or real(*args))
        try:
            got = _blas_threads.matmul(a, b)
        finally:
            setattr(_blas_threads, splitter, real)
        assert calls == [1] and get() == 3
        np.testing.assert_array_equal(_blas_threads.matmul(a, b), got)  # deterministic for a thread count
        want = a.astype(np.complex128 if np.iscomplexobj(a) else np.float64) @ b
        tol = 1e-4 if dtype in (np.float32, np.complex64) else 1e-10
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.abs(want).max())
        assert got.shape == want.shape and got.dtype == np.dtype(dtype) and got.flags.c_contiguous
    finally:
        set_(previous_blas)
        ember.set_num_threads(previous_ember)
