"""Each lowered op, compiled to C++, against ember's eager kernels.

Many ops share one graph (one C++ build per graph) so the file stays quick once the
kernel cache is warm: a graph computes a tuple of results and every item is compared.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import ember
from ember._inductor import ir, lowering
from ember._inductor.codegen.wrapper import compile_graph
from ember._ops import registry as R
from ember.fx.experimental.proxy_tensor import make_fx
from ember.testing import assert_close


def compiled_matches_eager(fn, *inputs, rtol=None, atol=None):
    """Compile ``fn`` traced on ``inputs``; assert each output equals eager; return the compiled graph."""
    gm = make_fx(fn)(*inputs)
    compiled = compile_graph(gm, list(inputs))
    got = compiled(*inputs)
    want = fn(*inputs)
    if not isinstance(want, tuple):
        got, want = (got,), (want,)
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want)):
        assert_close(g, w, rtol=rtol, atol=atol, equal_nan=True, msg=f"output {k}")
    return compiled


def _rand(*shape, dtype=ember.float32, low=-2.0, high=2.0, seed=0):
    rng = np.random.default_rng(seed + len(shape))
    return ember.tensor(rng.uniform(low, high, size=shape)).to(dtype)


UNARY = ["exp", "exp2", "expm1", "sin", "cos", "tan", "atan", "sinh", "cosh", "tanh", "asinh", "erf", "erfc",
         "sigmoid", "floor", "ceil", "trunc", "round", "neg", "abs", "sign", "square", "frac", "deg2rad", "rad2deg",
         "reciprocal", "sgn"]
POSITIVE = ["log", "log2", "log10", "log1p", "sqrt", "rsqrt", "lgamma"]
UNIT = ["asin", "acos", "atanh"]


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64])
def test_unary_float_ops(dtype):
    x = _rand(5, 7, dtype=dtype)
    pos = _rand(5, 7, dtype=dtype, low=0.1, high=4.0, seed=1)
    unit = _rand(5, 7, dtype=dtype, low=-0.9, high=0.9, seed=2)
    big = _rand(5, 7, dtype=dtype, low=1.1, high=4.0, seed=3)

    def fn(x, pos, unit, big):
        return (tuple(R[n](x) for n in UNARY) + tuple(R[n](pos) for n in POSITIVE)
                + tuple(R[n](unit) for n in UNIT) + (R["acosh"](big),))

    compiled_matches_eager(fn, x, pos, unit, big)


def test_float_specials_propagate_like_eager():
    x = ember.tensor([math.nan, math.inf, -math.inf, 0.0, -0.0, 1e-30, 88.0, 89.0, -104.0, 3.9, -5.0, 0.5])
    y = ember.tensor([1.0, math.nan, 2.0, math.inf, -1.0, 0.0, -math.inf, 3.0, math.nan, 0.0, 1.0, -2.0])

    def fn(x, y):
        return (ember.exp(x), ember.erf(x), ember.sigmoid(x), ember.maximum(x, y), ember.minimum(x, y),
                ember.fmax(x, y), ember.fmin(x, y), ember.clamp(x, -1.0, 1.0), ember.isnan(x), ember.isinf(x),
                ember.isfinite(x), R["isposinf"](x), R["isneginf"](x),
                ember.nan_to_num(x), ember.nan_to_num(x, nan=1.0, posinf=2.0, neginf=-2.0),
                ember.amax(x), ember.amin(y), ember.argmax(x), ember.argmin(y))

    compiled_matches_eager(fn, x, y)


def test_binary_ops_broadcast_scalars_and_non_contiguous_inputs():
    a = _rand(5, 4).t()  # non-contiguous [4, 5]
    b = _rand(5, seed=1)
    c = _rand(4, 1, seed=2, low=0.5, high=2.0)
    w = _rand(4, 5, seed=3, low=0.0, high=1.0)

    def fn(a, b, c, w):
        return (R["add"](a, b, alpha=2), R["sub"](a, 1.5, alpha=3), a * b, a / c,
                R["div"](a, c, rounding_mode="floor"), R["div"](a, c, rounding_mode="trunc"),
                ember.pow(c, b), ember.pow(a, 2), ember.maximum(a, b), ember.minimum(a, c), ember.atan2(a, b),
                ember.copysign(a, b), ember.hypot(a, b), ember.fmod(a, c), ember.remainder(a, c),
                ember.floor_divide(a, c), a < b, a <= c, a > 0.5, a >= b, a == b, a != c,
                ember.logical_and(a > 0, b > 0), ember.logical_or(a > 0, b > 0), ember.logical_xor(a > 0, b > 0),
                ember.logical_not(a > 0), ember.where(a > b, a, c), ember.where(a > 0, a, 0.0),
                ember.clamp(a, b, c), ember.clamp(a, min=-0.5), ember.lerp(a, b, w), ember.lerp(a, b, 0.25),
                ember.addcmul(a, b, c, value=0.5), ember.addcdiv(a, b, c, value=2), ember.logaddexp(a, b),
                R["logaddexp2"](a, b), ember.xlogy(w, c), ember.heaviside(a, b),
                R["sigmoid_backward"](a, w), R["tanh_backward"](a, w), R["threshold_backward"](a, b, 0.1),
                ember.relu(a))

    compiled_matches_eager(fn, a, b, c, w)


@pytest.mark.parametrize("dtype", [ember.int64, ember.int32])
def test_integer_ops(dtype):
    a = ember.tensor([[7, -7, 0, 13], [-3, 5, 100, -1]], dtype=dtype)
    b = ember.tensor([2, -3, 5, -4], dtype=dtype)

    def fn(a, b):
        return (a + b, a - 2 * b, a * b, ember.floor_divide(a, b), ember.remainder(a, b), ember.fmod(a, b),
                a / b, R["div"](a, b, rounding_mode="trunc"), a & b, a | b, a ^ b, ~a, a << 2, a >> 1,
                ember.abs(a), -a, ember.sign(a), ember.maximum(a, b), ember.minimum(a, b), ember.pow(b, 3),
                a < b, a == b, ember.where(a > b, a, b), a.sum(), a.sum(1), a.prod(0), ember.amax(a, 1),
                ember.argmin(a, 1), (a > 0).sum(), a.to(ember.float32) * 0.5, a + 1.5)

    compiled_matches_eager(fn, a, b)


def test_bool_ops():
    a = ember.tensor([[True, False, True], [False, False, True]])
    b = ember.tensor([True, True, False])

    def fn(a, b):
        return (ember.logical_not(a), ~a, a & b, a | b, a ^ b, a.any(), a.all(), a.any(1), a.all(0),
                ember.where(a, 1.0, -1.0), a.sum(0), a.to(ember.int64) + 1)

    compiled_matches_eager(fn, a, b)


def test_reductions():
    x = _rand(6, 5, 4)
    nan = ember.tensor([[1.0, math.nan, 3.0], [2.0, 5.0, -1.0]])

    def fn(x, nan):
        return (x.sum(), x.sum(1), x.sum((0, 2), keepdim=True), x.sum(0), R["sum"](x, dtype=ember.float64),
                x.prod(2), ember.amax(x, (1, 2)), ember.amin(x, 0, keepdim=True), ember.argmax(x),
                ember.argmax(x, 1), ember.argmin(x, 2, keepdim=True), x.mean(), x.mean((0, 1)),
                x.var(1), x.var((0, 2), correction=0, keepdim=True), ember.amax(nan, 1), ember.argmax(nan, 1),
                ember.argmin(nan, 1), (x > 0).any(2), (x > -3).all())

    compiled_matches_eager(fn, x, nan)


def test_large_full_reduction_is_deterministic_and_right():
    x = _rand(300, 257, dtype=ember.float64)

    def fn(x):
        return x.sum(), ember.amax(x), (x * x).sum()

    compiled = compiled_matches_eager(fn, x)
    assert "partial_" in compiled.source  # the split reduction path
    first = compiled(x)
    again = compiled(x)
    assert all(bool((f == s).all()) for f, s in zip(first, again))


def test_zero_dim_and_empty_tensors():
    s = ember.tensor(2.5)
    e = ember.randn(0, 3)
    x = _rand(2, 3)

    def fn(s, e, x):
        return s * 2 + 1, ember.exp(s), s.sum(), e + 1, e.sum(0), e.sum(1), x + s, x.sum(0)[0:0]

    compiled_matches_eager(fn, s, e, x)


def test_views_are_index_arithmetic():
    x = _rand(4, 6)
    y = _rand(2, 3, 4, seed=1)

    def fn(x, y):
        return (x.reshape(24), x.reshape(2, 2, 3, 2) + 1, x.view(3, 8), x.t() * 2, x.permute(1, 0) + 0,
                y.permute(2, 0, 1) * 1, y.transpose(0, 2) + 1, x[:, None, :].expand(4, 5, 6) * 1,
                x.unsqueeze(0) + 1, x[None].squeeze(0) * 1, y.reshape(6, 4).reshape(2, 12) * 1,
                x[1:, ::2] * 1, x[-3:] + 0, x[:, 2] * 1, x[-1] + 0, ember.diagonal(x, 1) * 1,
                ember.diagonal(y, -1, 1, 2) * 1, ember.flip(y, (0, 2)) * 1, y.reshape(24)[3:20:4] * 1,
                x.reshape(4, 3, 2).sum(2))

    compiled = compiled_matches_eager(fn, x, y)
    # views load their base directly: every kernel reads the inputs, none copies them first
    assert "x.view" not in compiled.source


def test_cat_pad_and_factories():
    a = _rand(2, 3)
    b = _rand(4, 3, seed=1)

    def fn(a, b):
        return (ember.cat([a, b]), ember.cat([a, a * 2], 1), ember.cat([a, ember.randn(0)[0:0].reshape(0, 3), b]),
                ember.nn.functional.pad(a, (1, 2)), ember.nn.functional.pad(b, (0, 1, 2, 0), value=3.5),
                ember.full((2, 3), 7.0) + a, ember.zeros(3) + 1, ember.ones(2, 2, dtype=ember.int64),
                ember.arange(5), ember.arange(1.0, 3.0, 0.5), ember.arange(10, 2, -3), ember.eye(3, 4),
                R["scalar_tensor"](4.0) + a, ember.zeros_like(a), ember.full_like(b, 2))

    compiled_matches_eager(fn, a, b)


def test_dtype_conversions_and_half_types():
    x = _rand(3, 5)
    h = _rand(3, 5, dtype=ember.float16, seed=1)
    bf = _rand(3, 5, dtype=ember.bfloat16, seed=2)

    def fn(x, h, bf):
        return (x.to(ember.float16), x.to(ember.bfloat16), x.to(ember.int32), x.to(ember.float64),
                (x > 0).to(ember.float32), h + 1, ember.exp(h), h * bf, bf.sum(1), h.to(ember.float32),
                ember.clone(x), ember.sigmoid(bf), h.mean(),
                # a half conversion inlined into its reader still rounds
                x.to(ember.float16).sum(0), x.to(ember.bfloat16) * 3, ember.softmax(h, -1))

    compiled_matches_eager(fn, x, h, bf)


def test_ops_without_lowering_become_extern_calls():
    x = _rand(3, 4)

    def fn(x):
        return ember.cumsum(ember.exp(x), 1) * 2, ember.sort(x, 1).values + 1

    compiled = compiled_matches_eager(fn, x)
    externs = [s for s in compiled.scheduler.steps if isinstance(s, ir.ExternKernel)]
    assert [e.op.name for e in externs] == ["cumsum", "sort"]
    assert externs[0].reason == "scan kernel (sequential)"


def test_inputs_in_another_layout_are_copied_into_the_example_layout():
    """Another layout than the example's is copied into it (609c63c); another shape, or any value for
    an expanded example (the kernels read one element along its stride-0 dim), still raises."""
    x = _rand(3, 4)
    compiled = compile_graph(make_fx(lambda t: t + 1)(x), [x])
    other = _rand(4, 3).t()
    assert_close(compiled(other), other + 1)
    with pytest.raises(ValueError, match="strides"):
        compiled(_rand(4, 3))
    row = _rand(1, 4).expand(3, 4)
    expanded = compile_graph(make_fx(lambda t: t + 1)(row), [row])
    with pytest.raises(ValueError, match="strides"):
        expanded(x)


def test_number_inputs_are_compiled_in_and_checked():
    x = _rand(3)
    compiled = compile_graph(make_fx(lambda t, k: t * k)(x, 3), [x, 3])
    assert_close(compiled(x, 3), x * 3)
    with pytest.raises(ValueError, match="compiled as the constant 3"):
        compiled(x, 4)


def test_the_tables():
    from ember._ops._registry import Op

    assert all(isinstance(op, Op) for op in lowering.lowerings)
    assert all(isinstance(op, Op) and isinstance(why, str) and why for op, why in lowering.fallbacks.items())
    assert not set(lowering.lowerings) & set(lowering.fallbacks)
    assert lowering.fallbacks[R["matmul"]].startswith("BLAS")
    assert lowering.fallbacks[R["multinomial"]] == "eager generator, program order"
    assert R["randn"] in lowering.lowerings  # in the kernels unless config.fallback_random (then NotLowered)
    with pytest.raises(ValueError, match="registered twice"):
        lowering.register_unary("exp")


def test_the_tables_cover_the_core_op_set():
    decompositions = pytest.importorskip("ember._inductor.aot.decompositions")
    missing = sorted(name for name in decompositions.CORE_OPS
                     if R[name] not in lowering.lowerings and R[name] not in lowering.fallbacks)
    assert missing == []


def test_extern_matmul_takes_transposed_and_sliced_views_without_a_copy():
    """A transposed, permuted or sliced view of a buffer reaches the BLAS as a strided tensor: no copy kernel."""

    def f(a, b, c):
        x = a * 2
        return (
            x.t() @ b,
            (x + 1).permute(1, 0) @ c,
            x.view(4, 4, 8)[1:3] @ c[:8].view(1, 8, 8),
            x.t()[:, 3:12] @ c.reshape(-1)[:45].view(9, 5),  # a reshape of contiguous memory is strided too
            a.t() @ c,
        )

    a, b, c = _rand(16, 8), _rand(16, 5, seed=1), _rand(16, 8, seed=2)
    compiled = compile_graph(make_fx(f)(a, b, c), [a, b, c])
    externs = [s for s in compiled.scheduler.steps if isinstance(s, ir.ExternKernel)]
    strided = [arg for k in externs for arg in k.args if isinstance(arg, ir.StridedArg)]
    assert len(externs) == 5 and len(strided) == 7
    assert str(strided[0]) == "buf0.as_strided((8, 16), (1, 8), 0)"
    copies = [s for s in compiled.scheduler.steps if not isinstance(s, ir.ExternKernel)]
    assert len(copies) == 1  # x and x + 1, in one kernel
    for got, want in zip(compiled(a, b, c), f(a, b, c), strict=True):
        assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_stack_times_matrix_is_one_product_and_its_result_is_returned_as_a_view():
    """``(b, n, k) @ (k, m)`` is one ``(b*n, k) @ (k, m)`` BLAS call (as eager linear does it); the
    reshaped result is returned as a view of the extern's tensor, not copied."""

    def f(a, w):
        return (a * 2) @ w, a.transpose(0, 1) @ w + 1, a @ w

    a, w = _rand(3, 5, 8), _rand(8, 4, seed=1)
    compiled = compile_graph(make_fx(f)(a, w), [a, w])
    externs = [s for s in compiled.scheduler.steps if isinstance(s, ir.ExternKernel)]
    assert [tuple(int(d) for d in k.outputs[0].sizes) for k in externs] == [(15, 4)] * 3
    assert str(externs[0].args[0]) == "buf0.as_strided((15, 8), (8, 1), 0)"  # a * 2, read as rows
    assert isinstance(compiled.graph.outputs[0], ir.StridedArg)  # no copy of the result
    assert isinstance(compiled.graph.outputs[2], ir.StridedArg)
    for got, want in zip(compiled(a, w), f(a, w), strict=True):
        assert_close(got, want, rtol=1e-5, atol=1e-5)
        assert got.stride() == want.stride()


def test_a_call_leaves_no_reference_cycles():
    """A compiled graph's call frees its intermediates at once (a cycle through the extern argument helper
    kept every call's tensors alive until the garbage collector ran: 75 MB a step for the encoder)."""
    import gc

    def f(a, w):
        h = (a * 2).transpose(0, 1) @ w  # an extern call reading an intermediate in scratch memory
        return (h.relu() @ w.t()).sum()

    a, w = _rand(6, 5, 8), _rand(8, 4, seed=1)
    compiled = compile_graph(make_fx(f)(a, w), [a, w])
    compiled(a, w)
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    try:
        for _ in range(3):
            got = compiled(a, w)
        assert gc.collect() == 0
    finally:
        if enabled:
            gc.enable()
    assert_close(got, f(a, w), rtol=1e-5, atol=1e-5)
