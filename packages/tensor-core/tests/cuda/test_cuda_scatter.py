"""The scatter/index family, scans and sort-based reductions on cuda, against the same calls on CPU.

Covers every reduction mode and dtype of scatter/index_reduce/put/index_put with repeated positions
(the ``_array_module.ufunc_at`` paths: cupy.add.at, small integers through int64, complex parts, bool
counting, and the ordered rounds and segmented scans of every other ufunc), cummax/cummin with ties
and NaN, mode, unique, quantiles, histogram, the nuclear norm, embedding_bag, and out-of-range
indices raising on cuda as on CPU. Integer, bool and max/min results must equal CPU's exactly; float
sums within rounding (atomic adds run in another order).

The tests marked ``cuda`` need a GPU; the last ones run the namespace-generic helpers of
``ember._ops._array_module`` with numpy on CPU against numpy's own ``ufunc.at``/``ufunc.accumulate``.
"""

import itertools
import math

import numpy as np
import pytest

import ember
from ember._ops import _array_module

cuda = pytest.mark.cuda
F = ember.nn.functional

_INTS = (ember.uint8, ember.int8, ember.int16, ember.int32, ember.int64)
_FLOATS = (ember.float16, ember.float32, ember.float64)
_COMPLEX = (ember.complex64, ember.complex128)
_ALL = (ember.bool,) + _INTS + _FLOATS + _COMPLEX


def _values(shape, dtype, seed=0, nan=False):
    rng = np.random.default_rng(seed)
    if dtype is ember.bool:
        data = rng.random(shape) < 0.4
    elif dtype in _INTS:
        low = 0 if dtype is ember.uint8 else -4
        data = rng.integers(low, 5, size=shape)
    elif dtype in _COMPLEX:
        data = rng.normal(size=shape) + 1j * rng.normal(size=shape)
    else:
        data = rng.normal(size=shape) * 2
        if nan:
            data.flat[::5] = np.nan
    return ember.tensor(data, dtype=dtype)


def _host(t):
    return t.detach().cpu().numpy()


def _check(got, expected, exact=False):
    assert got.device.type == "cuda"
    assert got.dtype is expected.dtype and got.shape == expected.shape
    g, e = _host(got), expected.numpy()
    if exact or e.dtype.kind not in "fc":
        np.testing.assert_array_equal(g, e)
    else:
        tol = 2e-3 if e.dtype == np.float16 else 1e-5
        np.testing.assert_allclose(g, e, rtol=tol, atol=tol, equal_nan=True)


def _both(fn, *tensors):
    """``fn`` on the CPU tensors and on copies of them on cuda: (expected, got)."""
    expected = fn(*tensors)
    got = fn(*(t.to("cuda") if isinstance(t, ember.Tensor) else t for t in tensors))
    return expected, got


def _index(shape, high, seed=1, dup=True):
    rng = np.random.default_rng(seed)
    if dup:
        return ember.tensor(rng.integers(0, high, size=shape))
    return ember.tensor(np.stack([rng.permutation(high)[: shape[0]] for _ in range(shape[1])], axis=1))


# -- scatter / scatter_add / scatter_reduce --------------------------------------------------------------

_REDUCE_DTYPES = {
    "sum": _ALL,
    "prod": _ALL,
    "mean": _INTS + _FLOATS + _COMPLEX,
    "amax": (ember.bool,) + _INTS + _FLOATS,
    "amin": (ember.bool,) + _INTS + _FLOATS,
}


@cuda
@pytest.mark.parametrize("reduce, dtype", [(r, d) for r, ds in _REDUCE_DTYPES.items() for d in ds])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_matches_cpu(reduce, dtype, include_self):
    if not include_self and reduce == "mean" and dtype in _COMPLEX:
        pytest.skip("covered by include_self=True")
    x = _values((5, 4), dtype, seed=2, nan=reduce in ("amax", "amin"))
    src = _values((9, 4), dtype, seed=3, nan=reduce in ("amax", "amin"))
    index = _index((9, 4), 5)  # repeated rows: several values per position

    expected, got = _both(lambda a, i, s: ember.scatter_reduce(a, 0, i, s, reduce, include_self=include_self),
                          x, index, src)
    _check(got, expected, exact=reduce in ("amax", "amin") or dtype not in _FLOATS + _COMPLEX)


@cuda
@pytest.mark.parametrize("reduce", ["prod", "amax", "sum"])
def test_scatter_reduce_with_many_repeats_matches_cpu(reduce):
    # 300 values into 3 positions: more repeats than the ordered rounds take (the segmented-scan path)
    x = ember.tensor(np.linspace(0.5, 1.5, 3))
    src = ember.tensor(1 + np.random.default_rng(0).normal(size=300) * 1e-3)
    index = ember.tensor(np.arange(300) % 3)
    expected, got = _both(lambda a, i, s: ember.scatter_reduce(a, 0, i, s, reduce), x, index, src)
    np.testing.assert_allclose(_host(got), expected.numpy(), rtol=1e-12)
    small = ember.tensor(np.random.default_rng(1).integers(-3, 4, size=300), dtype=ember.int8)
    expected, got = _both(lambda a, i, s: ember.scatter_reduce(a, 0, i, s, reduce),
                          ember.ones(3, dtype=ember.int8), index, small)
    _check(got, expected, exact=True)  # integer products wrap the same way in any order


@cuda
@pytest.mark.parametrize("dtype", _ALL)
@pytest.mark.parametrize("mode", [None, "add", "multiply"])
def test_scatter_and_scatter_add_match_cpu(dtype, mode):
    x = _values((4, 6), dtype, seed=4)
    src = _values((7, 6), dtype, seed=5)
    index = _index((7, 6), 4)  # repeated: without reduce the last write wins on CPU, and on cuda too
    expected, got = _both(lambda a, i, s: ember.scatter(a, 0, i, s, reduce=mode), x, index, src)
    _check(got, expected, exact=mode is None)
    expected, got = _both(lambda a, i, s: ember.scatter_add(a, 1, i, s), x.T.contiguous(), index.T, src.T)
    _check(got, expected)
    expected, got = _both(lambda a, i: ember.scatter(a, 0, i, value=1, reduce=mode), x, index)
    _check(got, expected, exact=mode is None)


@cuda
@pytest.mark.parametrize("dtype", [ember.bool, ember.int8, ember.complex64, ember.float32])
def test_in_place_scatter_on_a_view_matches_cpu(dtype):
    index = _index((3, 4), 4, seed=7)
    src = _values((3, 4), dtype, seed=8)

    def run(base, i, s):
        base = base.clone()
        base[:, 1:5].scatter_add_(0, i, s)
        return base

    expected, got = _both(run, _values((4, 6), dtype, seed=6), index, src)
    _check(got, expected)


# -- index_add / index_reduce / index_copy / index_fill / index_select / take / put / index_put ----------


@cuda
@pytest.mark.parametrize("dtype", _ALL)
def test_index_add_and_index_copy_match_cpu(dtype):
    x = _values((5, 3), dtype, seed=9)
    source = _values((6, 3), dtype, seed=10)
    index = ember.tensor([4, 0, 4, 2, 4, 0])
    alpha = True if dtype is ember.bool else 2
    expected, got = _both(lambda a, i, s: ember.index_add(a, 0, i, s, alpha=alpha), x, index, source)
    _check(got, expected)
    expected, got = _both(lambda a, i, s: ember.index_copy(a, 0, i, s), x, index, source)
    _check(got, expected, exact=True)  # the last of repeated indices wins, as on CPU
    expected, got = _both(lambda a, i: ember.index_fill(a, 1, i, 1), x, ember.tensor([2, -3]))
    _check(got, expected, exact=True)
    expected, got = _both(lambda a, i: ember.index_select(a, 1, i), x, ember.tensor([2, 0, 2], dtype=ember.int32))
    _check(got, expected, exact=True)


@cuda
@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("dtype", _INTS + _FLOATS + (ember.bool, ember.complex128))
@pytest.mark.parametrize("include_self", [True, False])
def test_index_reduce_matches_cpu(reduce, dtype, include_self):
    if (reduce == "mean" and dtype is ember.bool) or (reduce in ("amax", "amin") and dtype.is_complex):
        pytest.skip("not implemented for this dtype (as in PyTorch)")
    if not include_self and (dtype is ember.bool or dtype.is_complex):
        pytest.skip("not implemented without include_self (as in PyTorch)")
    x = _values((4, 3), dtype, seed=11, nan=True)
    source = _values((5, 3), dtype, seed=12)
    index = ember.tensor([3, 1, 3, 3, 0])
    expected, got = _both(lambda a, i, s: ember.index_reduce(a, 0, i, s, reduce, include_self=include_self),
                          x, index, source)
    _check(got, expected, exact=reduce in ("amax", "amin"))


@cuda
@pytest.mark.parametrize("dtype", _ALL)
@pytest.mark.parametrize("accumulate", [False, True])
def test_put_and_index_put_match_cpu(dtype, accumulate):
    x = _values((3, 4), dtype, seed=13)
    index = ember.tensor([0, 11, -1, 5, 0, 5])
    source = _values((6,), dtype, seed=14)
    expected, got = _both(lambda a, i, s: ember.put(a, i, s, accumulate=accumulate), x, index, source)
    _check(got, expected, exact=not accumulate)
    rows, cols = ember.tensor([0, 2, 0, 0]), ember.tensor([1, 3, 1, 1])
    values = _values((4,), dtype, seed=15)
    expected, got = _both(lambda a, r, c, v: a.index_put((r, c), v, accumulate=accumulate), x, rows, cols, values)
    _check(got, expected, exact=not accumulate)
    mask = _values((3, 4), ember.bool, seed=16)
    expected, got = _both(lambda a, m: a.index_put((m,), ember.tensor(1, dtype=dtype, device=a.device),
                                                   accumulate=accumulate), x, mask)
    _check(got, expected, exact=not accumulate)


@cuda
def test_index_put_on_a_non_contiguous_view_matches_cpu():
    def run(base, i, v):
        base = base.clone()
        base.T.index_put_((i,), v, accumulate=True)
        return base

    expected, got = _both(run, _values((3, 4), ember.float64), ember.tensor([1, 3, 1]), _values((3, 3), ember.float64))
    _check(got, expected)


@cuda
@pytest.mark.parametrize("dtype", [ember.int64, ember.float32])
def test_gather_take_and_take_along_dim_match_cpu(dtype):
    x = _values((4, 5), dtype, seed=17)
    index = _index((6, 5), 4, seed=18)
    expected, got = _both(lambda a, i: ember.gather(a, 0, i), x, index)
    _check(got, expected, exact=True)
    expected, got = _both(lambda a, i: ember.take(a, i), x, ember.tensor([[0, -1], [19, 7]]))
    _check(got, expected, exact=True)
    expected, got = _both(lambda a, i: ember.take_along_dim(a, i, dim=1), x, ember.tensor([[0], [-1], [3], [2]]))
    _check(got, expected, exact=True)


# -- out-of-range indices raise on cuda as on CPU ---------------------------------------------------------

_BAD_INDEX_CALLS = [
    ("index_select", lambda x: ember.index_select(x, 0, ember.tensor([0, 3], device="cuda")), IndexError,
     "index out of range in self"),
    ("take", lambda x: ember.take(x, ember.tensor([12], device="cuda")), IndexError,
     "out of range: tried to access index 12"),
    ("put", lambda x: ember.put(x, ember.tensor([0, 12], device="cuda"), ember.ones(2, device="cuda")), IndexError,
     "out of range"),
    ("index_fill", lambda x: ember.index_fill(x, 0, ember.tensor([0, 5], device="cuda"), 1.0), IndexError,
     "index 5 is out of bounds for dimension 0 with size 3"),
    ("index_copy", lambda x: ember.index_copy(x, 0, ember.tensor([3], device="cuda"), ember.ones(1, 4, device="cuda")),
     IndexError, "index 3 is out of bounds"),
    ("index_add", lambda x: ember.index_add(x, 0, ember.tensor([3], device="cuda"), ember.ones(1, 4, device="cuda")),
     RuntimeError, "index 3 is out of bounds for dimension 0 with size 3"),
    ("index_reduce", lambda x: ember.index_reduce(x, 0, ember.tensor([5], device="cuda"),
                                                  ember.ones(1, 4, device="cuda"), "prod"),
     IndexError, "index out of range in self"),
    ("gather", lambda x: ember.gather(x, 1, ember.tensor([[4]], device="cuda")), RuntimeError,
     "index 4 is out of bounds for dimension 1 with size 4"),
    ("scatter", lambda x: ember.scatter(x, 1, ember.tensor([[-1]], device="cuda"), 2.0), RuntimeError,
     "index -1 is out of bounds"),
    ("index", lambda x: x[ember.tensor([0, 3], device="cuda")], IndexError, "index 3 is out of bounds"),
    ("index_put_", lambda x: x.index_put_((ember.tensor([-4], device="cuda"),), ember.tensor(1.0, device="cuda")),
     IndexError, "index -4 is out of bounds"),
    # embedding checks on the GPU, as PyTorch's device assert: the error comes at the next synchronising call
    ("embedding", lambda x: F.embedding(ember.tensor([0, 3], device="cuda"), x).cpu(), IndexError,
     "index out of range in self"),
    ("one_hot", lambda x: F.one_hot(ember.tensor([0, -1], device="cuda"), 3), RuntimeError,
     "Class values must be non-negative"),
    ("one_hot_classes", lambda x: F.one_hot(ember.tensor([0, 3], device="cuda"), 3), RuntimeError,
     "Class values must be smaller than num_classes"),
]


@cuda
@pytest.mark.parametrize("name, call, error, message", _BAD_INDEX_CALLS, ids=[c[0] for c in _BAD_INDEX_CALLS])
def test_out_of_range_indices_raise_on_cuda(name, call, error, message):
    x = ember.zeros(3, 4, device="cuda")
    with pytest.raises(error, match=message):
        call(x)
    assert _host(x).tolist() == np.zeros((3, 4)).tolist()  # nothing was written


# -- scans, mode, unique, quantiles, histogram, norm -------------------------------------------------------


@cuda
@pytest.mark.parametrize("op", ["cummax", "cummin"])
@pytest.mark.parametrize("dtype", (ember.bool,) + _INTS + _FLOATS)
def test_cummax_cummin_match_cpu_with_ties_and_nan(op, dtype):
    rng = np.random.default_rng(19)
    data = rng.integers(0, 3, size=(4, 37)).astype(np.float64)  # many ties
    if dtype in _FLOATS:
        data[rng.random(data.shape) < 0.05] = np.nan
        data[1, :3] = np.nan
    x = ember.tensor(data).to(dtype)
    for dim in (0, 1, -1):
        expected, got = _both(lambda a: getattr(ember, op)(a, dim), x)
        _check(got.values, expected.values, exact=True)
        _check(got.indices, expected.indices, exact=True)
    expected, got = _both(lambda a: getattr(ember, op)(a, 0), ember.tensor(2.5).to(dtype))
    _check(got.values, expected.values, exact=True)


@cuda
@pytest.mark.parametrize("dtype", [ember.bool, ember.uint8, ember.int16, ember.int64, ember.float16, ember.float64])
def test_mode_matches_cpu(dtype):
    rng = np.random.default_rng(20)
    x = ember.tensor(rng.integers(0, 4, size=(3, 5, 11))).to(dtype)
    for dim, keepdim in itertools.product((0, 1, -1), (False, True)):
        expected, got = _both(lambda a: ember.mode(a, dim, keepdim), x)
        _check(got.values, expected.values, exact=True)
        _check(got.indices, expected.indices, exact=True)


@cuda
@pytest.mark.parametrize("dtype", [ember.int16, ember.int64, ember.float32, ember.float64])
def test_median_and_kthvalue_of_long_rows_match_cpu(dtype):
    rng = np.random.default_rng(34)
    data = rng.integers(0, 9, size=(3, 41)).astype(np.float64)
    if dtype.is_floating_point:
        data[1, ::7] = np.nan
    x = ember.tensor(data).to(dtype)
    for op in (ember.median, ember.nanmedian):
        expected, got = _both(lambda a, op=op: op(a, 1), x)
        _check(got.values, expected.values)
        np.testing.assert_array_equal(_host(x)[np.arange(3), _host(got.indices)], _host(got.values))
        expected, got = _both(lambda a, op=op: op(a), x)
        _check(got, expected)
    expected, got = _both(lambda a: ember.kthvalue(a, 5, 1), x)
    _check(got.values, expected.values)


@cuda
@pytest.mark.parametrize("dtype", [ember.bool, ember.int8, ember.int64, ember.float32])
def test_unique_and_unique_consecutive_match_cpu(dtype):
    rng = np.random.default_rng(21)
    data = rng.integers(0, 3, size=(6, 4)).astype(np.float64)
    if dtype is ember.float32:
        data[0, 0] = data[3, 2] = np.nan
    x = ember.tensor(data).to(dtype)
    for kwargs in ({}, {"return_inverse": True}, {"return_counts": True},
                   {"return_inverse": True, "return_counts": True}, {"dim": 0, "return_inverse": True,
                                                                    "return_counts": True}, {"dim": 1}):
        for op in (ember.unique, ember.unique_consecutive):
            expected, got = _both(lambda a, op=op, kwargs=kwargs: op(a, **kwargs), x)
            for e, g in zip(expected if isinstance(expected, tuple) else (expected,),
                            got if isinstance(got, tuple) else (got,)):
                _check(g, e, exact=True)


@cuda
@pytest.mark.parametrize("op", ["quantile", "nanquantile"])
@pytest.mark.parametrize("interpolation", ["linear", "lower", "higher", "midpoint", "nearest"])
def test_quantiles_match_cpu(op, interpolation):
    x = _values((4, 7), ember.float64, seed=22, nan=True)
    q = ember.tensor([0.0, 0.3, 0.5, 1.0], dtype=ember.float64)
    fn = getattr(ember, op)
    expected, got = _both(lambda a, q: fn(a, q, dim=1, interpolation=interpolation), x, q)
    _check(got, expected)
    expected, got = _both(lambda a: fn(a, 0.25, interpolation=interpolation), x)
    _check(got, expected)


@cuda
@pytest.mark.parametrize("dtype", [ember.float32, ember.float64])
def test_histogram_matches_cpu(dtype):
    x = _values((50,), dtype, seed=23)
    w = _values((50,), dtype, seed=24).abs()
    for kwargs in ({"bins": 7}, {"bins": 4, "range": (-1.0, 1.0)}, {"bins": 5, "density": True}):
        expected, got = _both(lambda a, kwargs=kwargs: ember.histogram(a, **kwargs), x)
        _check(got.hist, expected.hist)
        _check(got.bin_edges, expected.bin_edges)
    expected, got = _both(lambda a, w: ember.histogram(a, bins=6, weight=w), x, w)
    _check(got.hist, expected.hist)
    edges = ember.tensor([-3.0, -1.0, 0.0, 0.5, 4.0], dtype=dtype)
    expected, got = _both(lambda a, e: ember.histogram(a, e), x, edges)
    _check(got.hist, expected.hist)


@cuda
@pytest.mark.parametrize("dtype", [ember.float32, ember.float64, ember.complex64, ember.complex128])
def test_nuclear_and_other_norms_match_cpu(dtype):
    x = _values((2, 4, 3), dtype, seed=25)
    for p, dim in (("nuc", (1, 2)), ("nuc", (0, 2)), ("fro", (1, 2)), (2, None), (1, 1), (math.inf, 2), (0, None),
                   (3, 0)):
        expected, got = _both(lambda a, p=p, dim=dim: ember.norm(a, p=p, dim=dim), x)
        _check(got, expected)
    expected, got = _both(lambda a: ember.norm(a, p="nuc"), x[0])
    _check(got, expected)


@cuda
@pytest.mark.parametrize("dtype", [ember.float32, ember.float64, ember.complex64, ember.complex128])
def test_logcumsumexp_matches_cpu(dtype):
    x = _values((3, 9), dtype, seed=26)
    for dim in (0, 1):
        expected, got = _both(lambda a: ember.logcumsumexp(a, dim), x)
        _check(got, expected)


# -- embedding / embedding_bag ------------------------------------------------------------------------------


@cuda
@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("dtype", [ember.float16, ember.float32, ember.float64])
def test_embedding_bag_matches_cpu_with_empty_bags(mode, dtype):
    weight = _values((6, 3), dtype, seed=27)
    indices = ember.tensor([1, 5, 1, 0, 2, 2, 4])
    for offsets, last in (([0, 2, 2, 7], False), ([0, 3, 3, 7], True), ([0, 0, 4], False)):
        expected, got = _both(lambda i, w, o: F.embedding_bag(i, w, o, mode=mode, include_last_offset=last,
                                                              padding_idx=2), indices, weight, ember.tensor(offsets))
        _check(got, expected)
    per_sample = _values((2, 3), dtype, seed=28) if mode == "sum" else None
    expected, got = _both(lambda i, w: F.embedding_bag(i, w, mode=mode, per_sample_weights=per_sample
                                                       if per_sample is None else per_sample.to(w.device)),
                          indices[:6].reshape(2, 3), weight)
    _check(got, expected)


@cuda
def test_embedding_bag_offsets_errors_on_cuda():
    weight = ember.ones(4, 2, device="cuda")
    with pytest.raises(RuntimeError, match=r"offsets\[0\] has to be 0"):
        F.embedding_bag(ember.tensor([0, 1], device="cuda"), weight, ember.tensor([1], device="cuda"))
    with pytest.raises(RuntimeError, match="indices must be in"):
        F.embedding_bag(ember.tensor([0, 4], device="cuda"), weight, ember.tensor([0], device="cuda"))


# -- the _array_module helpers on CuPy arrays, against numpy's ufunc methods -----------------------------------------

_AT_CASES = [
    (np.add, "bool"), (np.add, "uint8"), (np.add, "int8"), (np.add, "int16"), (np.add, "uint16"), (np.add, "int32"),
    (np.add, "int64"), (np.add, "float32"), (np.add, "complex64"), (np.add, "complex128"),
    (np.multiply, "bool"), (np.multiply, "int8"), (np.multiply, "int64"), (np.multiply, "float64"),
    (np.multiply, "complex128"), (np.maximum, "bool"), (np.maximum, "int16"), (np.maximum, "float32"),
    (np.minimum, "uint8"), (np.minimum, "float64"), (np.logical_or, "bool"), (np.logical_and, "bool"),
    (np.subtract, "float64"), (np.bitwise_xor, "int32"),
]


@cuda
@pytest.mark.parametrize("ufunc, dtype", _AT_CASES, ids=[f"{u.__name__}-{d}" for u, d in _AT_CASES])
@pytest.mark.parametrize("repeats", [3, 200])
def test_ufunc_at_on_cupy_matches_numpy(ufunc, dtype, repeats):
    import cupy

    rng = np.random.default_rng(29)
    size = 5
    positions = rng.integers(0, size, size=size * repeats)
    if dtype == "bool":
        target, values = rng.random(size) < 0.5, rng.random(positions.size) < 0.5
    elif dtype.startswith("complex"):
        target = (rng.normal(size=size) + 1j * rng.normal(size=size)).astype(dtype)
        values = (1 + 1e-3 * (rng.normal(size=positions.size) + 1j * rng.normal(size=positions.size))).astype(dtype)
    elif dtype.startswith("float"):
        target = rng.normal(size=size).astype(dtype)
        values = (1 + 1e-3 * rng.normal(size=positions.size)).astype(dtype)
        if ufunc in (np.maximum, np.minimum):
            values[::97] = np.nan
    else:
        target = rng.integers(0, 100, size=size).astype(dtype)
        values = rng.integers(0, 100, size=positions.size).astype(dtype)
    expected = target.copy()
    with np.errstate(all="ignore"):
        ufunc.at(expected, positions, values)
    got = cupy.asarray(target)
    _array_module.ufunc_at(ufunc, got, cupy.asarray(positions), cupy.asarray(values))
    if dtype.startswith(("float", "complex")):
        np.testing.assert_allclose(got.get(), expected, rtol=1e-4, equal_nan=True)
    else:
        np.testing.assert_array_equal(got.get(), expected)


@cuda
@pytest.mark.parametrize("name", ["maximum", "minimum", "logaddexp", "add", "multiply"])
def test_accumulate_on_cupy_matches_numpy(name):
    import cupy

    x = np.random.default_rng(30).normal(size=(3, 70, 2))
    x[0, 5, 0] = np.nan
    ufunc = getattr(np, name)
    for axis in range(3):
        with np.errstate(all="ignore"):
            expected = ufunc.accumulate(x, axis=axis)
        got = _array_module.accumulate(ufunc, cupy.asarray(x), axis).get()
        np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-10, equal_nan=True)


@cuda
def test_assign_last_and_check_bounds_on_cupy():
    import cupy

    positions = np.array([3, 1, 3, 0, 1, 3])
    values = np.arange(6.0)
    expected = np.zeros(4)
    expected[positions] = values
    got = cupy.zeros(4)
    _array_module.assign_last(got, cupy.asarray(positions), cupy.asarray(values))
    np.testing.assert_array_equal(got.get(), expected)
    assert _array_module.check_bounds(cupy.asarray([0, 4, -1]), 0, 4) == 4
    assert _array_module.check_bounds(cupy.asarray([0, 3]), 0, 4) is None


# -- CPU: the namespace-generic algorithms with numpy, and embedding_bag's empty bags ---------------------


@pytest.mark.parametrize("ufunc, dtype", [(np.multiply, np.float64), (np.maximum, np.float64), (np.minimum, np.int8),
                                          (np.multiply, np.int16), (np.add, np.complex128), (np.logical_and, np.bool_),
                                          (np.subtract, np.float64)])
@pytest.mark.parametrize("max_rounds", [64, 1])
def test_ordered_at_with_numpy_matches_ufunc_at(ufunc, dtype, max_rounds, monkeypatch):
    monkeypatch.setattr(_array_module, "_MAX_ROUNDS", max_rounds)  # 1: every repeat goes through the segmented scan
    rng = np.random.default_rng(31)
    for size, n in ((1, 0), (1, 5), (4, 50), (7, 200)):
        positions = rng.integers(0, size, size=n)
        if dtype is np.bool_:
            target, values = rng.random(size) < 0.5, rng.random(n) < 0.8
        elif np.dtype(dtype).kind in "iu":
            target, values = rng.integers(-5, 5, size).astype(dtype), rng.integers(-3, 4, n).astype(dtype)
        else:
            target, values = rng.normal(size=size).astype(dtype), rng.normal(size=n).astype(dtype)
            if ufunc is np.maximum:
                values[rng.random(n) < 0.1] = np.nan
        expected, got = target.copy(), target.copy()
        with np.errstate(all="ignore"):
            ufunc.at(expected, positions, values)
            _array_module.ordered_at(np, ufunc, got, positions, values)
        if np.dtype(dtype).kind in "fc" and ufunc in (np.multiply, np.add, np.subtract):
            np.testing.assert_allclose(got, expected)
        else:
            np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("name", ["maximum", "minimum", "logaddexp"])
def test_log_step_scan_with_numpy_matches_accumulate(name):
    rng = np.random.default_rng(32)
    ufunc = getattr(np, name)
    for shape in ((1,), (9,), (2, 33, 3)):
        x = rng.integers(0, 4, size=shape).astype(np.float64)
        x[rng.random(shape) < 0.1] = np.nan
        for axis in range(len(shape)):
            with np.errstate(all="ignore"):
                expected = ufunc.accumulate(x, axis=axis)
                got = _array_module.log_step_scan(np, ufunc, x, axis)
            if name == "logaddexp":
                np.testing.assert_allclose(got, expected, equal_nan=True)
            else:
                np.testing.assert_array_equal(got, expected)


def test_keep_last_with_numpy():
    rng = np.random.default_rng(33)
    for n in (0, 1, 2, 40):
        positions = rng.integers(0, 6, size=n)
        keep = _array_module.keep_last(positions)
        assert sorted(set(positions[keep].tolist())) == sorted(set(positions.tolist()))
        expected, got = np.zeros(6), np.zeros(6)
        expected[positions] = np.arange(n)
        got[positions[keep]] = np.arange(n)[keep]
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_keeps_every_row_of_a_bag_before_empty_bags(mode):
    # offsets [0, 3] over 3 indices: the second bag is empty, the first has all three rows
    weight = ember.arange(12.0).reshape(4, 3)
    out = F.embedding_bag(ember.tensor([0, 1, 2]), weight, ember.tensor([0, 3]), mode=mode)
    rows = weight.numpy()[[0, 1, 2]]
    first = {"sum": rows.sum(0), "mean": rows.mean(0), "max": rows.max(0)}[mode]
    np.testing.assert_allclose(out.numpy(), np.stack([first, np.zeros(3)]))
    out = F.embedding_bag(ember.tensor([0, 1, 2, 3]), weight, ember.tensor([0, 2, 4, 4]), mode=mode,
                          include_last_offset=True)
    second = weight.numpy()[[2, 3]]
    expected = {"sum": second.sum(0), "mean": second.mean(0), "max": second.max(0)}[mode]
    np.testing.assert_allclose(out.numpy()[1], expected)
    np.testing.assert_allclose(out.numpy()[2], np.zeros(3))


@pytest.mark.cuda
def test_complex_accumulation_keeps_an_inf_or_nan_imaginary_part_out_of_the_real_part():
    src = ember.tensor([complex(1, float("nan")), complex(2, float("inf")), complex(3, 4), complex(5, -1)])
    index = ember.tensor([0, 0, 1, 0])
    expected = ember.zeros(3, dtype=ember.complex64).index_add(0, index, src)
    got = ember.zeros(3, dtype=ember.complex64, device="cuda").index_add(0, index.cuda(), src.cuda())
    np.testing.assert_array_equal(got.cpu().numpy().real, expected.numpy().real)  # 8, 3, 0: never nan
    np.testing.assert_array_equal(got.cpu().numpy().imag, expected.numpy().imag)
    assert np.isfinite(got.cpu().numpy().real).all()
