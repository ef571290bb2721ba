"""The scheduler's passes: inlining rules, kernel grouping, local values and buffer reuse."""

from __future__ import annotations

import logging

import ember
from ember._inductor import ir
from ember._inductor.graph import GraphLowering
from ember._inductor.scheduler import FusedKernel, Scheduler
from ember.fx.experimental.proxy_tensor import make_fx


def schedule(fn, *inputs):
    gm = make_fx(fn)(*inputs)
    return Scheduler(GraphLowering(gm, list(inputs)).run())


def kernels(s):
    return [k for k in s.steps if isinstance(k, FusedKernel)]


def rules(s):
    return [rule for rule, _ in s.decisions]


def test_single_use_and_cheap_producers_are_inlined():
    x = ember.randn(8, 16)
    def fn(a):
        b = a + 2
        return (ember.exp(a) + 1) * b + b

    s = schedule(fn, x)
    (kernel,) = kernels(s)
    assert len(kernel.nodes) == 1
    assert "inline_single_use" in rules(s) and "inline_cheap" in rules(s)
    # the inlined body reads only the input
    assert {ld.buffer.name for ld in ir.loads(kernel.nodes[0].body)} == {"arg0_1"}


def test_expensive_producers_read_many_times_stay_in_memory():
    x = ember.randn(8, 16)

    def fn(a):
        y = ember.exp(ember.sin(ember.cos(ember.tanh(ember.sqrt(ember.abs(a) + 1)))))
        return y + y.t().t() + y * 2 + y * 3 + y * 4 + y * 5

    s = schedule(fn, x)
    kept = [d for r, d in s.decisions if r == "keep"]
    assert any("exceeds the inline budget" in d for d in kept)


def test_reading_another_element_starts_a_new_kernel():
    x = ember.randn(16, 16)

    def fn(a):
        y = ember.exp(ember.sin(ember.cos(ember.tanh(ember.sqrt(ember.abs(a) + 1)))))
        return y + y.t(), y * 2, y * 3, y * 4, y * 5, y * 6

    s = schedule(fn, x)
    assert any(r == "no_fusion" and "reads" in d for r, d in s.decisions)
    assert len(kernels(s)) == 2


def test_siblings_over_the_same_ranges_share_one_kernel():
    x, y = ember.randn(8, 16), ember.randn(8, 16)
    s = schedule(lambda a, b: (ember.exp(a), ember.sin(b), a * b), x, y)
    (kernel,) = kernels(s)
    assert len(kernel.nodes) == 3
    assert rules(s).count("horizontal") == 2


def test_reduction_prologue_and_epilogue_fuse():
    x = ember.randn(8, 16)
    s = schedule(lambda a: (ember.exp(a * 2).sum(1, keepdim=True) + 1,), x)
    (kernel,) = kernels(s)
    reduction, epilogue = kernel.nodes
    assert reduction.is_reduction and reduction.local  # never stored: the epilogue reads it in-register
    assert "exp(mul(load(arg0_1" in str(reduction.body)
    assert "epilogue" in rules(s)
    assert str(kernel).startswith("kernel kernel0 over (x0 < 8):")


def test_identical_computations_are_computed_once():
    x = ember.randn(8, 16)
    s = schedule(lambda a: (a.sum(1) * a.sum(1),), x)
    assert "common_subexpression" in rules(s)
    (kernel,) = kernels(s)
    assert sum(n.is_reduction for n in kernel.nodes) == 1


def test_freed_buffers_give_their_memory_to_later_buffers_of_the_same_size():
    x, w = ember.randn(16, 16), ember.randn(16, 16)

    def fn(a, w):
        h = ember.matmul(ember.exp(a), w)
        h = ember.matmul(ember.exp(h), w)
        return ember.matmul(ember.exp(h), w)

    s = schedule(fn, x, w)
    reuse = [d for r, d in s.decisions if r == "reuse"]
    assert reuse, s.decisions
    assert s.storage["buf3"] == s.storage["buf6"] == "buf0"
    assert "memory reuse: buf3 -> buf0, buf6 -> buf0" in str(s)


def test_decisions_are_logged(caplog):
    x = ember.randn(4, 4)
    with caplog.at_level(logging.DEBUG, logger="ember._inductor.scheduler"):
        schedule(lambda a: ember.exp(a) + 1, x)
    assert any("inline_single_use: buf0" in r.getMessage() for r in caplog.records)


def test_extern_calls_end_a_kernel():
    x, w = ember.randn(8, 8), ember.randn(8, 8)
    s = schedule(lambda a, w: ember.exp(ember.matmul(ember.exp(a), w)), x, w)
    kinds = [type(step).__name__ for step in s.steps]
    assert kinds == ["FusedKernel", "ExternKernel", "FusedKernel"]


def test_a_node_joins_an_earlier_kernel_over_its_ranges_when_it_reads_nothing_in_between():
    x, y = ember.randn(8, 16), ember.randn(5, 7)
    s = schedule(lambda a, b: (a.sum(1), b.sum(), (a * 2).amax(1), ember.exp(b.sum()) + a.sum(1)), x, y)
    first = kernels(s)[0]
    assert len([n for n in first.nodes if n.is_reduction]) >= 2
    assert any("moved up past steps it does not read" in d for _, d in s.decisions)


def _padded_pool(a):
    # padding and pooling: index expressions with Max/Min, inlined at many loads
    y = ember.nn.functional.pad(ember.relu(a) * 2, (1, 1, 1, 1))
    z = ember.nn.functional.max_pool2d(y, 3, stride=1) + y[:, :, 1:-1, 1:-1].exp()
    return ember.nn.functional.avg_pool2d(z, 2) + z.mean(), z.sum(dim=1)


def _bodies_and_loads(s):
    bodies = list(s.bodies.values()) + [n.body for k in kernels(s) for n in k.nodes]
    return bodies, [ld for b in bodies for ld in ir.loads(b)]


def test_memoised_structural_keys_equal_ir_structural_key():
    """StructuralKeys (memoised, each index printed once) gives ir.structural_key's key for every
    expression and subexpression, asked in any order and more than once."""
    from ember._inductor.codegen.cpp import _subexpressions
    from ember._inductor.scheduler import StructuralKeys

    s = schedule(_padded_pool, ember.randn(2, 3, 8, 8))
    bodies, _ = _bodies_and_loads(s)
    exprs = [e for b in bodies for e in _subexpressions(b)]
    assert len(exprs) > 50
    keys = StructuralKeys()
    for e in exprs + exprs[::-1]:
        assert keys(e) == ir.structural_key(e)


def test_memoised_substitution_equals_ir_substitute():
    """ir.substitute with the scheduler's memo (index rewrites looked up by value) builds what it builds
    without one, with and without a load function, including rewrites memoised from other bodies."""
    import sympy

    s = schedule(_padded_pool, ember.randn(2, 3, 8, 8))
    bodies, loads = _bodies_and_loads(s)
    rewrites = {}
    for body in bodies * 2:
        rank = max((len(ld.index) for ld in ir.loads(body)), default=0)
        xs = ir.index_vars(rank)
        mapping = {x: sympy.Integer(1) + 2 * x for x in xs}

        def load_fn(load, index):
            return ir.Op("neg", (ir.Load(load.buffer, index),), load.dtype) if load.buffer.name.endswith("0") else None

        for fn in (None, load_fn):
            assert ir.structural_key(ir.substitute(body, mapping, fn, rewrites=rewrites)) == \
                ir.structural_key(ir.substitute(body, mapping, fn))
    assert loads
