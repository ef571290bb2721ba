"""Extern matmul calls of compiled C++ graphs (the array fast path gives eager's values for every layout) and
the scratch memory a compiled graph reuses from one call to the next."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember._inductor.codegen import wrapper
from ember._inductor.compile_fx import compile_fx
from ember.fx.experimental.proxy_tensor import make_fx


@pytest.fixture
def fast_products(monkeypatch):
    """The number of products the array fast path computed (not dispatched through ``ember.matmul``)."""
    taken = []
    original = wrapper.CompiledGraph._blas_product

    def counting(self, kernel, ptrs, values):
        result = original(self, kernel, ptrs, values)
        taken.append(result is not None)
        return result

    monkeypatch.setattr(wrapper.CompiledGraph, "_blas_product", counting)
    return taken


def _compiled(fn, *inputs):
    compiled = compile_fx(make_fx(fn)(*inputs), list(inputs))
    assert not compiled.fallbacks
    return compiled


CASES = {
    # a linear layer: the weight's transposed view reaches BLAS as a transposed operand
    "linear": (lambda x, w: ember.relu(x @ w.t() + 1), [(64, 32), (48, 32)]),
    # attention scores: batched operands sliced out of one projection, the second transposed
    "batched_strided": (lambda q, k: (q[..., :8] * 0.5) @ k[..., 8:].transpose(-2, -1), [(2, 3, 16, 16), (2, 3, 16, 16)]),
    # a stack of rows times one matrix (folded into one product)
    "rows_times_matrix": (lambda x, w: ember.tanh(x) @ w, [(4, 10, 12), (12, 6)]),
    # an intermediate in scratch memory read at an offset (a slice of a kernel's output)
    "offset": (lambda x, w: (x * 2)[3:, 1:] @ w, [(20, 9), (8, 5)]),
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("dtype", [ember.float32, ember.float64])
def test_products_match_eager_through_the_array_path(name, dtype, fast_products):
    fn, shapes = CASES[name]
    gen = np.random.default_rng(0)
    inputs = [ember.from_numpy(gen.standard_normal(s)).to(dtype) for s in shapes]
    got, want = _compiled(fn, *inputs)(*inputs), fn(*inputs)
    assert fast_products and all(fast_products)
    tol = 1e-5 if dtype == ember.float32 else 1e-12
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=tol, atol=tol)


def test_integer_products_are_dispatched_to_the_eager_op(fast_products):
    a = ember.randint(-5, 5, (6, 7))
    b = ember.randint(-5, 5, (7, 3))
    fn = lambda x, y: (x + 1) @ y  # noqa: E731
    got = _compiled(fn, a, b)(a, b)
    assert fast_products == [False]
    np.testing.assert_array_equal(got.numpy(), fn(a, b).numpy())


@pytest.mark.parametrize("case", ["half_product", "dispatched_op"])
def test_extern_calls_record_no_graph(case, fast_products):
    # the runner's extern calls run without grad, a product the array path refuses (float16) too
    from ember._inductor.codegen.wrapper import compile_graph

    if case == "half_product":
        fn = lambda x, w: (ember.tanh(x) @ w,)  # noqa: E731
        x, w = ember.randn(6, 5).half(), ember.randn(5, 3).half()
    else:  # an index with a tensor of positions: an extern call through the dispatcher
        fn = lambda x, w: (x[ember.tensor([2, 0, 2])], w * 2)  # noqa: E731
        x, w = ember.randn(4, 3), ember.randn(3)
    compiled = compile_graph(make_fx(fn)(x, w), [x, w])
    assert any(kind == "extern" for kind, _ in compiled._steps)
    x.requires_grad_(), w.requires_grad_()
    got = compiled(x, w)[0]
    assert not got.requires_grad and got.grad_fn is None
    with ember.no_grad():
        want = fn(x, w)[0]
    np.testing.assert_allclose(got.float().numpy(), want.float().numpy(), rtol=1e-3, atol=1e-3)
    assert fast_products == ([False] if case == "half_product" else [])


def test_training_step_gradients_match_eager_through_the_array_path(fast_products):
    ember.manual_seed(0)
    model = ember.nn.Sequential(ember.nn.Linear(16, 32), ember.nn.GELU(), ember.nn.Linear(32, 4))
    x = ember.randn(8, 16)
    compiled = compile_fx(model, [x])
    assert not compiled.fallbacks
    params = list(model.parameters())
    got = ember.autograd.grad(compiled(x).square().sum(), params)
    want = ember.autograd.grad(model(x).square().sum(), params)
    assert fast_products and all(fast_products)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-4, atol=1e-5)


def _scratch_graph():
    """A graph whose intermediates live in scratch memory: kernels around an extern product."""
    from ember._inductor.codegen.wrapper import compile_graph

    def fn(x, w):
        h = ember.tanh(x * 2)
        return (ember.relu(h @ w) + h.sum(),)

    x, w = ember.randn(32, 16), ember.randn(16, 8)
    return fn, compile_graph(make_fx(fn)(x, w), [x, w]), w


def test_scratch_memory_is_reused_and_earlier_outputs_keep_their_values():
    fn, compiled, w = _scratch_graph()
    assert compiled._plan.scratch, "the graph should keep an intermediate in scratch memory"
    x1, x2 = ember.randn(32, 16), ember.randn(32, 16)
    (first,) = compiled(x1, w)
    pooled = [id(a) for a in compiled._scratch_pool[0][1].values()]
    kept = first.numpy().copy()
    (second,) = compiled(x2, w)
    assert [id(a) for a in compiled._scratch_pool[0][1].values()] == pooled  # the same arrays again
    np.testing.assert_array_equal(first.numpy(), kept)
    np.testing.assert_allclose(second.numpy(), fn(x2, w)[0].numpy(), rtol=1e-5, atol=1e-5)


def test_scratch_that_an_output_views_is_not_reused():
    _, compiled, _ = _scratch_graph()
    scratch = {0: np.empty(64, dtype=np.uint8)}
    view = ember.from_numpy(scratch[0][8:40].view(np.float32))
    compiled._give_back_scratch(compiled._plan.scratch, scratch, [view])
    assert compiled._scratch_pool == []
    compiled._give_back_scratch(compiled._plan.scratch, scratch, [ember.zeros(3)])
    assert len(compiled._scratch_pool) == 1


def test_extern_ops_of_fixed_size_graphs_run_their_cpu_kernel_without_the_dispatcher(monkeypatch):
    """An extern op (here embedding_bag) of a graph of fixed sizes runs its CPU kernel directly, with eager's
    values; under a dispatch mode (the profiler) it goes through the dispatcher, so the mode sees it."""
    from ember._inductor.codegen import wrapper

    direct = []
    real = wrapper._run_direct
    monkeypatch.setattr(wrapper, "_run_direct", lambda op, *args: (direct.append(op.name), real(op, *args))[1])
    weight = ember.randn(10, 4)
    indices = ember.tensor([1, 2, 4, 5, 4, 3, 2, 9])
    offsets = ember.tensor([0, 3, 3])

    def bags(w, i, o):
        return ember.nn.functional.embedding_bag(i, w, o, mode="sum") * 2

    compiled = ember.compile(bags, fullgraph=True)
    np.testing.assert_array_equal(compiled(weight, indices, offsets).numpy(), bags(weight, indices, offsets).numpy())
    assert "embedding_bag" in direct
    direct.clear()
    with ember.profiler.profile() as prof:
        compiled(weight, indices, offsets)
    assert direct == []
    assert any(e.key.endswith("embedding_bag") for e in prof.key_averages())  # (named as PyTorch names it)
