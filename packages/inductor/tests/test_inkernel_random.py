"""Random numbers computed inside compiled kernels (``config.fallback_random`` off, the default).

The oracle of the bits is the numpy Philox4x32-10 of ember-core (``ember.cuda.kernels.philox.philox4x32_10``,
checked there against the Random123 known-answer vectors): random node ``k`` reads the words ``W[m]``,
word ``m & 3`` of the block of counter ``(lo32(m >> 2), hi32(m >> 2), k, 0)`` under key
``(lo32(seed), hi32(seed))``; element ``i`` of a uniform is ``u = (W[i] >> 8) * 2**-24``, of a normal
Box-Muller of ``W[2i]`` and ``W[2i+1]``, with ``seed`` the draw of :func:`ember._inductor.inkernel_random.draw_seed` after ``ember.manual_seed``.
The distributions are checked with a binomial bound and a Kolmogorov-Smirnov test; ``fallback_random=True``
against eager mode's exact values.
"""

from __future__ import annotations

import math
import os

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember._inductor import config
from ember._inductor.aot.decompositions import inductor_decompositions
from ember._inductor.compile_fx import compile_fx, compile_fx_inner
from ember._inductor.inkernel_random import draw_seed
from ember.cuda.kernels.philox import philox4x32_10
from ember.fx.experimental.proxy_tensor import make_fx
from ember.testing import assert_close

if os.environ.get("EMBER_TEST_BACKEND", "cpu") not in ("cuda", "rocm"):
    # as test_triton_interpret.py: Triton runs in its interpreter (read when Triton is imported)
    os.environ.setdefault("TRITON_INTERPRET", "1")


@pytest.fixture(autouse=True)
def _strict():
    with config.patch(fallback_on_compile_error=False, fallback_random=False, triton_on_cpu=False):
        yield


def _reference_words(seed, count, ordinal):
    """The first ``count`` words ``W[0 .. count-1]`` of random node ``ordinal``'s stream: word ``m & 3`` of the
    Philox4x32-10 block of counter ``(lo32(m >> 2), hi32(m >> 2), ordinal, 0)``, key ``(lo32(seed), hi32(seed))``."""
    b = np.arange((count + 3) // 4, dtype=np.uint64)
    low = np.uint64(0xFFFFFFFF)
    counter = np.stack([b & low, b >> np.uint64(32), np.full(len(b), ordinal, np.uint64), np.zeros(len(b), np.uint64)], -1)
    s = np.uint64(seed % 2**64)
    key = np.array([int(s & low), int(s >> np.uint64(32))], np.uint64)
    return philox4x32_10(counter.astype(np.uint32), key.astype(np.uint32)).reshape(-1)[:count]


def _u24(words):
    return (words >> 8).astype(np.float32) * np.float32(2.0**-24)


def _reference_uniforms(seed, n, ordinal):
    """Float32 uniforms of elements ``0 .. n-1`` of a uniform random node ``ordinal``: ``W[i]``."""
    return _u24(_reference_words(seed, n, ordinal))


def _reference_normal_uniforms(seed, n, ordinal):
    """The two uniforms ``(u0, u1)`` of elements ``0 .. n-1`` of a normal random node: ``W[2i]``, ``W[2i+1]``."""
    words = _reference_words(seed, 2 * n, ordinal)
    return _u24(words[0::2]), _u24(words[1::2])


def _seed_after(manual):
    """The seed a compiled call draws right after ``ember.manual_seed(manual)``."""
    ember.manual_seed(manual)
    return draw_seed()


def _compiled(fn, *inputs):
    """``fn`` traced and compiled; the callable returns a tuple of its outputs."""
    gm = make_fx(fn, decomposition_table=inductor_decompositions())(*inputs)
    compiled = compile_fx_inner(gm, list(inputs))

    def run(*args):
        out = compiled(*args)
        return tuple(out) if isinstance(out, (tuple, list)) else (out,)

    return run


def _sources(tmp_path):
    return "\n".join(p.read_text() for p in sorted(tmp_path.rglob("*.txt")))


def test_uniforms_are_the_reference_philox_bits():
    x = ember.randn(3, 50)
    f = _compiled(lambda t: (ember.rand_like(t), ember.rand(7, 11) * 2, t.sin()), x)
    seed = _seed_after(123)
    ember.manual_seed(123)
    a, b, s = f(x)
    np.testing.assert_array_equal(a.numpy().ravel(), _reference_uniforms(seed, 150, 0))
    np.testing.assert_array_equal(b.numpy().ravel(), _reference_uniforms(seed, 77, 1) * 2)
    assert_close(s, x.sin())


def test_words_in_any_loop_order_and_five_streams_in_one_kernel():
    # a transposed read walks the stream out of order (the C++ memo of blocks misses); five random nodes
    # in one loop share the per-thread memos (stream & 3): each still reads its own words
    x = ember.randn(33, 40)

    def fn(t):
        out = t + ember.rand(40, 33).t()
        for _ in range(4):
            out = out * ember.rand(33, 40)
        return out

    f = _compiled(fn, x)
    seed = _seed_after(31)
    ember.manual_seed(31)
    (got,) = f(x)
    want = x.numpy() + _reference_uniforms(seed, 1320, 0).reshape(40, 33).T
    for k in range(1, 5):
        want = want * _reference_uniforms(seed, 1320, k).reshape(33, 40)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-6, atol=1e-6)


def test_bernoulli_mask_is_uniform_below_p():
    x = ember.ones(40, 30)
    f = _compiled(lambda t: ember.bernoulli(ember.empty(40, 30), 0.3) * t, x)
    seed = _seed_after(5)
    ember.manual_seed(5)
    (mask,) = f(x)
    want = (_reference_uniforms(seed, 1200, 0) < 0.3).astype(np.float32)
    np.testing.assert_array_equal(mask.numpy().ravel(), want)


def test_bernoulli_with_a_tensor_of_probabilities():
    p = ember.rand(20, 16, dtype=ember.float64)
    f = _compiled(lambda q: ember.bernoulli(q), p)
    seed = _seed_after(9)
    ember.manual_seed(9)
    (mask,) = f(p)
    want = _reference_uniforms(seed, 320, 0).astype(np.float64) < p.numpy().ravel()
    np.testing.assert_array_equal(mask.numpy().ravel(), want.astype(np.float64))


def test_randn_is_box_muller_of_a_word_pair():
    x = ember.zeros(64, 33)
    f = _compiled(lambda t: ember.randn_like(t) + t, x)
    seed = _seed_after(77)
    ember.manual_seed(77)
    (z,) = f(x)
    u0, u1 = _reference_normal_uniforms(seed, 64 * 33, 0)
    want = np.sqrt(-2.0 * np.log((1 - u0).astype(np.float64))) * np.cos((np.float32(2 * math.pi) * u1).astype(np.float64))
    np.testing.assert_allclose(z.numpy().ravel(), want, rtol=1e-5, atol=1e-5)


def test_same_seed_same_values_next_call_new_mask():
    x = ember.randn(256)
    f = _compiled(lambda t: F.dropout(t, 0.5, training=True), x)
    ember.manual_seed(0)
    first = f(x)[0].numpy().copy()
    second = f(x)[0].numpy().copy()
    ember.manual_seed(0)
    again = f(x)[0].numpy()
    np.testing.assert_array_equal(first, again)
    assert (first != second).any()


def test_mask_mean_within_a_binomial_bound():
    n, p = 200_000, 0.3
    x = ember.ones(n)
    f = _compiled(lambda t: ember.bernoulli(ember.empty(n), 1 - p) * t, x)
    ember.manual_seed(1)
    for _ in range(3):
        kept = float(f(x)[0].numpy().mean())
        assert abs(kept - (1 - p)) < 5 * math.sqrt(p * (1 - p) / n), kept


def test_rand_passes_kolmogorov_smirnov():
    stats = pytest.importorskip("scipy.stats")
    x = ember.zeros(50_000)
    f = _compiled(lambda t: ember.rand_like(t) + t, x)
    ember.manual_seed(2)
    u = f(x)[0].numpy()
    assert 0 <= u.min() and u.max() < 1
    assert stats.kstest(u, "uniform").pvalue > 1e-3
    z = _compiled(lambda t: ember.randn_like(t) + t, x)(x)[0].numpy()
    assert stats.kstest(z, "norm").pvalue > 1e-3


def test_dropout_gradient_uses_the_forward_mask():
    class Drop(ember.nn.Module):
        def forward(self, t):
            return F.dropout(t, 0.4, training=True)

    x = ember.randn(32, 48, requires_grad=True)
    f = compile_fx(Drop(), [x])
    ember.manual_seed(3)
    y = f(x)
    y.sum().backward()
    assert f.fallbacks == []
    xs, ys, gs = x.detach().numpy(), y.detach().numpy(), x.grad.numpy()
    nonzero = xs != 0
    np.testing.assert_allclose(gs[nonzero], ys[nonzero] / xs[nonzero], rtol=1e-6)
    assert 0 < (ys == 0).mean() < 1


def test_dropout_is_one_fused_kernel_without_an_extern_draw(tmp_path):
    class Net(ember.nn.Module):
        def forward(self, t):
            return F.dropout(t.sin(), 0.2, training=True) * 3

    x = ember.randn(8, 16, requires_grad=True)
    with config.patch(debug=True, debug_dir=str(tmp_path)):
        f = compile_fx(Net(), [x])
        f(x).sum().backward()
    text = _sources(tmp_path)
    assert "philox_rand" in text and "ember_philox_rand(" in text
    assert "extern bernoulli" not in text and "bernoulli" not in (next(tmp_path.rglob("*05_loop_ir.txt")).read_text())
    scheduled = next(tmp_path.rglob("*06_scheduled.txt")).read_text()
    assert scheduled.count("kernel ") == 1, scheduled


def test_fallback_random_gives_eager_values():
    def fn(t):
        return F.dropout(t, 0.5, training=True) + ember.rand_like(t) + ember.randn(t.shape)

    x = ember.randn(10, 12)
    with config.patch(fallback_random=True):
        f = _compiled(fn, x)
        ember.manual_seed(4)
        (got,) = f(x)
    ember.manual_seed(4)
    np.testing.assert_array_equal(got.numpy(), fn(x).numpy())


def test_explicit_generator_stays_an_eager_call():
    x = ember.randn(50)
    g = ember.Generator().manual_seed(11)
    f = _compiled(lambda t: t + ember.rand(50, generator=g), x)
    g.manual_seed(11)
    (got,) = f(x)
    g.manual_seed(11)
    np.testing.assert_array_equal(got.numpy(), (x + ember.rand(50, generator=g)).numpy())


def test_dynamic_sizes_index_follows_the_symbolic_size():
    from _dynamic_cases import compile_dynamic

    import ember._inductor.dynamic_compile as dynamic_compile

    ember._dynamo.reset()
    try:
        compiled = compile_dynamic(lambda t: t * ember.rand_like(t), [ember.ones(12, 40)], [0])
        assert callable(compiled.accepts), dynamic_compile.last_fallback_reason
        assert "480" not in compiled.graphs[0].source
        for rows in (12, 3, 29):
            y = ember.ones(rows, 40)
            assert compiled.accepts((y,))
            seed = _seed_after(rows)
            ember.manual_seed(rows)
            (got,) = compiled(y)
            np.testing.assert_array_equal(got.numpy().ravel(), _reference_uniforms(seed, rows * 40, 0))
    finally:
        ember._dynamo.reset()


def test_triton_kernels_give_the_cpp_bits():
    if os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("needs Triton's interpreter (TRITON_INTERPRET=1 before Triton is imported)")
    pytest.importorskip("triton")

    def fn(t):
        return F.dropout(t, 0.3, training=True) * 2 + ember.rand_like(t), ember.randn_like(t)

    x = ember.randn(9, 37)
    cpp = _compiled(fn, x)
    with config.patch(triton_on_cpu=True):
        tri = _compiled(fn, x)
    ember.manual_seed(8)
    a = cpp(x)
    ember.manual_seed(8)
    b = tri(x)
    np.testing.assert_array_equal(a[0].numpy(), b[0].numpy())
    np.testing.assert_allclose(a[1].numpy(), b[1].numpy(), rtol=1e-5, atol=1e-5)
