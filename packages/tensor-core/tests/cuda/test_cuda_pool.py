"""Pooling, unpooling, interpolation, grid sampling and shuffles on cuda against the same calls on CPU.

Forward values (and max-pooling indices, ties and NaN included) must equal CPU's; float results
within a few ulps (reduction order differs), integer and uint8 results exactly. Backward passes
(``ember.autograd.grad``) are compared the same way. The tests marked ``cuda`` need a GPU; the
last ones check the array-namespace pooling paths on CPU, run with numpy arrays against ember._C.
"""

import itertools

import numpy as np
import pytest

import ember
from ember import _C
from ember._ops import _spatial, nn_pooling
from ember.cuda.kernels import grid_sample as cuda_grid_sample
from ember.cuda.kernels import pooling as cuda_pooling

F = ember.nn.functional
cuda = pytest.mark.cuda


def _make(shape, dtype=ember.float32, seed=0, nan=False, ties=False):
    rng = np.random.default_rng(seed)
    if dtype is ember.uint8:
        data = rng.integers(0, 256, size=shape).astype(np.uint8)
    elif dtype in (ember.int64, ember.int32, ember.int16, ember.int8):
        data = rng.integers(-20, 20, size=shape)
    else:
        data = rng.normal(size=shape) * 3
        if ties:
            data = np.round(data)
        if nan:
            data.flat[::7] = np.nan
            data.flat[3::11] = -np.inf
    return ember.tensor(data, dtype=dtype)


def _host(t):
    return t.detach().cpu().numpy()


def _assert_same(got, expected, name, rtol=None):
    if isinstance(expected, (tuple, list)):
        assert len(got) == len(expected), name
        for g, e in zip(got, expected):
            _assert_same(g, e, name, rtol)
        return
    assert got.device.type == "cuda", f"{name}: result on {got.device}"
    assert got.dtype is expected.dtype and got.shape == expected.shape, name
    g, e = _host(got), _host(expected)
    if e.dtype.kind == "V":  # bfloat16
        g, e = g.astype(np.float32), e.astype(np.float32)
        rtol = 1e-2 if rtol is None else rtol
    if e.dtype.kind == "f":
        tol = rtol if rtol is not None else {np.float16: 2e-3, np.float32: 2e-5}.get(e.dtype.type, 1e-11)
        np.testing.assert_allclose(g, e, rtol=tol, atol=5 * tol, equal_nan=True, err_msg=name)
    else:
        np.testing.assert_array_equal(g, e, err_msg=name)


def _check(fn, *inputs, name="", grad=True, rtol=None):
    """fn on CPU and on cuda inputs: equal results; with ``grad``, equal gradients of a weighted sum."""
    cpu = [t.detach().requires_grad_(grad and t.dtype.is_floating_point) for t in inputs]
    dev = [t.detach().to("cuda").requires_grad_(grad and t.dtype.is_floating_point) for t in inputs]
    expected = fn(*cpu)
    got = fn(*dev)
    _assert_same(got, expected, name, rtol)
    if not grad:
        return
    e_out = expected[0] if isinstance(expected, (tuple, list)) else expected
    g_out = got[0] if isinstance(got, (tuple, list)) else got
    weight = _make(tuple(e_out.shape), e_out.dtype, seed=7)
    wanted = [t for t in cpu if t.requires_grad]
    if not wanted:
        return
    e_grads = ember.autograd.grad((e_out * weight).sum(), wanted)
    g_grads = ember.autograd.grad((g_out * weight.to("cuda")).sum(), [t for t in dev if t.requires_grad])
    _assert_same(list(g_grads), list(e_grads), f"{name} (grad)", rtol)


_SPATIAL = {1: (11,), 2: (7, 6), 3: (5, 6, 4)}


def _fits(n, k, s, p, d, ceil):
    """Whether a pooling window gives a non-empty output over ``_SPATIAL[n]``."""
    return p <= k // 2 and all(nn_pooling._pool_output_size(size, k, s or k, p, d, ceil) >= 1 for size in _SPATIAL[n])


# -- max pooling ---------------------------------------------------------------------------------------


@cuda
@pytest.mark.parametrize("raw_kernel", [True, False])
@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("dtype", [ember.float32, ember.float64, ember.float16, ember.bfloat16, ember.int64, ember.uint8,
                                   ember.int8])
def test_max_pool_matches_cpu(n, dtype, raw_kernel, monkeypatch):
    # raw_kernel: ember's CUDA max-pool kernel (not for float16); else the window reductions over xp
    monkeypatch.setattr(cuda_pooling, "_MAX_POOL_RAW_KERNEL", raw_kernel)
    pool = getattr(F, f"max_pool{n}d")
    x = _make((2, 3, *_SPATIAL[n]), dtype, nan=dtype in (ember.float32, ember.float64), ties=True)
    for k, s, p, d, ceil in itertools.product((1, 2, 3), (None, 1, 2), (0, 1), (1, 2), (False, True)):
        if not _fits(n, k, s, p, d, ceil):
            continue
        name = f"max_pool{n}d k={k} s={s} p={p} d={d} ceil={ceil} {dtype}"
        for with_indices in (False, True) if (n > 1 or dtype.is_floating_point) else (True,):  # as PyTorch
            _check(lambda t: pool(t, k, s, p, d, ceil, with_indices), x, name=name,
                   grad=dtype in (ember.float32, ember.float64))


@cuda
@pytest.mark.parametrize("n", [1, 2, 3])
def test_max_pool_with_indices_and_unbatched(n):
    x = _make((3, *_SPATIAL[n]), ember.float64, ties=True)
    prim = getattr(F, f"max_pool{n}d_with_indices")
    _check(lambda t: tuple(prim(t, 3, 2, 1, 1, True)), x, name=f"max_pool{n}d_with_indices")
    _check(lambda t: getattr(F, f"max_pool{n}d")(t, 2), x, name=f"max_pool{n}d unbatched")


@cuda
def test_max_pool_empty_batch_and_all_lowest_windows():
    x = ember.full((1, 1, 4, 4), float("-inf"))
    _check(lambda t: F.max_pool2d(t, 3, 1, 1, return_indices=True), x, name="all -inf", grad=False)
    e = ember.zeros((0, 2, 6, 6))
    _check(lambda t: F.max_pool2d(t, 2, return_indices=True), e, name="empty batch", grad=False)
    i = ember.full((1, 1, 5), -(2 ** 63), dtype=ember.int64)
    _check(lambda t: F.max_pool1d(t, 3, 1, 1, return_indices=True), i, name="int64 min", grad=False)


# -- average and power pooling ---------------------------------------------------------------------------


@cuda
@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("dtype", [ember.float32, ember.float64, ember.float16, ember.int64])
def test_avg_pool_matches_cpu(n, dtype):
    if n == 3 and dtype is ember.float16:
        pytest.skip("avg_pool3d takes no float16 (as in PyTorch)")
    pool = getattr(F, f"avg_pool{n}d")
    x = _make((2, 3, *_SPATIAL[n]), dtype)
    for k, s, p, ceil, include in itertools.product((1, 2, 3), (None, 1, 2), (0, 1), (False, True), (False, True)):
        if not _fits(n, k, s, p, 1, ceil):
            continue
        name = f"avg_pool{n}d k={k} s={s} p={p} ceil={ceil} include={include} {dtype}"
        grad = dtype in (ember.float32, ember.float64)
        _check(lambda t: pool(t, k, s, p, ceil, include), x, name=name, grad=grad)
        if n > 1:
            for divisor in (3, -2):
                _check(lambda t: pool(t, k, s, p, ceil, include, divisor), x, name=f"{name} div={divisor}",
                       grad=grad and divisor > 0)


@cuda
@pytest.mark.parametrize("n", [1, 2, 3])
def test_lp_pool_matches_cpu(n):
    pool = getattr(F, f"lp_pool{n}d")
    x = _make((2, 3, *_SPATIAL[n]), ember.float64, seed=3)
    for p in (1, 2, 3.5, float("inf"), float("-inf")):
        for k, s, ceil in ((2, None, False), (3, 2, True)):
            _check(lambda t: pool(t, p, k, s, ceil), x, name=f"lp_pool{n}d p={p} k={k} s={s} ceil={ceil}",
                   grad=p != float("-inf"), rtol=1e-9)
    _check(lambda t: pool(t, 2, 2), _make((2, 3, *_SPATIAL[n]), ember.int64), name=f"lp_pool{n}d int64", grad=False)


# -- adaptive pooling --------------------------------------------------------------------------------------


@cuda
@pytest.mark.parametrize("raw_kernel", [True, False])
@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("dtype", [ember.float32, ember.float64, ember.float16, ember.bfloat16])
def test_adaptive_pools_match_cpu(n, dtype, raw_kernel, monkeypatch):
    monkeypatch.setattr(cuda_pooling, "_MAX_POOL_RAW_KERNEL", raw_kernel)  # equal windows run the max pool
    avg = getattr(F, f"adaptive_avg_pool{n}d")
    mx = getattr(F, f"adaptive_max_pool{n}d")
    x = _make((2, 3, *_SPATIAL[n]), dtype, nan=dtype in (ember.float32, ember.float64), ties=True)
    clean = _make((2, 3, *_SPATIAL[n]), dtype, seed=5)
    grad = dtype in (ember.float32, ember.float64)
    for sizes in ((1,) * n, (2,) * n, (3,) * n, tuple(_SPATIAL[n]), tuple(s + 2 for s in _SPATIAL[n])):
        _check(lambda t: avg(t, sizes), clean, name=f"adaptive_avg_pool{n}d {sizes} {dtype}", grad=grad)
        _check(lambda t: mx(t, sizes, True), x, name=f"adaptive_max_pool{n}d {sizes} {dtype}", grad=False)
        _check(lambda t: mx(t, sizes, True), clean, name=f"adaptive_max_pool{n}d {sizes} {dtype}", grad=grad)
        _check(lambda t: mx(t, sizes), clean, name=f"adaptive_max_pool{n}d {sizes} values", grad=grad)


# -- max_unpool ------------------------------------------------------------------------------------------


@cuda
@pytest.mark.parametrize("n", [1, 2, 3])
def test_max_unpool_matches_cpu(n):
    x = _make((2, 3, *_SPATIAL[n]), ember.float64)
    values, indices = getattr(F, f"max_pool{n}d")(x, 2, return_indices=True)
    unpool = getattr(F, f"max_unpool{n}d")
    _check(lambda v, i: unpool(v, i, 2), values, indices, name=f"max_unpool{n}d")
    size = tuple(s + 1 for s in (np.array(values.shape[2:]) * 2))
    _check(lambda v, i: unpool(v, i, 2, output_size=size), values, indices, name=f"max_unpool{n}d output_size")
    bad = indices.clone()
    bad.view(-1)[0] = 10 ** 6
    with pytest.raises(RuntimeError, match="invalid max index"):
        unpool(values.to("cuda"), bad.to("cuda"), 2)


# -- interpolate / upsample -------------------------------------------------------------------------------

_MODES = {
    3: ("nearest", "nearest-exact", "linear", "area"),
    4: ("nearest", "nearest-exact", "bilinear", "bicubic", "area"),
    5: ("nearest", "nearest-exact", "trilinear", "area"),
}


@cuda
@pytest.mark.parametrize("dims", [3, 4, 5])
@pytest.mark.parametrize("dtype", [ember.float32, ember.float64, ember.float16])
def test_interpolate_matches_cpu(dims, dtype):
    shape = (2, 3, *_SPATIAL[dims - 2])
    x = _make(shape, dtype)
    grad = dtype is not ember.float16
    for mode in _MODES[dims]:
        aligns = (False, True) if mode in ("linear", "bilinear", "bicubic", "trilinear") else (None,)
        for align, how in itertools.product(aligns, ("up", "down", "scale", "size")):
            kwargs = {"mode": mode, "align_corners": align}
            if how == "up":
                kwargs["scale_factor"] = 2
            elif how == "down":
                kwargs["scale_factor"] = 0.5
            elif how == "scale":
                kwargs["scale_factor"] = 1.7
            else:
                kwargs["size"] = tuple(s + 3 for s in shape[2:])
            _check(lambda t: F.interpolate(t, **kwargs), x, name=f"interpolate {kwargs} {dtype}", grad=grad)


@cuda
@pytest.mark.parametrize("mode", ["nearest", "nearest-exact", "bilinear", "bicubic"])
def test_interpolate_uint8_matches_cpu_exactly(mode):
    x = _make((2, 3, 9, 7), ember.uint8)
    for align in ((None,) if "nearest" in mode else (False, True)):
        for antialias in ((False,) if "nearest" in mode else (False, True)):
            for kwargs in ({"scale_factor": 2}, {"size": (4, 3)}, {"size": (13, 5)}):
                _check(lambda t: F.interpolate(t, mode=mode, align_corners=align, antialias=antialias, **kwargs), x,
                       name=f"uint8 {mode} align={align} antialias={antialias} {kwargs}", grad=False)


@cuda
@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
def test_interpolate_antialias_matches_cpu(mode):
    x = _make((2, 3, 17, 13), ember.float64)
    for align in (False, True):
        _check(lambda t: F.interpolate(t, size=(5, 6), mode=mode, align_corners=align, antialias=True), x,
               name=f"antialias {mode} {align}")


@cuda
def test_upsample_aliases_match_cpu():
    x = _make((1, 2, 5, 4), ember.float64)
    with pytest.warns(UserWarning):
        _check(lambda t: F.upsample(t, scale_factor=2, mode="bilinear", align_corners=False), x, name="upsample")
    with pytest.warns(UserWarning):
        _check(lambda t: F.upsample_nearest(t, scale_factor=3), x, name="upsample_nearest")
    with pytest.warns(UserWarning):
        _check(lambda t: F.upsample_bilinear(t, size=(7, 9)), x, name="upsample_bilinear")


# -- grid_sample / affine_grid ------------------------------------------------------------------------------


@cuda
@pytest.mark.parametrize("raw_kernel", [True, False])
@pytest.mark.parametrize("dims", [4, 5])
@pytest.mark.parametrize("dtype", [ember.float32, ember.float64, ember.float16])
def test_grid_sample_matches_cpu(dims, dtype, raw_kernel, monkeypatch):
    # raw_kernel: bilinear/nearest in float32/float64 run ember's CUDA kernel; else the array-namespace code
    monkeypatch.setattr(cuda_grid_sample, "_GRID_SAMPLE_RAW_KERNEL", raw_kernel)
    n = dims - 2
    x = _make((2, 3, *_SPATIAL[n]), dtype)
    rng = np.random.default_rng(1)
    points = rng.uniform(-1.3, 1.3, size=(2, *(4,) * n, n))
    points[0, 0, 0] = 0.0  # exact half-pixel positions and the corners
    points[0, -1, -1] = 1.0
    if raw_kernel:  # not finite: the C++ and CUDA kernels sample it as outside (zero) or at the clamped border;
        points[1, 0, 0] = np.nan  # the array code (off: the GPU's generic path) gives NaN as PyTorch, not the C++ 0
    points[1, -1, -1] = 40.0  # far outside
    grid = ember.tensor(points, dtype=dtype)
    grad = dtype is not ember.float16
    modes = ("bilinear", "nearest", "bicubic") if n == 2 else ("bilinear", "nearest")
    for mode, padding, align in itertools.product(modes, ("zeros", "border", "reflection"), (False, True)):
        _check(lambda a, g: F.grid_sample(a, g, mode, padding, align), x, grid,
               name=f"grid_sample {mode} {padding} {align} {dtype}", grad=grad, rtol=1e-2 if not grad else None)


@cuda
@pytest.mark.parametrize("dims", [4, 5])
def test_affine_grid_matches_cpu(dims):
    n = dims - 2
    theta = _make((2, n, n + 1), ember.float64)
    size = (2, 3, *(5, 4, 3)[:n])
    for align in (False, True):
        _check(lambda t: F.affine_grid(t, size, align), theta, name=f"affine_grid {size} {align}")


# -- shuffles ---------------------------------------------------------------------------------------------


@cuda
@pytest.mark.parametrize("dtype", [ember.float32, ember.int64, ember.bool])
def test_shuffles_match_cpu(dtype):
    x = _make((2, 8, 3, 4), dtype) if dtype is not ember.bool else ember.tensor(np.arange(192).reshape(2, 8, 3, 4) % 3 == 0)
    grad = dtype.is_floating_point
    _check(lambda t: F.pixel_shuffle(t, 2), x, name="pixel_shuffle", grad=grad)
    _check(lambda t: F.pixel_unshuffle(t, 1), x, name="pixel_unshuffle 1", grad=grad)
    y = _make((2, 3, 4, 6), dtype) if dtype is not ember.bool else ember.tensor(np.arange(144).reshape(2, 3, 4, 6) % 5 == 0)
    _check(lambda t: F.pixel_unshuffle(t, 2), y, name="pixel_unshuffle", grad=grad)
    _check(lambda t: F.channel_shuffle(t, 4), x, name="channel_shuffle", grad=grad)


# -- the array-namespace pooling paths, run on CPU with numpy arrays against ember._C ---------------------


def _max_pool_cases():
    for n in (1, 2, 3):
        for k, s, p, d, ceil in itertools.product((1, 2, 3), (1, 2), (0, 1), (1, 2), (False, True)):
            if p > k // 2:
                continue
            spatial = _SPATIAL[n]
            out = tuple(nn_pooling._pool_output_size(spatial[i], k, s, p, d, ceil) for i in range(n))
            if min(out) >= 1:
                yield n, (k,) * n, (s,) * n, (p,) * n, (d,) * n, out


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.uint8])
def test_xp_max_pool_equals_c_kernel(dtype):
    rng = np.random.default_rng(0)
    for n, k, s, p, d, out in _max_pool_cases():
        x = np.round(rng.normal(size=(2, 3, *_SPATIAL[n])) * 2)
        if dtype is np.uint8:
            x = np.abs(x)
        x = x.astype(dtype)
        if x.dtype.kind == "f":
            x.flat[::7] = np.nan
            x.flat[5::13] = -np.inf
        expected = nn_pooling._max_pool_run(x, n, k, s, p, d, out, True)
        got = cuda_pooling._max_pool_xp(x, n, k, s, p, d, out, True)
        np.testing.assert_array_equal(got[0], expected[0])
        np.testing.assert_array_equal(got[1], expected[1])
        np.testing.assert_array_equal(cuda_pooling._max_pool_xp(x, n, k, s, p, d, out, False), expected[0])


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
def test_xp_avg_pool_equals_c_kernel(dtype):
    rng = np.random.default_rng(1)
    for n, k, s, p, d, out in _max_pool_cases():
        if d[0] != 1:
            continue
        x = (rng.normal(size=(2, 3, *_SPATIAL[n])) * 50).astype(dtype)
        for include, divisor in ((True, None), (False, None), (True, 3), (False, -2)):
            expected = nn_pooling._avg_pool_run(x, n, k, s, p, out, include, divisor)
            got = cuda_pooling._avg_pool_xp(x, n, k, s, p, out, include, divisor)
            assert got.dtype == expected.dtype
            if x.dtype.kind == "i":
                np.testing.assert_array_equal(got, expected)
            else:
                np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_xp_adaptive_pools_equal_c_kernels(dtype):
    rng = np.random.default_rng(2)
    for n in (1, 2, 3):
        x = np.round(rng.normal(size=(2, 3, *_SPATIAL[n])) * 2).astype(dtype)
        x.flat[::17] = np.nan
        for sizes in itertools.product(*[(1, 2, 3, 5) for _ in range(n)]):
            shape = x.shape[:2] + sizes
            values, indices = _C.adaptive_max_pool(_spatial._planes(x, n), _spatial._lift3(sizes, 1))
            got = cuda_pooling._adaptive_max_xp(x, n, sizes, shape)
            np.testing.assert_array_equal(got[0], values.reshape(shape))
            np.testing.assert_array_equal(got[1], indices.reshape(shape))
            clean = np.nan_to_num(x)
            np.testing.assert_allclose(cuda_pooling._adaptive_avg_xp(clean, n, sizes, shape),
                                       nn_pooling._adaptive_avg(clean, n, sizes, shape), rtol=1e-6)
