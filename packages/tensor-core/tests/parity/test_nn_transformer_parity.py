"""ember.nn.MultiheadAttention and the Transformer modules against torch.nn: torch's weights copied
over -> same state_dict keys (names and order), same outputs, attention weights and gradients
(parameters and inputs), in eval mode and in train mode with dropout=0.

Modules, inputs and masks live on the backend's device (``_parity_device``): with the cuda
backend, ember's CUDA results against PyTorch's CUDA results."""

import numpy as np
import pytest
import torch
from _parity_device import EMBER_DEVICE, IS_PINNED_TORCH, TORCH_DEVICE

import ember
import ember.nn as enn

pytestmark = [pytest.mark.parity, pytest.mark.filterwarnings("ignore:enable_nested_tensor is True")]

RTOL, ATOL = 1e-4, 1e-5
GRAD_RTOL, GRAD_ATOL = 1e-4, 1e-4


def _np(t):
    """The values of a torch or ember tensor, from any device, as numpy."""
    return t.detach().cpu().numpy()


def _dev(t):
    """``t`` (a torch or ember tensor) on its library's device under test."""
    return t.to(TORCH_DEVICE) if isinstance(t, torch.Tensor) else t.to(EMBER_DEVICE)


def _to_ember_state(torch_state):
    return {k: ember.from_numpy(_np(v).copy()) for k, v in torch_state.items()}


def _pair(torch_cls, ember_cls, *args, **kwargs):
    """A torch module with perturbed parameters (non-zero biases, non-trivial norms) and the ember
    module of the same class loaded from its state_dict."""
    torch.manual_seed(0)
    tm = torch_cls(*args, **kwargs)
    with torch.no_grad():
        for p in tm.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    em = ember_cls(*args, **kwargs)
    assert list(em.state_dict().keys()) == list(tm.state_dict().keys())
    result = em.load_state_dict(_to_ember_state(tm.state_dict()))
    assert not result.missing_keys and not result.unexpected_keys
    return tm.to(TORCH_DEVICE), em.to(EMBER_DEVICE)


def _inputs(shapes, seed=1):
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    t = [_dev(torch.from_numpy(a.copy())).requires_grad_(True) for a in arrays]
    e = [_dev(ember.from_numpy(a.copy())).requires_grad_(True) for a in arrays]
    return t, e


def _masks(t_mask):
    """The same mask for both libraries (numpy -> torch / ember)."""
    if t_mask is None:
        return None, None
    a = np.asarray(t_mask)
    return _dev(torch.from_numpy(a.copy())), _dev(ember.from_numpy(a.copy()))


def _check_backward(tm, em, t_out, e_out, t_in, e_in, seed=2):
    weights = np.random.default_rng(seed).standard_normal(tuple(t_out.shape)).astype(np.float32)
    (t_out * _dev(torch.from_numpy(weights))).sum().backward()
    (e_out * _dev(ember.from_numpy(weights))).sum().backward()
    t_params = dict(tm.named_parameters())
    e_params = dict(em.named_parameters())
    assert list(t_params) == list(e_params)
    for name, tp in t_params.items():
        ep = e_params[name]
        assert ep.grad is not None, name
        np.testing.assert_allclose(_np(ep.grad), _np(tp.grad), rtol=GRAD_RTOL, atol=GRAD_ATOL, err_msg=name)
    seen = set()
    for ti, ei in zip(t_in, e_in):
        if id(ti) in seen:
            continue
        seen.add(id(ti))
        np.testing.assert_allclose(_np(ei.grad), _np(ti.grad), rtol=GRAD_RTOL, atol=GRAD_ATOL)


def _causal_bool(L, S):
    return np.triu(np.ones((L, S), dtype=bool), k=1)


def _padding_bool(N, S, seed=3):
    """(N, S) bool, True = padding; the first position of each row stays un-padded."""
    m = np.random.default_rng(seed).random((N, S)) < 0.4
    m[:, 0] = False
    return m


# ---------------------------------------------------------------------------------------------------
# MultiheadAttention
# ---------------------------------------------------------------------------------------------------

E, H, L, S, N = 8, 2, 4, 5, 3

# id -> (constructor kwargs, forward options)
MHA_CASES = {
    "plain": ({}, {}),
    "batch_first": ({"batch_first": True}, {}),
    "no_bias": ({"bias": False}, {}),
    "kdim_vdim": ({"kdim": 6, "vdim": 3}, {}),
    "kdim_vdim_batch_first": ({"kdim": 6, "vdim": 3, "batch_first": True}, {}),
    "add_bias_kv": ({"add_bias_kv": True}, {}),
    "add_zero_attn": ({"add_zero_attn": True}, {}),
    "bias_kv_zero_attn_masks": (
        {"add_bias_kv": True, "add_zero_attn": True},
        {"attn_mask": "bool2d", "key_padding_mask": "bool"},
    ),
    "per_head_weights": ({}, {"average_attn_weights": False}),
    "no_weights": ({}, {"need_weights": False}),
    "bool_attn_mask": ({}, {"attn_mask": "bool2d"}),
    "bool_attn_mask_no_weights": ({}, {"attn_mask": "bool2d", "need_weights": False}),
    "float_attn_mask_3d": ({}, {"attn_mask": "float3d"}),
    "float_attn_mask_3d_no_weights": ({"batch_first": True}, {"attn_mask": "float3d", "need_weights": False}),
    "bool_key_padding": ({}, {"key_padding_mask": "bool"}),
    "float_key_padding": ({"batch_first": True}, {"key_padding_mask": "float"}),
    "both_masks": ({}, {"attn_mask": "bool2d", "key_padding_mask": "bool"}),
    "both_masks_no_weights": ({"batch_first": True}, {"attn_mask": "bool2d", "key_padding_mask": "bool",
                                                      "need_weights": False}),
    "both_float_masks": ({}, {"attn_mask": "float2d", "key_padding_mask": "float"}),
}


def _mha_masks(opts, key_len, query_len, rng):
    t_kw, e_kw = {}, {}
    kind = opts.get("attn_mask")
    if kind == "bool2d":
        m = _causal_bool(query_len, key_len)
    elif kind == "float2d":
        m = rng.standard_normal((query_len, key_len)).astype(np.float32)
    elif kind == "float3d":
        m = rng.standard_normal((N * H, query_len, key_len)).astype(np.float32)
        m[..., 1] = -np.inf
    else:
        m = None
    t_kw["attn_mask"], e_kw["attn_mask"] = _masks(m)
    kind = opts.get("key_padding_mask")
    if kind == "bool":
        m = _padding_bool(N, key_len)
    elif kind == "float":
        m = np.where(_padding_bool(N, key_len), -np.inf, rng.standard_normal((N, key_len))).astype(np.float32)
    else:
        m = None
    t_kw["key_padding_mask"], e_kw["key_padding_mask"] = _masks(m)
    for k in ("need_weights", "average_attn_weights"):
        if k in opts:
            t_kw[k] = e_kw[k] = opts[k]
    return t_kw, e_kw


@pytest.mark.parametrize("mode", ["train", "eval"])
@pytest.mark.parametrize("case", list(MHA_CASES), ids=list(MHA_CASES))
def test_multihead_attention_matches_torch(case, mode):
    ctor, opts = MHA_CASES[case]
    tm, em = _pair(torch.nn.MultiheadAttention, enn.MultiheadAttention, E, H, **ctor)
    getattr(tm, mode)()
    getattr(em, mode)()
    bf = ctor.get("batch_first", False)
    kdim, vdim = ctor.get("kdim", E), ctor.get("vdim", E)
    shape = (lambda seq, f: (N, seq, f)) if bf else (lambda seq, f: (seq, N, f))
    t_in, e_in = _inputs([shape(L, E), shape(S, kdim), shape(S, vdim)])
    t_kw, e_kw = _mha_masks(opts, S, L, np.random.default_rng(4))
    t_out, t_w = tm(*t_in, **t_kw)
    e_out, e_w = em(*e_in, **e_kw)
    np.testing.assert_allclose(_np(e_out), _np(t_out), rtol=RTOL, atol=ATOL)
    if t_w is None:
        assert e_w is None
    else:
        assert tuple(e_w.shape) == tuple(t_w.shape)
        np.testing.assert_allclose(_np(e_w), _np(t_w), rtol=RTOL, atol=ATOL)
    _check_backward(tm, em, t_out, e_out, t_in, e_in)


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("need_weights", [False, True])
def test_self_attention_same_tensor_matches_torch(batch_first, need_weights):
    """query is key is value: the packed single-projection path."""
    tm, em = _pair(torch.nn.MultiheadAttention, enn.MultiheadAttention, E, H, batch_first=batch_first)
    t_in, e_in = _inputs([(N, L, E) if batch_first else (L, N, E)])
    tx, ex = t_in[0], e_in[0]
    t_kpm, e_kpm = _masks(_padding_bool(N, L))
    t_out, t_w = tm(tx, tx, tx, key_padding_mask=t_kpm, need_weights=need_weights)
    e_out, e_w = em(ex, ex, ex, key_padding_mask=e_kpm, need_weights=need_weights)
    np.testing.assert_allclose(_np(e_out), _np(t_out), rtol=RTOL, atol=ATOL)
    if need_weights:
        np.testing.assert_allclose(_np(e_w), _np(t_w), rtol=RTOL, atol=ATOL)
    _check_backward(tm, em, t_out, e_out, t_in, e_in)


@pytest.mark.parametrize("need_weights", [False, True])
def test_causal_hint_matches_torch(need_weights):
    tm, em = _pair(torch.nn.MultiheadAttention, enn.MultiheadAttention, E, H, batch_first=True)
    t_in, e_in = _inputs([(N, L, E)])
    t_mask = torch.nn.Transformer.generate_square_subsequent_mask(L, device=TORCH_DEVICE)
    e_mask = enn.Transformer.generate_square_subsequent_mask(L, device=EMBER_DEVICE)
    np.testing.assert_array_equal(_np(e_mask), _np(t_mask))
    tx, ex = t_in[0], e_in[0]
    t_out, _ = tm(tx, tx, tx, attn_mask=t_mask, is_causal=True, need_weights=need_weights)
    e_out, _ = em(ex, ex, ex, attn_mask=e_mask, is_causal=True, need_weights=need_weights)
    np.testing.assert_allclose(_np(e_out), _np(t_out), rtol=RTOL, atol=ATOL)
    _check_backward(tm, em, t_out, e_out, t_in, e_in)


@pytest.mark.parametrize("mask", [None, "attn_mask_3d", "key_padding_mask"])
def test_unbatched_matches_torch(mask):
    tm, em = _pair(torch.nn.MultiheadAttention, enn.MultiheadAttention, E, H, batch_first=True)
    t_in, e_in = _inputs([(L, E), (S, E), (S, E)])
    t_kw, e_kw = {}, {}
    if mask == "attn_mask_3d":
        m = np.broadcast_to(_causal_bool(L, S), (H, L, S)).copy()
        t_kw["attn_mask"], e_kw["attn_mask"] = _masks(m)
    elif mask == "key_padding_mask":
        t_kw["key_padding_mask"], e_kw["key_padding_mask"] = _masks(_padding_bool(1, S)[0])
    t_out, t_w = tm(*t_in, average_attn_weights=False, **t_kw)
    e_out, e_w = em(*e_in, average_attn_weights=False, **e_kw)
    assert tuple(e_out.shape) == (L, E) and tuple(e_w.shape) == (H, L, S)
    np.testing.assert_allclose(_np(e_out), _np(t_out), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(_np(e_w), _np(t_w), rtol=RTOL, atol=ATOL)
    _check_backward(tm, em, t_out, e_out, t_in, e_in)


def test_no_grad_eval_matches_torch_fast_path():
    """Under no_grad in eval torch takes its native fused path; the values still agree."""
    tm, em = _pair(torch.nn.MultiheadAttention, enn.MultiheadAttention, E, H, batch_first=True)
    tm.eval()
    em.eval()
    x = np.random.default_rng(5).standard_normal((N, L, E)).astype(np.float32)
    mask = _causal_bool(L, L)
    with torch.no_grad():
        tx = _dev(torch.from_numpy(x))
        t_out, t_w = tm(tx, tx, tx, attn_mask=_dev(torch.from_numpy(mask)))
    with ember.no_grad():
        ex = _dev(ember.from_numpy(x))
        e_out, e_w = em(ex, ex, ex, attn_mask=_dev(ember.from_numpy(mask)))
    np.testing.assert_allclose(_np(e_out), _np(t_out), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(_np(e_w), _np(t_w), rtol=RTOL, atol=ATOL)


def test_mha_repr_and_errors_match_torch():
    for kwargs in ({}, {"kdim": 6, "vdim": 3}, {"add_bias_kv": True, "bias": False}):
        tm = torch.nn.MultiheadAttention(E, H, **kwargs)
        em = enn.MultiheadAttention(E, H, **kwargs)
        assert repr(em) == repr(tm)
        assert [n for n, _ in em.named_parameters()] == [n for n, _ in tm.named_parameters()]
    with pytest.raises(AssertionError, match="embed_dim must be divisible by num_heads"):
        enn.MultiheadAttention(7, 2)
    with pytest.raises(ValueError, match="embed_dim and num_heads must be greater than 0"):
        enn.MultiheadAttention(0, 2)


# ---------------------------------------------------------------------------------------------------
# Transformer layers
# ---------------------------------------------------------------------------------------------------

D, NHEAD, FF = 8, 2, 16


def _layer_kwargs(norm_first, activation, batch_first, dropout):
    return {"dim_feedforward": FF, "dropout": dropout, "activation": activation, "batch_first": batch_first,
            "norm_first": norm_first}


LAYER_CONFIGS = [
    # (norm_first, activation, batch_first, mode, dropout)
    (False, "relu", False, "train", 0.0),
    (True, "relu", True, "train", 0.0),
    (False, "gelu", True, "eval", 0.1),
    (True, "gelu", False, "eval", 0.1),
]


def _layer_id(cfg):
    return "norm_first={}-{}-batch_first={}-{}-dropout={}".format(*cfg)


@pytest.mark.parametrize("masks", [False, True])
@pytest.mark.parametrize("cfg", LAYER_CONFIGS, ids=_layer_id)
def test_encoder_layer_matches_torch(cfg, masks):
    norm_first, activation, batch_first, mode, dropout = cfg
    kw = _layer_kwargs(norm_first, activation, batch_first, dropout)
    tm, em = _pair(torch.nn.TransformerEncoderLayer, enn.TransformerEncoderLayer, D, NHEAD, **kw)
    getattr(tm, mode)()
    getattr(em, mode)()
    t_in, e_in = _inputs([(N, S, D) if batch_first else (S, N, D)])
    t_kw, e_kw = {}, {}
    if masks:
        t_kw["src_mask"], e_kw["src_mask"] = _masks(_causal_bool(S, S))
        t_kw["src_key_padding_mask"], e_kw["src_key_padding_mask"] = _masks(_padding_bool(N, S))
    t_out = tm(t_in[0], **t_kw)
    e_out = em(e_in[0], **e_kw)
    np.testing.assert_allclose(_np(e_out), _np(t_out), rtol=RTOL, atol=ATOL)
    _check_backward(tm, em, t_out, e_out, t_in, e_in)


@pytest.mark.parametrize("masks", [False, True])
@pytest.mark.parametrize("cfg", LAYER_CONFIGS, ids=_layer_id)
def test_decoder_layer_matches_torch(cfg, masks):
    norm_first, activation, batch_first, mode, dropout = cfg
    kw = _layer_kwargs(norm_first, activation, batch_first, dropout)
    tm, em = _pair(torch.nn.TransformerDecoderLayer, enn.TransformerDecoderLayer, D, NHEAD, **kw)
    getattr(tm, mode)()
    getattr(em, mode)()
    shapes = [(N, L, D), (N, S, D)] if batch_first else [(L, N, D), (S, N, D)]
    t_in, e_in = _inputs(shapes)
    t_kw, e_kw = {}, {}
    if masks:
        t_kw["tgt_mask"], e_kw["tgt_mask"] = _masks(
            np.where(_causal_bool(L, L), -np.inf, 0.0).astype(np.float32)
        )
        t_kw["memory_mask"], e_kw["memory_mask"] = _masks(
            np.random.default_rng(6).standard_normal((L, S)).astype(np.float32)
        )
        t_kw["tgt_key_padding_mask"], e_kw["tgt_key_padding_mask"] = _masks(
            np.where(_padding_bool(N, L), -np.inf, 0.0).astype(np.float32)
        )
        t_kw["memory_key_padding_mask"], e_kw["memory_key_padding_mask"] = _masks(
            np.where(_padding_bool(N, S, seed=7), -np.inf, 0.0).astype(np.float32)
        )
    t_out = tm(*t_in, **t_kw)
    e_out = em(*e_in, **e_kw)
    np.testing.assert_allclose(_np(e_out), _np(t_out), rtol=RTOL, atol=ATOL)
    _check_backward(tm, em, t_out, e_out, t_in, e_in)


def test_encoder_layer_callable_activation_matches_torch():
    torch.manual_seed(0)
    tm = torch.nn.TransformerEncoderLayer(D, NHEAD, FF, dropout=0.0, activation=torch.nn.functional.silu)
    em = enn.TransformerEncoderLayer(D, NHEAD, FF, dropout=0.0, activation=ember.nn.functional.silu)
    em.load_state_dict(_to_ember_state(tm.state_dict()))
    tm.to(TORCH_DEVICE)
    em.to(EMBER_DEVICE)
    assert em.activation_relu_or_gelu == tm.activation_relu_or_gelu == 0
    t_in, e_in = _inputs([(S, N, D)])
    t_out, e_out = tm(t_in[0]), em(e_in[0])
    np.testing.assert_allclose(_np(e_out), _np(t_out), rtol=RTOL, atol=ATOL)
    _check_backward(tm, em, t_out, e_out, t_in, e_in)


@pytest.mark.parametrize("mode", ["train", "eval"])
def test_encoder_and_decoder_stacks_match_torch(mode):
    dropout = 0.0 if mode == "train" else 0.1
    torch.manual_seed(0)
    t_enc_layer = torch.nn.TransformerEncoderLayer(D, NHEAD, FF, dropout, batch_first=True)
    t_enc = torch.nn.TransformerEncoder(t_enc_layer, 2, norm=torch.nn.LayerNorm(D), enable_nested_tensor=False)
    t_dec_layer = torch.nn.TransformerDecoderLayer(D, NHEAD, FF, dropout, batch_first=True, norm_first=True)
    t_dec = torch.nn.TransformerDecoder(t_dec_layer, 2)
    e_enc_layer = enn.TransformerEncoderLayer(D, NHEAD, FF, dropout, batch_first=True)
    e_enc = enn.TransformerEncoder(e_enc_layer, 2, norm=enn.LayerNorm(D), enable_nested_tensor=False)
    e_dec_layer = enn.TransformerDecoderLayer(D, NHEAD, FF, dropout, batch_first=True, norm_first=True)
    e_dec = enn.TransformerDecoder(e_dec_layer, 2)
    for tm, em in ((t_enc, e_enc), (t_dec, e_dec)):
        with torch.no_grad():
            for p in tm.parameters():
                p.add_(torch.randn_like(p) * 0.1)
        assert list(em.state_dict()) == list(tm.state_dict())
        em.load_state_dict(_to_ember_state(tm.state_dict()))
        tm.to(TORCH_DEVICE)
        em.to(EMBER_DEVICE)
        getattr(tm, mode)()
        getattr(em, mode)()
    t_in, e_in = _inputs([(N, S, D), (N, L, D)])
    t_smask, e_smask = _masks(torch.nn.Transformer.generate_square_subsequent_mask(S).numpy())
    t_tmask, e_tmask = _masks(torch.nn.Transformer.generate_square_subsequent_mask(L).numpy())
    t_mem = t_enc(t_in[0], mask=t_smask)  # causal mask detected (is_causal=None)
    e_mem = e_enc(e_in[0], mask=e_smask)
    np.testing.assert_allclose(_np(e_mem), _np(t_mem), rtol=RTOL, atol=ATOL)
    t_out = t_dec(t_in[1], t_mem, tgt_mask=t_tmask)
    e_out = e_dec(e_in[1], e_mem, tgt_mask=e_tmask)
    np.testing.assert_allclose(_np(e_out), _np(t_out), rtol=RTOL, atol=ATOL)
    weights = np.random.default_rng(2).standard_normal(tuple(t_out.shape)).astype(np.float32)
    (t_out * _dev(torch.from_numpy(weights))).sum().backward()
    (e_out * _dev(ember.from_numpy(weights))).sum().backward()
    for tm, em in ((t_enc, e_enc), (t_dec, e_dec)):
        for (tn, tp), (en, ep) in zip(tm.named_parameters(), em.named_parameters()):
            assert tn == en
            np.testing.assert_allclose(_np(ep.grad), _np(tp.grad), rtol=GRAD_RTOL, atol=GRAD_ATOL, err_msg=tn)
    for ti, ei in zip(t_in, e_in):
        np.testing.assert_allclose(_np(ei.grad), _np(ti.grad), rtol=GRAD_RTOL, atol=GRAD_ATOL)


TRANSFORMER_CONFIGS = [
    # (batch_first, norm_first, activation, mode, dropout, masks)
    (False, False, "relu", "train", 0.0, False),
    (True, False, "gelu", "train", 0.0, True),
    (False, True, "relu", "eval", 0.1, True),
    (True, True, "gelu", "eval", 0.1, False),
]


@pytest.mark.parametrize("cfg", TRANSFORMER_CONFIGS, ids=lambda c: "bf={}-nf={}-{}-{}-p={}-masks={}".format(*c))
def test_transformer_matches_torch(cfg):
    batch_first, norm_first, activation, mode, dropout, masks = cfg
    kw = {"d_model": D, "nhead": NHEAD, "num_encoder_layers": 2, "num_decoder_layers": 2, "dim_feedforward": FF,
          "dropout": dropout, "activation": activation, "batch_first": batch_first, "norm_first": norm_first}
    tm, em = _pair(torch.nn.Transformer, enn.Transformer, **kw)
    getattr(tm, mode)()
    getattr(em, mode)()
    shapes = [(N, S, D), (N, L, D)] if batch_first else [(S, N, D), (L, N, D)]
    t_in, e_in = _inputs(shapes)
    t_kw, e_kw = {}, {}
    if masks:
        t_kw["tgt_mask"] = torch.nn.Transformer.generate_square_subsequent_mask(L, device=TORCH_DEVICE)
        e_kw["tgt_mask"] = enn.Transformer.generate_square_subsequent_mask(L, device=EMBER_DEVICE)
        for name, shape, seed in (("src_key_padding_mask", (N, S), 3), ("tgt_key_padding_mask", (N, L), 4),
                                  ("memory_key_padding_mask", (N, S), 3)):
            t_kw[name], e_kw[name] = _masks(np.where(_padding_bool(*shape, seed=seed), -np.inf, 0.0)
                                            .astype(np.float32))
    t_out = tm(*t_in, **t_kw)
    e_out = em(*e_in, **e_kw)
    np.testing.assert_allclose(_np(e_out), _np(t_out), rtol=RTOL, atol=ATOL)
    _check_backward(tm, em, t_out, e_out, t_in, e_in)


def test_transformer_unbatched_matches_torch():
    tm, em = _pair(torch.nn.Transformer, enn.Transformer, d_model=D, nhead=NHEAD, num_encoder_layers=1,
                   num_decoder_layers=1, dim_feedforward=FF, dropout=0.0)
    t_in, e_in = _inputs([(S, D), (L, D)])
    t_out, e_out = tm(*t_in), em(*e_in)
    assert tuple(e_out.shape) == (L, D)
    np.testing.assert_allclose(_np(e_out), _np(t_out), rtol=RTOL, atol=ATOL)
    _check_backward(tm, em, t_out, e_out, t_in, e_in)


def test_transformer_repr_state_dict_and_errors_match_torch():
    kw = {"d_model": D, "nhead": NHEAD, "num_encoder_layers": 1, "num_decoder_layers": 2, "dim_feedforward": FF,
          "bias": False}
    tm = torch.nn.Transformer(**kw)
    em = enn.Transformer(**kw)
    if IS_PINNED_TORCH:  # the repr names the options of the pinned release
        assert repr(em) == repr(tm)
    assert list(em.state_dict()) == list(tm.state_dict())
    assert [tuple(v.shape) for v in em.state_dict().values()] == [tuple(v.shape) for v in tm.state_dict().values()]
    with pytest.raises(RuntimeError, match="the batch number of src and tgt must be equal"):
        em(ember.randn(S, 2, D), ember.randn(L, 3, D))
    with pytest.raises(RuntimeError, match="the feature number of src and tgt must be equal to d_model"):
        em(ember.randn(S, 2, D + 1), ember.randn(L, 2, D + 1))
    with pytest.raises(RuntimeError, match="activation should be relu/gelu, not tanh"):
        enn.TransformerEncoderLayer(D, NHEAD, activation="tanh")


def _mhaf_call(F, lib, arrays, kwargs):
    """F.multi_head_attention_forward with the positional weights from ``arrays`` (numpy) in ``lib``."""
    t = {k: (None if v is None else lib(v)) for k, v in arrays.items()}
    return F.multi_head_attention_forward(
        t["q"], t["k"], t["v"], 6, 2, t["in_w"], t["in_b"], t["bias_k"], t["bias_v"], kwargs.pop("add_zero_attn", False),
        0.0, t["out_w"], t["out_b"],
        q_proj_weight=t.get("q_w"), k_proj_weight=t.get("k_w"), v_proj_weight=t.get("v_w"),
        static_k=t.get("static_k"), static_v=t.get("static_v"),
        key_padding_mask=t.get("kpm"), attn_mask=t.get("mask"), **kwargs,
    )


@pytest.mark.filterwarnings("ignore:Support for mismatched key_padding_mask and attn_mask")
@pytest.mark.parametrize(
    "variant",
    ["packed", "separate", "bias_kv_zero_attn", "static_kv", "masks_no_weights", "per_head_weights", "unbatched"],
)
def test_multi_head_attention_forward_functional_matches_torch(variant):
    rng = np.random.default_rng(5)
    L, S, N, E, H = 3, 4, 2, 6, 2

    def r(*shape):
        return rng.standard_normal(shape).astype(np.float32) * 0.5

    arrays = {"q": r(L, N, E), "k": r(S, N, E), "v": r(S, N, E), "in_w": r(3 * E, E), "in_b": r(3 * E),
              "bias_k": None, "bias_v": None, "out_w": r(E, E), "out_b": r(E)}
    kwargs = {}
    if variant == "separate":
        arrays.update(k=r(S, N, 4), v=r(S, N, 5), in_w=None, q_w=r(E, E), k_w=r(E, 4), v_w=r(E, 5))
        kwargs["use_separate_proj_weight"] = True
    elif variant == "bias_kv_zero_attn":
        arrays.update(bias_k=r(1, 1, E), bias_v=r(1, 1, E), kpm=rng.random((N, S)) > 0.7)
        kwargs["add_zero_attn"] = True
    elif variant == "static_kv":
        arrays.update(static_k=r(N * H, S, E // H), static_v=r(N * H, S, E // H))
    elif variant == "masks_no_weights":
        arrays.update(mask=np.triu(np.ones((L, S), bool), 1), kpm=r(N, S))
        kwargs["need_weights"] = False
    elif variant == "per_head_weights":
        arrays.update(mask=r(N * H, L, S))
        kwargs["average_attn_weights"] = False
    elif variant == "unbatched":
        arrays.update(q=r(L, E), k=r(S, E), v=r(S, E), kpm=np.array([False, True, False, False]))
    grads = ("q", "in_w", "out_w") if variant != "separate" else ("q", "q_w", "k_w")

    t_leaves, e_leaves = {}, {}

    def t_lib(a):
        t = torch.from_numpy(a.copy())
        for name in grads:
            if arrays[name] is a:
                t_leaves[name] = t.requires_grad_()
        return t

    def e_lib(a):
        e = ember.from_numpy(a.copy())
        for name in grads:
            if arrays[name] is a:
                e_leaves[name] = e.requires_grad_()
        return e

    t_out, t_w = _mhaf_call(torch.nn.functional, t_lib, arrays, dict(kwargs))
    e_out, e_w = _mhaf_call(ember.nn.functional, e_lib, arrays, dict(kwargs))
    np.testing.assert_allclose(_np(e_out), _np(t_out), rtol=RTOL, atol=ATOL)
    if t_w is None:
        assert e_w is None
    else:
        np.testing.assert_allclose(_np(e_w), _np(t_w), rtol=RTOL, atol=ATOL)
    g = rng.standard_normal(tuple(t_out.shape)).astype(np.float32)
    (t_out * torch.from_numpy(g)).sum().backward()
    (e_out * ember.from_numpy(g)).sum().backward()
    for name in grads:
        np.testing.assert_allclose(e_leaves[name].grad.numpy(), t_leaves[name].grad.numpy(), rtol=GRAD_RTOL,
                                   atol=GRAD_ATOL, err_msg=name)


def test_multi_head_attention_forward_signature_and_module_route():
    import inspect

    def params(f):
        return [(p.name, p.kind, p.default) for p in inspect.signature(f).parameters.values()]

    assert params(ember.nn.functional.multi_head_attention_forward) == params(
        torch.nn.functional.multi_head_attention_forward
    )
    # the module's forward goes through the public functional (patching it is seen)
    calls = []
    original = ember.nn.functional.multi_head_attention_forward

    def spy(*args, **kwargs):
        calls.append(kwargs.get("need_weights"))
        return original(*args, **kwargs)

    ember.nn.functional.multi_head_attention_forward = spy
    try:
        x = ember.randn(2, 3, 6)
        enn.MultiheadAttention(6, 2)(x, x, x, need_weights=False)
    finally:
        ember.nn.functional.multi_head_attention_forward = original
    assert calls == [False]
