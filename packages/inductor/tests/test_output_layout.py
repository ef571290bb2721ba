"""Compiled outputs laid out as eager's results where those are dense permutations."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember._inductor.compile_fx import compile_fx
from ember._inductor.graph import dense_strides
from ember.fx.experimental.proxy_tensor import make_fx


def _compile(fn, *inputs):
    compiled = compile_fx(make_fx(fn)(*inputs), list(inputs))
    assert not compiled.fallbacks
    return compiled


def test_dense_strides():
    x = ember.empty(2, 3, 4)
    assert dense_strides(x) is None  # contiguous
    assert dense_strides(x.permute(2, 0, 1)) == [1, 12, 4]
    assert dense_strides(x[:, :, ::2]) is None  # gaps
    assert dense_strides(x[1:]) is None  # a storage offset
    assert dense_strides(ember.empty(0, 3).t()) is None


@pytest.mark.parametrize("dims", [(0, 1), (1, 2)])
def test_rot90_output_is_eager_transposed_layout(dims):
    x = ember.randn(3, 4, 5)
    fn = lambda t: ember.rot90(t, 1, dims)  # noqa: E731
    got, want = _compile(fn, x)(x), fn(x)
    assert tuple(got.stride()) == tuple(want.stride())
    np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_empty_strided_keeps_the_requested_strides_and_later_kernels_read_them():
    x = ember.randn(3, 4)

    def fn(t):
        buf = ember.empty_strided((3, 4), (1, 3))
        return buf, ember.zeros_like(buf) + t  # a kernel reading a value laid out by an extern

    compiled = _compile(fn, x)
    for _ in range(2):  # the second call: the run plan as first built and as loaded from the cache
        got = compiled(x)
        assert tuple(got[0].stride()) == (1, 3)
        np.testing.assert_array_equal(got[1].numpy(), x.numpy())


def test_column_major_lapack_results_keep_eager_strides():
    a = ember.randn(5, 5, dtype=ember.float64)
    a = a @ a.T + 5 * ember.eye(5, dtype=ember.float64)
    fn = lambda t: ember.linalg.eigh(t * 2)  # noqa: E731
    got, want = _compile(fn, a)(a), fn(a)
    for g, w in zip(got, want, strict=True):
        assert tuple(g.stride()) == tuple(w.stride())
        np.testing.assert_allclose(np.abs(g.numpy()), np.abs(w.numpy()), rtol=1e-10, atol=1e-12)
