"""The C++ kernels behind sum, mean, cumsum and cumprod (``ember._C``, csrc/reduce.cpp).

They are checked directly against numpy float64 references, for every instruction set they are
compiled for that this CPU runs, on one thread and on two. The op-level tests (test_ops.py, the
parity suite) check the ops built on them with small samples; here the sizes are large enough
to reach every code path: blocks, flushes of the float64 accumulators, segmented and split scans.
"""

import numpy as np
import pytest

import ember
from ember import _C

EPS32 = float(np.finfo(np.float32).eps)
EPS64 = float(np.finfo(np.float64).eps)

# (outer, n, inner): the kernels' folded view; inner == 1 is the "last axis" case.
SHAPES = [
    (0, 5, 1), (3, 0, 1), (3, 5, 0), (0, 0, 0), (1, 1, 1), (1, 2, 1), (7, 1, 1), (5, 3, 1), (4, 15, 1),
    (4, 16, 1), (3, 17, 1), (9, 63, 1), (2, 511, 1), (2, 512, 1), (3, 513, 1), (2, 4097, 1), (1, 40_000, 1),
    (3, 33_001, 1), (1000, 10, 1), (1, 1, 7), (3, 5, 3), (2, 100, 7), (4, 37, 300), (1, 1000, 257),
    (2, 33, 513), (1, 20_000, 3), (5, 1, 1000), (1, 100_000, 2), (1, 50_000, 7), (2, 30_000, 5), (3, 1000, 8),
    (1, 4000, 17), (1, 3000, 300), (2, 2, 15),
]


@pytest.fixture(params=_C.supported_reduce_isas())
def isa(request):
    previous = _C.set_reduce_isa(request.param)
    yield request.param
    _C.set_reduce_isa(previous)


@pytest.fixture(params=[1, 2], ids=["1thread", "2threads"])
def threads(request):
    previous = _C.get_num_threads()
    _C.set_num_threads(request.param)
    yield request.param
    _C.set_num_threads(previous)


def _normal(shape, dtype, seed=0, shift=0.0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) + shift).astype(dtype)


def _ulps(got, want):
    """|got - want| in units of the last place of ``want`` (float32)."""
    want = np.asarray(want, np.float32)
    return np.abs(got.astype(np.float64) - want.astype(np.float64)) / np.spacing(np.abs(want))


# -- sum -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sum_matches_float64_reference(isa, threads, shape, dtype):
    x = _normal(shape, dtype, seed=sum(shape), shift=0.25)
    got = _C.sum_dims(x, 1, 1)
    assert got.dtype == dtype and got.shape == (shape[0], shape[2])
    wide = x.astype(np.float64)
    want = wide.sum(axis=1)
    # Worst case of the blocked pairwise scheme: a few dozen roundings per element's path, times
    # the sum of magnitudes; plus the final rounding to the output dtype.
    eps = EPS32 if dtype == np.float32 else EPS64
    bound = 64 * eps * np.abs(wide).sum(axis=1) + eps * np.abs(want)
    assert np.all(np.abs(got - want) <= bound)


@pytest.mark.parametrize("n", [16, 17, 31, 32, 33, 511, 512, 513, 1000, 4096, 4100, 33_000])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
def test_row_sums_do_not_depend_on_how_rows_are_grouped(isa, threads, n, dtype):
    # The kernel reads four rows side by side and the rest one by one; which rows go together depends
    # on the row count and on the threads' shares. Each row must come out with the same bits as when
    # it is summed alone (a one-row array), and close to the float64 sum. (Rows shorter than a 64-byte
    # vector take another path, which reads the end of the row before.)
    rows = 11  # two groups of four and three single rows on one thread; other cuts on two
    x = _normal((rows, n), np.float64, seed=n, shift=0.5)
    x = (x * 1000).astype(dtype) if dtype == np.int64 else x.astype(dtype)
    got = _C.sum_dims(x, 1, 1)
    alone = np.array([_C.sum_dims(x[r:r + 1], 1, 1)[0] for r in range(rows)])
    np.testing.assert_array_equal(got, alone)
    if dtype == np.int64:
        np.testing.assert_array_equal(got, x.sum(axis=1))
    else:
        wide = x.astype(np.float64)
        eps = np.finfo(dtype).eps
        assert np.all(np.abs(got - wide.sum(axis=1)) <= 64 * eps * np.abs(wide).sum(axis=1))


@pytest.mark.parametrize("layout", ["last", "middle", "split"])
def test_sum_float32_is_accurate_on_a_million_elements(isa, threads, layout):
    # 1e6 float32 normals (seed 0; their sum is about 998.6). Measured relative errors against the
    # float64 sum: a single running float32 sum (np.cumsum(x)[-1]) 6.4e-06; numpy's pairwise sum
    # 1.1e-07; this kernel 4.5e-08. With a shift of +1 (sum about 1.0e6): running sum 2.5e-05,
    # numpy 3.0e-08, this kernel 3.0e-08. The 1e-6 bound below fails for the running sum.
    for shift in (0.0, 1.0):
        x = _normal(1_000_000, np.float32, shift=shift)
        want = x.astype(np.float64).sum()
        naive = float(np.cumsum(x)[-1])
        assert abs(naive - want) > 1e-6 * abs(want)  # the bound below means something
        if layout == "last":
            got = _C.sum_dims(x, 0, 0)
        elif layout == "middle":  # across 1e5 rows of 10 columns, then the columns in float64
            got = _C.sum_dims(x.reshape(100_000, 10), 0, 0).astype(np.float64).sum()
        else:  # four long rows
            got = _C.sum_dims(x.reshape(4, 250_000), 1, 1).astype(np.float64).sum()
        assert abs(float(got) - want) <= 1e-6 * abs(want), (shift, float(got), want)


def test_sum_float64_is_accurate_on_a_million_elements(isa, threads):
    x = _normal(1_000_000, np.float64, shift=1.0)
    want = float(np.sum(x.astype(np.longdouble)))
    assert abs(float(_C.sum_dims(x, 0, 0)) - want) <= 1e-14 * abs(want)


@pytest.mark.parametrize("shape", [(0, 3, 1), (1, 1, 1), (3, 17, 1), (2, 4097, 3), (1, 100_000, 1), (5, 1000, 40)], ids=str)
def test_sum_int64_is_exact_and_wraps(isa, threads, shape):
    rng = np.random.default_rng(1)
    x = rng.integers(-(2**62), 2**62, shape, dtype=np.int64)  # the sums overflow and wrap, as in numpy
    got = _C.sum_dims(x, 1, 1)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, np.add.reduce(x, axis=1))


def test_sum_propagates_nan_and_inf(isa):
    x = np.ones((4, 1000), np.float32)
    x[1, 500] = np.nan
    x[2, 999] = np.inf
    x[3, 3], x[3, 700] = np.inf, -np.inf
    got = _C.sum_dims(x, 1, 1)
    assert got[0] == 1000 and np.isnan(got[1]) and got[2] == np.inf and np.isnan(got[3])
    across = _C.sum_dims(x.T.copy(), 0, 0)  # the same sums, along the middle axis
    assert across[0] == 1000 and np.isnan(across[1]) and across[2] == np.inf and np.isnan(across[3])


@pytest.mark.parametrize("first,last", [(0, 0), (1, 2), (0, 3), (3, 3), (2, 3), (0, 1)])
@pytest.mark.parametrize("keepdim", [False, True])
def test_sum_dims_folds_adjacent_dims(first, last, keepdim):
    x = _normal((3, 4, 5, 6), np.float64, seed=3)
    axes = tuple(range(first, last + 1))
    np.testing.assert_allclose(_C.sum_dims(x, first, last, keepdim), x.sum(axis=axes, keepdims=keepdim), rtol=1e-13)


def test_sum_dims_declines_what_it_does_not_handle():
    assert _C.sum_dims(np.ones((3, 4), np.float16), 1, 1) is None
    assert _C.sum_dims(np.ones((3, 4), np.int32), 1, 1) is None
    assert _C.sum_dims(np.ones((3, 4), np.float32).T, 1, 1) is None  # not C-contiguous
    assert _C.sum_dims(np.ones(8, ">f4"), 0, 0) is None  # byte-swapped
    with pytest.raises(ValueError, match="out of range"):
        _C.sum_dims(np.ones((3, 4)), 1, 2)
    with pytest.raises(ValueError, match="out of range"):
        _C.sum_dims(np.ones((3, 4)), 1, 0)


# -- cumsum, cumprod -----------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", SHAPES + [(1, 1_000_000, 1), (3, 300_001, 1), (2, 5000, 2)], ids=str)
def test_cumsum_float32_accumulates_in_float64(isa, threads, shape):
    # Each output is the float64 running sum rounded once (as PyTorch's CPU kernel does). A float32
    # running sum (np.cumsum on float32) is off by up to about 330 ulps on the 1e6-element row.
    x = _normal(shape, np.float32, seed=sum(shape), shift=0.5)
    got = _C.cumsum(x, 1)
    assert got.dtype == np.float32 and got.shape == shape
    want = np.cumsum(x.astype(np.float64), axis=1)
    if got.size:
        assert _ulps(got, want).max() <= 1
        assert np.mean(got == want.astype(np.float32)) > 0.999


@pytest.mark.parametrize("shape", SHAPES + [(1, 1_000_000, 1), (2, 5000, 2)], ids=str)
def test_cumsum_float64(isa, threads, shape):
    x = _normal(shape, np.float64, seed=sum(shape), shift=0.5)
    got = _C.cumsum(x, 1)
    want = np.cumsum(x, axis=1)
    assert got.dtype == np.float64
    scale = np.cumsum(np.abs(x), axis=1)
    assert np.all(np.abs(got - want) <= 8 * EPS64 * scale * np.log2(shape[1] + 2))


@pytest.mark.parametrize("shape", SHAPES + [(1, 200_000, 1)], ids=str)
def test_cumprod_floats_accumulate_in_float64(isa, threads, shape):
    x = (1 + 0.01 * _normal(shape, np.float64, seed=sum(shape))).astype(np.float32)
    got = _C.cumprod(x, 1)
    want = np.cumprod(x.astype(np.float64), axis=1)
    if got.size:
        assert _ulps(got, want).max() <= 1
    np.testing.assert_allclose(_C.cumprod(x.astype(np.float64), 1), want, rtol=1e-12)


@pytest.mark.parametrize("shape", [(0, 3, 1), (1, 1, 1), (5, 9, 1), (1, 50_000, 1), (3, 100, 7), (2, 10_000, 300)], ids=str)
def test_int64_scans_are_exact_and_wrap(isa, threads, shape):
    rng = np.random.default_rng(2)
    x = rng.integers(-(2**62), 2**62, shape, dtype=np.int64)
    np.testing.assert_array_equal(_C.cumsum(x, 1), np.cumsum(x, axis=1))
    y = rng.integers(-3, 4, shape, dtype=np.int64)
    np.testing.assert_array_equal(_C.cumprod(y, 1), np.cumprod(y, axis=1))


def test_scans_propagate_nan_and_inf(isa, threads):
    x = np.ones(100_000, np.float32)
    x[10], x[60_000], x[70_000] = np.inf, -np.inf, 5
    got = _C.cumsum(x, 0)
    assert np.all(got[:10] == np.arange(1, 11)) and np.all(got[10:60_000] == np.inf) and np.all(np.isnan(got[60_000:]))
    y = np.full(10, 2.0)
    y[4] = np.nan
    assert np.isnan(_C.cumprod(y, 0)[4:]).all() and _C.cumprod(y, 0)[3] == 16


def test_scans_take_any_dim_and_decline_other_arrays():
    x = _normal((3, 4, 5), np.float64, seed=4)
    for d in range(3):
        np.testing.assert_allclose(_C.cumsum(x, d), np.cumsum(x, axis=d), rtol=1e-13)
        np.testing.assert_allclose(_C.cumprod(x, d), np.cumprod(x, axis=d), rtol=1e-13)
    assert _C.cumsum(np.ones(4, np.int32), 0) is None
    assert _C.cumprod(x.transpose(2, 0, 1), 0) is None
    with pytest.raises(ValueError, match="out of range"):
        _C.cumsum(x, 3)


# -- the ops that use them -------------------------------------------------------------------------


def test_ops_use_the_kernels_with_torch_semantics():
    x = _normal((40, 50, 3), np.float32, seed=5)
    t = ember.from_numpy(x)
    np.testing.assert_allclose(t.sum((0, 1)).numpy(), x.astype(np.float64).sum((0, 1)), rtol=1e-6)
    np.testing.assert_allclose(t.sum((0, 2)).numpy(), x.astype(np.float64).sum((0, 2)), rtol=1e-5, atol=1e-5)
    assert t.sum(1, keepdim=True).shape == (40, 1, 3)
    assert t.mean(1).dtype == ember.float32
    np.testing.assert_allclose(t.mean(-1).numpy(), x.astype(np.float64).mean(-1), rtol=1e-6, atol=1e-7)
    m = ember.from_numpy(x[:, :, 0]).t()  # F-contiguous
    np.testing.assert_allclose(m.sum(0).numpy(), x[:, :, 0].sum(1), rtol=1e-5)
    np.testing.assert_allclose(m.sum(1, keepdim=True).numpy(), x[:, :, 0].T.sum(1, keepdims=True), rtol=1e-5)
    assert m.sum(0).numpy().flags.c_contiguous
    want = np.cumsum(x[:, :, 0].T.astype(np.float64), 1).astype(np.float32)
    np.testing.assert_array_equal(m.cumsum(1).numpy(), want)  # float64 running sums, rounded once
    ints = ember.from_numpy(np.arange(12, dtype=np.int32).reshape(3, 4))
    assert ints.sum(1).dtype == ember.int64 and ints.cumsum(0).dtype == ember.int64
    assert ints.sum(1).tolist() == [6, 22, 38] and ints.cumprod(1)[1].tolist() == [4, 20, 120, 840]
