"""ember.nn.MultiheadAttention and the Transformer modules against numpy references: forward values,
masks, weight averaging, shapes, initialisation, errors."""

import copy
import math

import numpy as np
import pytest

import ember
import ember.nn as nn

E, H = 6, 2


def _np(t):
    return t.detach().numpy()


def _softmax(x):
    x = x - x.max(axis=-1, keepdims=True)
    e = np.exp(x)
    return e / e.sum(axis=-1, keepdims=True)


def _mha_ref(m, q, k, v, additive_mask=None):
    """Numpy multi-head attention on batch-first arrays (N, L, E); ``additive_mask`` broadcastable to
    (N, H, L, S). Returns the output and the per-head weights (N, H, L, S)."""
    if m._qkv_same_embed_dim:
        wq, wk, wv = np.split(_np(m.in_proj_weight), 3)
    else:
        wq, wk, wv = _np(m.q_proj_weight), _np(m.k_proj_weight), _np(m.v_proj_weight)
    bq = bk = bv = 0.0
    if m.in_proj_bias is not None:
        bq, bk, bv = np.split(_np(m.in_proj_bias), 3)
    Q, K, V = q @ wq.T + bq, k @ wk.T + bk, v @ wv.T + bv
    if m.bias_k is not None:
        n = q.shape[0]
        K = np.concatenate([K, np.broadcast_to(_np(m.bias_k)[0], (n, 1, m.embed_dim))], axis=1)
        V = np.concatenate([V, np.broadcast_to(_np(m.bias_v)[0], (n, 1, m.embed_dim))], axis=1)
    n, lq, _ = Q.shape
    hd = m.head_dim

    def heads(x):
        return x.reshape(n, x.shape[1], m.num_heads, hd).transpose(0, 2, 1, 3)

    Qh, Kh, Vh = heads(Q), heads(K), heads(V)
    scores = Qh @ Kh.transpose(0, 1, 3, 2) / math.sqrt(hd)
    if additive_mask is not None:
        scores = scores + additive_mask
    w = _softmax(scores)
    out = (w @ Vh).transpose(0, 2, 1, 3).reshape(n, lq, m.embed_dim)
    out = out @ _np(m.out_proj.weight).T
    if m.out_proj.bias is not None:
        out = out + _np(m.out_proj.bias)
    return out, w


def _randomise(m, seed=0):
    rng = np.random.default_rng(seed)
    with ember.no_grad():
        for p in m.parameters():
            p.copy_(ember.from_numpy(rng.standard_normal(tuple(p.shape)).astype(np.float32) * 0.5))


def _arr(*shape, seed=1):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def test_forward_matches_numpy_reference():
    m = nn.MultiheadAttention(E, H, batch_first=True)
    _randomise(m)
    q, k, v = _arr(2, 3, E, seed=1), _arr(2, 4, E, seed=2), _arr(2, 4, E, seed=3)
    out, w = m(ember.from_numpy(q), ember.from_numpy(k), ember.from_numpy(v), average_attn_weights=False)
    ref_out, ref_w = _mha_ref(m, q, k, v)
    np.testing.assert_allclose(_np(out), ref_out, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(_np(w), ref_w, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(_np(w).sum(-1), 1.0, rtol=1e-6)


def test_sequence_first_equals_batch_first_transposed():
    m = nn.MultiheadAttention(E, H)
    _randomise(m)
    q, k = _arr(2, 3, E, seed=1), _arr(2, 4, E, seed=2)
    out, w = m(ember.from_numpy(q.transpose(1, 0, 2).copy()), ember.from_numpy(k.transpose(1, 0, 2).copy()),
               ember.from_numpy(k.transpose(1, 0, 2).copy()))
    ref_out, ref_w = _mha_ref(m, q, k, k)
    assert tuple(out.shape) == (3, 2, E) and tuple(w.shape) == (2, 3, 4)
    np.testing.assert_allclose(_np(out), ref_out.transpose(1, 0, 2), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(_np(w), ref_w.mean(axis=1), rtol=1e-5, atol=1e-6)


def test_need_weights_false_gives_same_output_and_none():
    m = nn.MultiheadAttention(E, H, batch_first=True)
    _randomise(m)
    x = ember.from_numpy(_arr(2, 5, E))
    out_w, _ = m(x, x, x)
    out, w = m(x, x, x, need_weights=False)
    assert w is None
    np.testing.assert_allclose(_np(out), _np(out_w), rtol=1e-5, atol=1e-6)


def test_bool_and_float_masks_and_their_merge():
    m = nn.MultiheadAttention(E, H, batch_first=True)
    _randomise(m)
    q, k = _arr(2, 3, E, seed=1), _arr(2, 4, E, seed=2)
    attn_bool = np.array([[False, True, False, True], [False, False, True, True], [True, False, False, False]])
    kpm_bool = np.array([[False, False, False, True], [False, True, False, False]])
    additive = np.where(attn_bool, -np.inf, 0.0)[None, None] + np.where(kpm_bool, -np.inf, 0.0)[:, None, None, :]
    ref_out, ref_w = _mha_ref(m, q, k, k, additive)
    eq, ek = ember.from_numpy(q), ember.from_numpy(k)
    for need_weights in (True, False):
        out, w = m(eq, ek, ek, attn_mask=ember.from_numpy(attn_bool), key_padding_mask=ember.from_numpy(kpm_bool),
                   need_weights=need_weights)
        np.testing.assert_allclose(_np(out), ref_out, rtol=1e-5, atol=1e-5)
    out, w = m(eq, ek, ek, attn_mask=ember.from_numpy(attn_bool), key_padding_mask=ember.from_numpy(kpm_bool))
    np.testing.assert_allclose(_np(w), ref_w.mean(axis=1), rtol=1e-5, atol=1e-6)
    # Masked positions get exactly zero weight.
    assert np.all(_np(w)[np.broadcast_to(attn_bool[None] | kpm_bool[:, None, :], w.shape)] == 0)
    # The same masks as float (-inf where masked) give the same result.
    out_f, w_f = m(eq, ek, ek, attn_mask=ember.from_numpy(np.where(attn_bool, -np.inf, 0.0).astype(np.float32)),
                   key_padding_mask=ember.from_numpy(np.where(kpm_bool, -np.inf, 0.0).astype(np.float32)))
    np.testing.assert_allclose(_np(out_f), ref_out, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(_np(w_f), _np(w), rtol=1e-6, atol=1e-7)


def test_float_mask_is_added_to_scores():
    m = nn.MultiheadAttention(E, H, batch_first=True)
    _randomise(m)
    q = _arr(1, 3, E, seed=1)
    bias = _arr(H, 3, 3, seed=4)  # 3-D mask: (N * H, L, S)
    out, w = m(*(ember.from_numpy(q),) * 3, attn_mask=ember.from_numpy(bias), average_attn_weights=False)
    ref_out, ref_w = _mha_ref(m, q, q, q, bias[None])
    np.testing.assert_allclose(_np(out), ref_out, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(_np(w), ref_w, rtol=1e-5, atol=1e-6)


def test_mismatched_mask_types_warn():
    m = nn.MultiheadAttention(E, H)
    x = ember.randn(3, 1, E)
    with pytest.warns(UserWarning, match="Support for mismatched key_padding_mask and attn_mask is deprecated"):
        m(x, x, x, key_padding_mask=ember.zeros(1, 3, dtype=ember.bool), attn_mask=ember.zeros(3, 3))


def test_kdim_vdim_bias_kv_and_zero_attn():
    m = nn.MultiheadAttention(E, H, kdim=4, vdim=5, batch_first=True)
    assert m.in_proj_weight is None and tuple(m.k_proj_weight.shape) == (E, 4)
    assert [n for n, _ in m.named_parameters()] == [
        "q_proj_weight", "k_proj_weight", "v_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"]
    _randomise(m)
    q, k, v = _arr(2, 3, E, seed=1), _arr(2, 4, 4, seed=2), _arr(2, 4, 5, seed=3)
    out, w = m(ember.from_numpy(q), ember.from_numpy(k), ember.from_numpy(v))
    ref_out, ref_w = _mha_ref(m, q, k, v)
    np.testing.assert_allclose(_np(out), ref_out, rtol=1e-5, atol=1e-5)

    m = nn.MultiheadAttention(E, H, add_bias_kv=True, batch_first=True)
    _randomise(m)
    out, w = m(ember.from_numpy(q), ember.from_numpy(q), ember.from_numpy(q))
    ref_out, ref_w = _mha_ref(m, q, q, q)
    assert tuple(w.shape) == (2, 3, 4)  # one more source position
    np.testing.assert_allclose(_np(out), ref_out, rtol=1e-5, atol=1e-5)

    # A zero key gets score 0: its weight is exp(0) / sum.
    m = nn.MultiheadAttention(E, H, add_zero_attn=True, bias=False, batch_first=True)
    _randomise(m)
    _, w = m(*(ember.from_numpy(q),) * 3, average_attn_weights=False)
    assert tuple(w.shape) == (2, H, 3, 4)
    wq, wk, _ = np.split(_np(m.in_proj_weight), 3)
    hd = m.head_dim
    Qh = (q @ wq.T).reshape(2, 3, H, hd).transpose(0, 2, 1, 3)
    Kh = (q @ wk.T).reshape(2, 3, H, hd).transpose(0, 2, 3, 1)
    raw = Qh @ Kh / math.sqrt(hd)
    np.testing.assert_allclose(_np(w), _softmax(np.concatenate([raw, np.zeros((2, H, 3, 1))], -1)), rtol=1e-5,
                               atol=1e-6)


def test_unbatched_input_shapes():
    m = nn.MultiheadAttention(E, H, batch_first=True)
    _randomise(m)
    q, k = _arr(3, E, seed=1), _arr(4, E, seed=2)
    out, w = m(ember.from_numpy(q), ember.from_numpy(k), ember.from_numpy(k), average_attn_weights=False)
    assert tuple(out.shape) == (3, E) and tuple(w.shape) == (H, 3, 4)
    ref_out, ref_w = _mha_ref(m, q[None], k[None], k[None])
    np.testing.assert_allclose(_np(out), ref_out[0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(_np(w), ref_w[0], rtol=1e-5, atol=1e-6)


def test_dropout_one_in_training_zeroes_attention():
    m = nn.MultiheadAttention(E, H, dropout=1.0, batch_first=True)
    _randomise(m)
    x = ember.from_numpy(_arr(2, 3, E))
    out, w = m(x, x, x)
    assert np.all(_np(w) == 0)
    np.testing.assert_allclose(_np(out), np.broadcast_to(_np(m.out_proj.bias), (2, 3, E)), rtol=1e-6)
    m.eval()
    _, w = m(x, x, x)
    np.testing.assert_allclose(_np(w).sum(-1), 1.0, rtol=1e-6)


def test_default_initialisation():
    ember.manual_seed(0)
    m = nn.MultiheadAttention(64, 4, add_bias_kv=True)
    w = _np(m.in_proj_weight)
    bound = math.sqrt(6.0 / (64 + 3 * 64))  # xavier_uniform_ on (3E, E)
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.98 * bound
    assert np.all(_np(m.in_proj_bias) == 0) and np.all(_np(m.out_proj.bias) == 0)
    assert type(m.out_proj).__name__ == "NonDynamicallyQuantizableLinear" and isinstance(m.out_proj, nn.Linear)
    assert tuple(m.bias_k.shape) == (1, 1, 64) and _np(m.bias_k).std() > 0


def test_errors():
    with pytest.raises(AssertionError, match="embed_dim must be divisible by num_heads"):
        nn.MultiheadAttention(5, 2)
    with pytest.raises(ValueError, match="embed_dim and num_heads must be greater than 0"):
        nn.MultiheadAttention(4, 0)
    m = nn.MultiheadAttention(E, H)
    with pytest.raises(AssertionError, match="query should be unbatched 2D or batched 3D tensor"):
        m(ember.randn(E), ember.randn(E), ember.randn(E))
    x = ember.randn(3, 2, E)
    with pytest.raises(RuntimeError, match=r"The shape of the 2D attn_mask is .*, but should be \(3, 3\)"):
        m(x, x, x, attn_mask=ember.zeros(3, 4))
    with pytest.raises(AssertionError, match="only bool and floating types of attn_mask are supported"):
        m(x, x, x, attn_mask=ember.zeros(3, 3, dtype=ember.int64))
    with pytest.raises(RuntimeError, match="Need attn_mask if specifying the is_causal hint"):
        m(x, x, x, is_causal=True)
    with pytest.raises(AssertionError, match="was expecting embedding dimension of 6, but got 5"):
        y = ember.randn(3, 2, 5)
        m(y, y, y)


def test_generate_square_subsequent_mask():
    mask = nn.Transformer.generate_square_subsequent_mask(4)
    expected = np.triu(np.full((4, 4), -np.inf, dtype=np.float32), k=1)
    assert mask.dtype is ember.float32
    np.testing.assert_array_equal(mask.numpy(), expected)
    assert nn.Transformer.generate_square_subsequent_mask(3, dtype=ember.float64).dtype is ember.float64


def _layer_ref(layer, x, norm_first):
    """Numpy encoder layer (batch first, eval) built on the MHA reference."""

    def ln(v, norm):
        mu = v.mean(-1, keepdims=True)
        var = v.var(-1, keepdims=True)
        return (v - mu) / np.sqrt(var + norm.eps) * _np(norm.weight) + _np(norm.bias)

    def ff(v):
        h = np.maximum(v @ _np(layer.linear1.weight).T + _np(layer.linear1.bias), 0)
        return h @ _np(layer.linear2.weight).T + _np(layer.linear2.bias)

    def sa(v):
        return _mha_ref(layer.self_attn, v, v, v)[0]

    if norm_first:
        x = x + sa(ln(x, layer.norm1))
        return x + ff(ln(x, layer.norm2))
    x = ln(x + sa(x), layer.norm1)
    return ln(x + ff(x), layer.norm2)


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_layer_matches_numpy_reference(norm_first):
    layer = nn.TransformerEncoderLayer(E, H, dim_feedforward=10, batch_first=True, norm_first=norm_first)
    _randomise(layer)
    layer.eval()
    x = _arr(2, 4, E)
    np.testing.assert_allclose(_np(layer(ember.from_numpy(x))), _layer_ref(layer, x, norm_first), rtol=1e-4,
                               atol=1e-5)


def test_encoder_stack_clones_layers_and_applies_norm():
    layer = nn.TransformerEncoderLayer(E, H, dim_feedforward=10, batch_first=True, dropout=0.0)
    enc = nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(E), enable_nested_tensor=False)
    assert len(enc.layers) == 2 and enc.layers[0] is not layer
    assert enc.layers[0].linear1.weight is not enc.layers[1].linear1.weight
    _randomise(enc)
    x = ember.from_numpy(_arr(2, 4, E))
    expected = enc.norm(enc.layers[1](enc.layers[0](x)))
    np.testing.assert_allclose(_np(enc(x)), _np(expected), rtol=1e-6, atol=1e-6)


def test_transformer_shapes_and_deepcopy():
    model = nn.Transformer(d_model=E, nhead=H, num_encoder_layers=1, num_decoder_layers=2, dim_feedforward=8,
                           batch_first=True)
    out = model(ember.randn(3, 5, E), ember.randn(3, 4, E))
    assert tuple(out.shape) == (3, 4, E)
    assert len(model.decoder.layers) == 2 and model.decoder.norm is not None
    clone = copy.deepcopy(model)
    assert list(clone.state_dict()) == list(model.state_dict())
    assert clone.encoder.layers[0].self_attn.in_proj_weight is not model.encoder.layers[0].self_attn.in_proj_weight


def test_transformer_state_dict_round_trip_through_save_load(tmp_path):
    model = nn.Transformer(d_model=E, nhead=H, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=8,
                           dropout=0.0)
    model.eval()
    path = tmp_path / "t.pt"
    ember.save(model.state_dict(), path)
    other = nn.Transformer(d_model=E, nhead=H, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=8,
                           dropout=0.0)
    other.load_state_dict(ember.load(path))
    other.eval()
    src, tgt = ember.randn(5, 2, E), ember.randn(4, 2, E)
    np.testing.assert_array_equal(_np(other(src, tgt)), _np(model(src, tgt)))


def test_functional_multi_head_attention_forward_matches_numpy():
    m = nn.MultiheadAttention(E, H)
    _randomise(m, seed=4)
    q, k, v = _arr(2, 3, E, seed=5), _arr(2, 4, E, seed=6), _arr(2, 4, E, seed=7)  # batch-first arrays
    seq_first = [ember.from_numpy(np.ascontiguousarray(a.transpose(1, 0, 2))) for a in (q, k, v)]
    out, w = nn.functional.multi_head_attention_forward(
        *seq_first, E, H, m.in_proj_weight, m.in_proj_bias, None, None, False, 0.0, m.out_proj.weight,
        m.out_proj.bias, average_attn_weights=False,
    )
    ref_out, ref_w = _mha_ref(m, q, k, v)
    np.testing.assert_allclose(_np(out).transpose(1, 0, 2), ref_out, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(_np(w), ref_w, rtol=1e-5, atol=1e-6)
    with pytest.raises(AssertionError, match="was expecting embedding dimension of 5, but got 6"):
        nn.functional.multi_head_attention_forward(
            *seq_first, 5, H, m.in_proj_weight, None, None, None, False, 0.0, m.out_proj.weight, None
        )


def test_functional_multi_head_attention_forward_honours_ember_function():
    seen = []

    class Traced(ember.Tensor):
        @classmethod
        def __ember_function__(cls, func, types, args=(), kwargs=None):
            seen.append(getattr(func, "__name__", None))
            return "intercepted"

    x = ember.zeros(3, 1, E).as_subclass(Traced)
    w = ember.zeros(3 * E, E)
    result = nn.functional.multi_head_attention_forward(x, x, x, E, H, w, None, None, None, False, 0.0,
                                                         ember.zeros(E, E), None)
    assert result == "intercepted" and seen == ["multi_head_attention_forward"]
