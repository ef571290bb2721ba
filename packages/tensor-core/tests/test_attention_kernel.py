"""scaled_dot_product_attention's CPU kernel (csrc/attention.cpp) against a float64 numpy oracle.

Calls without a mask other than the causal one and without dropout run ``ember._C.attention_forward`` (blocks of
64 query rows, numpy's BLAS for the products); the others keep the numpy path. The gradient kernel is tested in
ember-autograd's test_nn_rows_backward.py.
"""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.nn.functional as F


def _oracle(q, k, v, causal, scale=None):
    q, k, v = (a.astype(np.float64) for a in (q, k, v))
    scale = 1.0 / np.sqrt(q.shape[-1]) if scale is None else scale
    s = q @ np.swapaxes(k, -1, -2) * scale
    if causal:
        s = np.where(np.tri(s.shape[-2], s.shape[-1], dtype=bool), s, -np.inf)
    w = np.exp(s - s.max(-1, keepdims=True))
    return (w / w.sum(-1, keepdims=True)) @ v


def _spy(monkeypatch):
    calls = []
    kernel = ember._C.attention_forward
    monkeypatch.setattr(ember._C, "attention_forward", lambda *a: calls.append(1) or kernel(*a))
    return calls


_SHAPES = [  # (batch, L, S, E, Ev): blocks of 64 rows cut at 64 and 128; L != S; no batch dims; one row
    ((2, 3), 9, 7, 8, 5),
    ((2,), 130, 130, 16, 16),
    ((), 65, 40, 4, 6),
    ((3,), 1, 5, 3, 2),
]


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", _SHAPES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_kernel_matches_the_oracle(causal, shape, dtype, monkeypatch):
    batch, L, S, E, Ev = shape
    rng = np.random.default_rng(0)
    q, k = rng.standard_normal(batch + (L, E)).astype(dtype), rng.standard_normal(batch + (S, E)).astype(dtype)
    v = rng.standard_normal(batch + (S, Ev)).astype(dtype)
    calls = _spy(monkeypatch)
    out = F.scaled_dot_product_attention(ember.tensor(q), ember.tensor(k), ember.tensor(v), is_causal=causal,
                                         scale=0.3).numpy()
    assert calls
    tol = {"rtol": 2e-5, "atol": 2e-6} if dtype == np.float32 else {"rtol": 1e-12, "atol": 1e-13}
    assert out.dtype == dtype and out.shape == batch + (L, Ev)
    np.testing.assert_allclose(out, _oracle(q, k, v, causal, 0.3), **tol)


def test_head_views_are_read_in_place_and_odd_layouts_copied(monkeypatch):
    # q/k/v as (B, H, T, D) views of a (B, T, H, D) array (the usual split of a fused projection), and every
    # other feature of them (a column stride of 2: the kernel refuses it and gets contiguous copies)
    rng = np.random.default_rng(1)
    x = ember.tensor(rng.standard_normal((2, 10, 3, 8)).astype(np.float32))
    heads = x.transpose(1, 2)
    calls = _spy(monkeypatch)
    out = F.scaled_dot_product_attention(heads, heads, heads, is_causal=True).numpy()
    h = heads.numpy()
    np.testing.assert_allclose(out, _oracle(h, h, h, True), rtol=2e-5, atol=2e-6)
    odd = heads[..., ::2]
    out = F.scaled_dot_product_attention(odd, odd, odd).numpy()
    np.testing.assert_allclose(out, _oracle(h[..., ::2], h[..., ::2], h[..., ::2], False), rtol=2e-5, atol=2e-6)
    assert len(calls) == 3  # the refused call and its retry


def test_results_do_not_depend_on_the_thread_count():
    rng = np.random.default_rng(2)
    q, k, v = (ember.tensor(rng.standard_normal((4, 4, 150, 32)).astype(np.float32)) for _ in range(3))
    previous = ember.get_num_threads()
    try:
        outs = []
        for threads in (1, 2):
            ember.set_num_threads(threads)
            outs.append(F.scaled_dot_product_attention(q, k, v, is_causal=True).numpy())
    finally:
        ember.set_num_threads(previous)
    assert np.array_equal(outs[0], outs[1])


def test_half_inputs_compute_in_float32(monkeypatch):
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((2, 6, 4)).astype(np.float16) for _ in range(3))
    calls = _spy(monkeypatch)
    out = F.scaled_dot_product_attention(ember.tensor(q), ember.tensor(k), ember.tensor(v), is_causal=True).numpy()
    assert calls and out.dtype == np.float16
    np.testing.assert_allclose(out, _oracle(q, k, v, True), rtol=2e-3, atol=2e-3)


def test_masks_dropout_and_broadcast_batches_keep_the_numpy_path(monkeypatch):
    calls = _spy(monkeypatch)
    rng = np.random.default_rng(4)
    q, k, v = (rng.standard_normal((2, 5, 4)).astype(np.float32) for _ in range(3))
    mask = np.tril(np.ones((5, 5), dtype=bool))
    out = F.scaled_dot_product_attention(ember.tensor(q), ember.tensor(k), ember.tensor(v),
                                         attn_mask=ember.tensor(mask)).numpy()
    np.testing.assert_allclose(out, _oracle(q, k, v, True), rtol=2e-5, atol=2e-6)
    out = F.scaled_dot_product_attention(ember.tensor(q), ember.tensor(k[:1]), ember.tensor(v[:1])).numpy()
    np.testing.assert_allclose(out, _oracle(q, k[:1], v[:1], False), rtol=2e-5, atol=2e-6)
    F.scaled_dot_product_attention(ember.tensor(q), ember.tensor(k), ember.tensor(v), dropout_p=0.5)
    assert not calls


def test_kernel_errors_name_the_problem():
    from ember._ops import _blas_threads

    gemm = _blas_threads.cblas_gemm(np.dtype(np.float32))
    if gemm is None:
        pytest.skip("numpy's BLAS is not an OpenBLAS whose cblas gemm ember finds (the kernel is not used)")
    fn, ilp64 = gemm
    q = np.zeros((2, 3, 4), np.float32)
    with pytest.raises(ValueError, match="batch shape"):
        ember._C.attention_forward(fn, ilp64, q, np.zeros((3, 3, 4), np.float32), q, 1.0, False, 1)
    with pytest.raises(ValueError, match="dtype"):
        ember._C.attention_forward(fn, ilp64, q, q.astype(np.float64), q, 1.0, False, 1)
    with pytest.raises(ValueError, match="threads"):
        ember._C.attention_forward(fn, ilp64, q, q, q, 1.0, False, 0)
