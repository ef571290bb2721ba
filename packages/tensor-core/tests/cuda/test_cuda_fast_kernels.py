"""The fast CUDA kernels (ember.cuda.kernels): the same bits as the generic path, and taken when they should be.

The generic path (an op's CPU kernel on CuPy arrays, or a composite op's
decomposition) is the oracle: for float32 and float64 the fused kernels must give
bit-identical results, signed zeros, infinities and NaNs included (any NaN matches
any NaN). Gradients through the activations are compared with CPU autograd.
"""

import numpy as np
import pytest

import ember
from ember._ops._registry import get as get_op

pytestmark = pytest.mark.cuda

DTYPES = [np.float32, np.float64]
SPECIALS = [0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 88.5, -88.5, 1e-38, -1e-38, 20.0, -20.0, 1e30]


@pytest.fixture(scope="module")
def kernels():
    ember.cuda.init()
    from ember.cuda import kernels
    from ember.cuda.kernels import copies, pointwise

    kernels.register()
    return pointwise, copies


def values(dtype, n=1027, seed=0, positive=False):
    """``n`` values (an odd count: the packed kernels' tail runs too) with the special values first."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(n) * 4).astype(dtype)
    k = min(n, len(SPECIALS))
    x[:k] = np.array(SPECIALS[:k], dtype)
    if positive:
        x = np.abs(x)
    return x


def cuda(x):
    return ember.from_numpy(np.ascontiguousarray(x)).to("cuda")


def bits_equal(fast, generic):
    """Bit-identical results, except that any NaN matches any NaN."""
    a, b = fast.cpu().numpy(), generic.cpu().numpy()
    assert a.dtype == b.dtype and a.shape == b.shape
    if a.dtype.kind != "f":
        np.testing.assert_array_equal(a, b)
        return
    nan = np.isnan(a)
    np.testing.assert_array_equal(nan, np.isnan(b))
    width = np.uint32 if a.dtype == np.float32 else np.uint64
    mismatch = np.flatnonzero(a.view(width)[~nan] != b.view(width)[~nan])
    first = mismatch[:5]
    assert mismatch.size == 0, f"{mismatch.size} differ, first at {first}: {a[~nan][first]} vs {b[~nan][first]}"


def both(kernels, fn):
    """``fn()`` with the fast kernels, then on the generic path."""
    pointwise, copies = kernels
    fast = fn()
    with pointwise.generic_only(), copies.generic_only():
        generic = fn()
    return fast, generic


UNARY = ["neg", "exp", "tanh", "sigmoid", "relu", "silu"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", UNARY)
def test_unary_bits(kernels, name, dtype):
    x = cuda(values(dtype))
    fn = getattr(ember, name) if hasattr(ember, name) else getattr(ember.nn.functional, name)
    fast, generic = both(kernels, lambda: fn(x))
    bits_equal(fast, generic)
    assert (name, np.dtype(dtype), "a") in kernels[0].compiled


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_bits(kernels, approximate, dtype):
    x = cuda(values(dtype))
    fast, generic = both(kernels, lambda: ember.nn.functional.gelu(x, approximate=approximate))
    bits_equal(fast, generic)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "gt", "ge", "lt", "le"])
def test_binary_bits(kernels, name, dtype):
    a, b = cuda(values(dtype, seed=1)), cuda(values(dtype, seed=2)[::-1])
    fn = getattr(ember, name)
    fast, generic = both(kernels, lambda: fn(a, b))
    bits_equal(fast, generic)
    assert (name, np.dtype(dtype), "aa") in kernels[0].compiled


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "gt", "le"])
def test_repeated_operand_bits(kernels, name, dtype):
    """One operand repeated along the other (x + positions, scores + causal bias; a leading 1; either order;
    a repeat that is not a whole number of packs): the "ab"/"ba" kernels, the generic path's bits."""
    fn = getattr(ember, name)
    for big, small in [((3, 16, 32), (16, 32)), ((3, 2, 16, 16), (1, 16, 16)), ((5, 4, 7), (7,))]:
        a = cuda(values(dtype, n=int(np.prod(big)), seed=11).reshape(big))
        b = cuda(values(dtype, n=int(np.prod(small)), seed=12).reshape(small))
        for x, y in ((a, b), (b, a)):
            fast, generic = both(kernels, lambda x=x, y=y: fn(x, y))
            bits_equal(fast, generic)
    assert (name, np.dtype(dtype), "ab") in kernels[0].compiled and (name, np.dtype(dtype), "ba") in kernels[0].compiled


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("scalar", [0.1, 2, -3.5, 1e-3, 0])
@pytest.mark.parametrize("name", ["add", "sub", "mul", "div"])
def test_scalar_bits(kernels, name, scalar, dtype):
    a = cuda(values(dtype, seed=3))
    fn = getattr(ember, name)
    fast, generic = both(kernels, lambda: fn(a, scalar))
    bits_equal(fast, generic)
    fast, generic = both(kernels, lambda: fn(scalar, a))
    bits_equal(fast, generic)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("alpha", [0.3, -2, 1e-4])
def test_alpha_bits(kernels, alpha, dtype):
    a, b = cuda(values(dtype, seed=7)), cuda(values(dtype, seed=8))
    for fn in (ember.add, ember.sub):
        fast, generic = both(kernels, lambda fn=fn: fn(a, b, alpha=alpha))
        bits_equal(fast, generic)
    assert ("add_alpha", np.dtype(dtype), "aas") in kernels[0].compiled


@pytest.mark.parametrize("dtype", DTYPES)
def test_comparison_with_scalar_bits(kernels, dtype):
    a = cuda(values(dtype, seed=4))
    for scalar in (0, 0.5, 0.1):
        fast, generic = both(kernels, lambda s=scalar: a > s)
        bits_equal(fast, generic)


@pytest.mark.parametrize("dtype", DTYPES)
def test_backward_helpers_and_masks_bits(kernels, dtype):
    g, y = cuda(values(dtype, seed=5)), cuda(np.tanh(values(dtype, seed=6)))
    for name in ("tanh_backward", "sigmoid_backward"):
        op = get_op(name)
        fast, generic = both(kernels, lambda op=op: op(g, y))
        bits_equal(fast, generic)
    threshold_backward = get_op("threshold_backward")
    for threshold in (0, 0.25):  # values() holds NaNs and infinities in both operands
        fast, generic = both(kernels, lambda t=threshold: threshold_backward(g, y, t))
        bits_equal(fast, generic)
    mask = y > 0
    for fn in (lambda: g * mask, lambda: mask * g, lambda: ember.where(mask, g, y)):
        fast, generic = both(kernels, fn)
        bits_equal(fast, generic)


def test_misaligned_and_fallback_layouts(kernels):
    x = cuda(values(np.float32, n=4099))
    # a contiguous view 4 bytes into its storage: the one-element kernel
    fast, generic = both(kernels, lambda: ember.exp(x[1:]))
    bits_equal(fast, generic)
    fast, generic = both(kernels, lambda: x[1:] + x[:-1])
    bits_equal(fast, generic)
    # broadcasting, strides and other dtypes take the generic path and still agree with CPU (normal values:
    # CuPy's own elementwise kernels flush float32 subnormals to zero, which numpy keeps)
    m = cuda((np.random.default_rng(5).standard_normal(12) * 4).astype(np.float32).reshape(3, 4))
    row = cuda((np.random.default_rng(9).standard_normal(4) * 4).astype(np.float32))
    np.testing.assert_array_equal((m + row).cpu().numpy(), m.cpu().numpy() + row.cpu().numpy())
    np.testing.assert_array_equal((m.t() * 2).cpu().numpy(), m.cpu().numpy().T * 2)
    i = ember.arange(10, device="cuda")
    np.testing.assert_array_equal((i + i).cpu().numpy(), np.arange(10) * 2)
    np.testing.assert_array_equal((m + 2.5).cpu().numpy(), m.cpu().numpy() + np.float32(2.5))
    np.testing.assert_array_equal(ember.add(m, m, alpha=2).cpu().numpy(), m.cpu().numpy() * np.float32(3))


def test_empty_and_zero_dim(kernels):
    e = ember.empty(0, 3, device="cuda")
    assert (e + e).shape == (0, 3) and ember.exp(e).shape == (0, 3)
    s = ember.tensor(2.0, device="cuda")
    assert float((s * s).item()) == 4.0 and (s + s).shape == ()


def test_copies(kernels):
    x = cuda(values(np.float32, n=1 << 16))
    for fn in (lambda: x.clone(), lambda: x.to(ember.float32, copy=True), lambda: x[3:].clone()):
        fast, generic = both(kernels, fn)
        bits_equal(fast, generic)
    c = x.clone()
    assert c.data_ptr() != x.data_ptr()
    t = cuda(values(np.float32, n=12).reshape(3, 4)).t()
    assert t.clone().stride() == t.stride()  # preserve_format keeps a transposed layout (the generic kernel)
    np.testing.assert_array_equal(t.clone().cpu().numpy(), t.cpu().numpy())


@pytest.mark.parametrize("name", ["relu", "gelu", "silu", "sigmoid", "tanh", "exp"])
def test_gradients_match_cpu(kernels, name):
    x_np = values(np.float32, n=515)
    x_np = np.where(np.isfinite(x_np), np.clip(x_np, -30, 30), 0.5).astype(np.float32)
    fn = getattr(ember, name) if hasattr(ember, name) else getattr(ember.nn.functional, name)
    results = []
    for device in ("cpu", "cuda"):
        x = ember.from_numpy(x_np.copy()).to(device).requires_grad_()
        y = fn(x)
        (y * y).sum().backward()
        results.append((y.detach().cpu().numpy(), x.grad.cpu().numpy()))
    np.testing.assert_allclose(results[1][0], results[0][0], rtol=2e-6, atol=1e-6)
    np.testing.assert_allclose(results[1][1], results[0][1], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_gradient_fused_bits(kernels, monkeypatch, approximate, dtype):
    """gelu's gradient on cuda: one fused kernel with the bits of the formula's eleven ops (run with the fused
    kernel switched off)."""
    x_np = values(dtype, n=1027)
    x_np = np.where(np.isfinite(x_np), np.clip(x_np, -30, 30), 0.5).astype(dtype)
    g = cuda(values(dtype, n=1027, seed=9))
    pointwise = kernels[0]

    def gradient():
        x = cuda(x_np).requires_grad_()
        (grad,) = ember.autograd.grad(ember.nn.functional.gelu(x, approximate=approximate), x, g)
        return grad

    kind = "gelu_backward" if approximate == "none" else "gelu_tanh_backward"
    pointwise.compiled.pop((kind, np.dtype(dtype), "aa"), None)
    fused = gradient()
    assert (kind, np.dtype(dtype), "aa") in pointwise.compiled  # the fused kernel ran
    monkeypatch.setattr(pointwise, "gelu_backward", lambda *args: None)
    bits_equal(fused, gradient())


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("alpha", [1, -1e-3, 0.3])
def test_foreach_add_sub_fused_bits(kernels, alpha, dtype):
    """``_foreach_add_``/``_foreach_sub_`` of cuda tensor lists: one launch (ember.cuda.kernels.foreach_kernels),
    the bits of the per-tensor ``add_``/``sub_``, and the tensors' versions bumped."""
    from ember.cuda.kernels import foreach_kernels

    shapes = [(5, 40), (0,), (130,), (1,), (3, 3, 3), (70000,)]
    for k, (list_op, op) in enumerate(((ember._foreach_add_, ember.Tensor.add_), (ember._foreach_sub_, ember.Tensor.sub_))):
        xs = [cuda(values(dtype, n=int(np.prod(s)), seed=20 + i + k).reshape(s)) for i, s in enumerate(shapes)]
        ys = [cuda(values(dtype, n=int(np.prod(s)), seed=40 + i + k).reshape(s)) for i, s in enumerate(shapes)]
        copies = [x.clone() for x in xs]
        versions = [x._version for x in xs]
        foreach_kernels._functions.clear()
        list_op(xs, ys, alpha=alpha)
        assert foreach_kernels._functions, "the fused kernel did not run"
        for x, c, y, v in zip(xs, copies, ys, versions):
            op(c, y, alpha=alpha)
            bits_equal(x, c)
            assert x._version > v
    # a call the kernel declines (a transposed operand) takes the per-tensor ops
    a = cuda(values(np.float32, n=12).reshape(3, 4))
    b = cuda(values(np.float32, n=12, seed=3).reshape(4, 3)).t()
    want = a.clone().add_(b, alpha=2.0)
    ember._foreach_add_([a], [b], alpha=2.0)
    bits_equal(a, want)


def test_cat_and_clone_checked_kernels(kernels):
    """``cat`` of contiguous cuda tensors of one dtype: one 2-D memcpy per input, numpy's concatenate; the other
    calls take the generic path; ``clone(x)``'s checked kernel is the memcpy; a split's gradient goes through cat."""
    from ember.cuda.kernels import copies

    rng = np.random.default_rng(7)
    for shapes, dim in [([(3, 16, 32)] * 3, 2), ([(2, 3), (5, 3)], 0), ([(2, 3, 4), (2, 1, 4)], 1)]:
        for dtype in (np.float32, np.int64):
            arrays = [rng.standard_normal(s).astype(dtype) for s in shapes]
            tensors = [cuda(a) for a in arrays]
            assert copies.cat(tensors, dim) is not None
            np.testing.assert_array_equal(ember.cat(tensors, dim).cpu().numpy(), np.concatenate(arrays, axis=dim))
    mixed = [cuda(np.ones((2, 3), np.float32)), cuda(np.ones((1, 3), np.float64))]
    assert copies.cat(mixed, 0) is None and ember.cat(mixed, 0).dtype == ember.float64
    x = cuda(values(np.float32, n=24).reshape(2, 12))
    assert copies._clone_checked(x) is not None
    bits_equal(ember.clone(x), x)
    xg = x.clone().requires_grad_()
    q, k, v = xg.split(4, dim=1)
    (q * 1.0 + k * 2.0 + v * 3.0).sum().backward()
    np.testing.assert_array_equal(xg.grad.cpu().numpy(), np.repeat([[1.0] * 4 + [2.0] * 4 + [3.0] * 4], 2, 0))


def test_half_gradients_cast_back_without_dispatch(kernels):
    """A float16 gradient flowing into a float32 input (an autocast step) is cast by astype, the values of
    ``_to_copy``."""
    x_np = values(np.float32, n=64).reshape(8, 8)
    x_np = np.where(np.isfinite(x_np), np.clip(x_np, -100, 100), 1.0).astype(np.float32)
    x = cuda(x_np).requires_grad_()
    y = (x.half() * 3.0).sum()
    y.backward()
    assert x.grad.dtype == ember.float32
    np.testing.assert_array_equal(x.grad.cpu().numpy(), np.full((8, 8), 3.0, np.float32))


# -- float16 / bfloat16: computed in float32, rounded once ------------------------------------------------------

HALVES = ["float16", "bfloat16"]


def _half(x, name):
    """``x`` (a cuda tensor) cast to the 16-bit dtype ``name``."""
    return x.to(getattr(ember, name))


def _rounded_float32(fn, name, *operands):
    """The oracle of a 16-bit op: ``fn`` on the float32 values of ``operands`` (the fast float32 kernel, whose bits
    the tests above tie to the generic path), rounded once to ``name``."""
    wide = fn(*[o.float() if isinstance(o, ember.Tensor) else o for o in operands])
    return wide if wide.dtype == ember.bool else _half(wide, name)


def half_bits_equal(got, expected):
    a, b = got.cpu().float().numpy(), expected.cpu().float().numpy()
    assert got.dtype == expected.dtype and a.shape == b.shape
    nan = np.isnan(b)
    np.testing.assert_array_equal(np.isnan(a), nan)
    np.testing.assert_array_equal(a[~nan].view(np.uint32), b[~nan].view(np.uint32))


@pytest.mark.parametrize("name", HALVES)
def test_half_unary_and_binary_round_the_float32_result_once(kernels, name):
    dtype = getattr(ember, name)
    x = _half(cuda(values(np.float32, seed=21)), name)
    y = _half(cuda(values(np.float32, seed=22)[::-1]), name)
    g = ember.nn.functional
    unary = [ember.neg, ember.exp, ember.tanh, ember.sigmoid, g.relu, g.silu, g.gelu,
             lambda t: g.gelu(t, approximate="tanh")]
    for fn in unary:
        got = fn(x)
        assert got.dtype == dtype
        half_bits_equal(got, _rounded_float32(fn, name, x))
    binary = [ember.add, ember.sub, ember.mul, ember.div, ember.gt, ember.le, lambda a, b: ember.add(a, b, alpha=0.3),
              lambda a, b: a * 0.1, lambda a, b: 2.5 - b, lambda a, b: ember.where(a > 0, a, b)]
    for fn in binary:
        half_bits_equal(fn(x, y), _rounded_float32(fn, name, x, y))
    bias = _half(cuda(values(np.float32, n=32, seed=23)), name)
    big = _half(cuda(values(np.float32, n=3 * 16 * 32, seed=24).reshape(3, 16, 32)), name)
    half_bits_equal(big + bias, _rounded_float32(ember.add, name, big, bias))
    half_dtype = np.dtype(np.float16) if name == "float16" else x._data.dtype
    for key in (("tanh", half_dtype, "a"), ("add", half_dtype, "aa"), ("add", half_dtype, "ab"),
                ("mul", half_dtype, "as"), ("where", half_dtype, "maa")):
        assert key in kernels[0].compiled and kernels[0].compiled[key] is not None, key


@pytest.mark.parametrize("name", HALVES)
def test_half_backward_helpers_round_once(kernels, name):
    g_, y_ = _half(cuda(values(np.float32, seed=25)), name), _half(cuda(np.tanh(values(np.float32, seed=26))), name)
    for op_name in ("tanh_backward", "sigmoid_backward"):
        op = get_op(op_name)
        half_bits_equal(op(g_, y_), _rounded_float32(op, name, g_, y_))
    op = get_op("threshold_backward")
    half_bits_equal(op(g_, y_, 0), _rounded_float32(lambda a, b: op(a, b, 0), name, g_, y_))
    x = _half(cuda(values(np.float32, seed=27)), name)
    pointwise = kernels[0]
    half_bits_equal(pointwise.gelu_backward(g_, x, "none"),
                    _half(pointwise.gelu_backward(g_.float(), x.float(), "none"), name))


@pytest.mark.parametrize("name", HALVES)
@pytest.mark.parametrize("alpha", [1, -1e-3, 0.3])
def test_half_foreach_add_rounds_the_float32_result_once(kernels, name, alpha):
    """The fused list op on 16-bit parameters (an SGD step on a bfloat16 model): ``x + y * alpha`` in float32,
    rounded once: the bits of the per-tensor fast ``add`` on the same tensors."""
    from ember.cuda.kernels import foreach_kernels

    shapes = [(5, 40), (0,), (130,), (1,), (70000,)]
    xs = [_half(cuda(values(np.float32, n=int(np.prod(s)), seed=60 + i).reshape(s)), name) for i, s in enumerate(shapes)]
    ys = [_half(cuda(values(np.float32, n=int(np.prod(s)), seed=80 + i).reshape(s)), name) for i, s in enumerate(shapes)]
    expected = [ember.add(x, y, alpha=alpha) for x, y in zip(xs, ys)]
    foreach_kernels._functions.clear()
    ember._foreach_add_(xs, ys, alpha=alpha)
    assert any(fn is not None for fn in foreach_kernels._functions.values()), "the fused kernel did not run"
    for x, want in zip(xs, expected):
        half_bits_equal(x, want)


@pytest.mark.parametrize("name", HALVES)
def test_half_casts_are_astype(kernels, name):
    """float32 <-> float16/bfloat16 ``_to_copy`` as one kernel (pointwise.convert): CuPy's astype bits."""
    x = cuda(values(np.float32, n=4099, seed=31) * 100)
    dtype = getattr(ember, name)
    fast, generic = both(kernels, lambda: x.to(dtype))
    half_bits_equal(fast, generic)
    fast, generic = both(kernels, lambda: fast.to(ember.float32))
    bits_equal(fast, generic)
    assert (f"to_{name}", np.dtype(np.float32), "a") in kernels[0].compiled
