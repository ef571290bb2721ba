"""The loop IR: index helpers, expression nodes, substitution and how buffers print."""

from __future__ import annotations

import pytest
import sympy

import ember
from ember._inductor import ir
from ember._inductor.graph import GraphLowering
from ember.fx.experimental.proxy_tensor import make_fx


def test_floordiv_and_modindex_fold_constants_and_trivial_divisors():
    i0 = ir.index_vars(1)[0]
    assert ir.FloorDiv(sympy.Integer(17), sympy.Integer(5)) == 3
    assert ir.ModIndex(sympy.Integer(17), sympy.Integer(5)) == 2
    assert ir.FloorDiv(i0, sympy.Integer(1)) == i0
    assert ir.ModIndex(i0, sympy.Integer(1)) == 0
    assert isinstance(ir.FloorDiv(i0, sympy.Integer(4)), ir.FloorDiv)


def test_contiguous_strides_and_flat_index():
    strides = ir.contiguous_strides([2, 3, 4])
    assert strides == [12, 4, 1]
    assert all(isinstance(s, sympy.Integer) for s in strides)
    i0, i1, i2 = ir.index_vars(3)
    assert ir.flat_index([i0, i1, i2], strides) == 12 * i0 + 4 * i1 + i2


def test_op_rejects_names_outside_the_closed_list():
    with pytest.raises(ValueError, match="unknown op name 'frobnicate'"):
        ir.Op("frobnicate", (), ember.float32)
    with pytest.raises(ValueError, match="unknown reduction type"):
        ir.Reduction([1], [1], "median", ir.Constant(0.0, ember.float32))


def test_substitute_replaces_index_symbols_simultaneously():
    buf = ir.InputBuffer("x", ember.float32, [3, 4], [4, 1], position=0)
    i0, i1 = ir.index_vars(2)
    body = ir.Op("add", (ir.Load(buf, (i0, i1)), ir.IndexExpr(i1, ember.float32)), ember.float32)
    swapped = ir.substitute(body, {i0: i1, i1: i0})
    assert str(swapped) == "add(load(x, i0 + 4*i1), index(i0, float32))"
    assert ir.count_ops(swapped) == 1
    assert [ld.index for ld in ir.loads(swapped)] == [(i1, i0)]


def test_buffers_print_their_layout_and_loop_body():
    x = ember.randn(4, 6)
    gm = make_fx(lambda a: (ember.exp(a) + 1).sum(1))(x)
    g = GraphLowering(gm, [x]).run()
    text = str(g).splitlines()
    assert text[0] == "arg0_1: float32[4, 6] = input 0"
    assert text[1] == "buf0: float32[4, 6] = pointwise(i0, i1: exp(load(arg0_1, 6*i0 + i1)))"
    assert text[2] == "buf1: float32[4, 6] = pointwise(i0, i1: add(load(buf0, 6*i0 + i1), constant(1.0, float32)))"
    assert text[3] == "buf2: float32[4] = reduction_sum(i0 | r0 < 6: load(buf1, 6*i0 + r0))"
    assert text[4] == "return (buf2,)"


def test_input_buffers_keep_the_real_strides():
    x = ember.randn(6, 4).t()
    gm = make_fx(lambda a: a * 2)(x)
    g = GraphLowering(gm, [x]).run()
    assert g.inputs[0].strides == [1, 4]
    assert str(g.inputs[0]) == "arg0_1: float32[4, 6](strides 1, 4) = input 0"
    assert "load(arg0_1, i0 + 4*i1)" in str(g.buffers[0])


def test_extern_kernels_print_the_op_and_the_reason():
    a, b = ember.randn(3, 4), ember.randn(4, 5)
    gm = make_fx(lambda x, y: ember.matmul(x, y))(a, b)
    g = GraphLowering(gm, [a, b]).run()
    kernel = g.buffers[0]
    assert isinstance(kernel, ir.ExternKernel)
    assert str(kernel) == "buf1 = extern matmul(arg0_1, arg1_1)  # BLAS (a tuned matrix-multiply library)"
    assert str(kernel.outputs[0]) == "buf1: float32[3, 5] = extern0[]"


def test_flat_index_folds_a_split_dim_merged_back():
    """``b*c*(x // b) + c*(x % b)`` is ``c*x``: a reshape of a contiguous buffer reads it contiguously."""
    x0, x1, x2 = ir.index_vars(3)
    merged = ir.flat_index((ir.FloorDiv(x0, 128), ir.ModIndex(x0, 128), x1), (32768, 256, 1))
    assert merged == 256 * x0 + x1
    nested = ir.flat_index((ir.FloorDiv(64 * x0 + x1, 16), ir.ModIndex(64 * x0 + x1, 16)), (16, 1))
    assert nested == 64 * x0 + x1
    # a permuted split (strides not b*c and c) keeps its division: it is not a contiguous read
    kept = ir.flat_index((ir.FloorDiv(x0, 16), ir.ModIndex(x0, 16), x2), (256, 32768, 1))
    assert kept.has(ir.FloorDiv) and kept.has(ir.ModIndex)
    for value in range(0, 300, 7):  # the fold is exact: same offsets as the unfolded formula
        point = {x0: value, x1: 3, x2: 5}
        assert int(merged.subs(point)) == 32768 * (value // 128) + 256 * (value % 128) + 3
