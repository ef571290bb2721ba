"""ember.nn recurrent layers and ember.nn.utils.rnn against numpy references: one LSTM/GRU/RNN step by hand,
shapes for every configuration, packed == padded on the valid steps, gradients, initialisation and errors."""

import math

import numpy as np
import pytest

import ember
import ember.nn as nn
from ember.nn.utils.rnn import (
    PackedSequence,
    invert_permutation,
    pack_padded_sequence,
    pack_sequence,
    pad_packed_sequence,
    pad_sequence,
    unpack_sequence,
    unpad_sequence,
)

RNG = np.random.default_rng(0)


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _np(t):
    return t.detach().numpy().astype(np.float64)


def _lstm_ref(x, h, c, w_ih, w_hh, b_ih, b_hh, w_hr=None):
    """numpy LSTM over a sequence ``x`` ``(T, N, I)``; returns outputs ``(T, N, H_out)``, h, c."""
    outs = []
    for xt in x:
        g = xt @ w_ih.T + b_ih + h @ w_hh.T + b_hh
        i, f, gg, o = np.split(g, 4, axis=1)
        c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(gg)
        h = _sigmoid(o) * np.tanh(c)
        if w_hr is not None:
            h = h @ w_hr.T
        outs.append(h)
    return np.stack(outs), h, c


def _gru_ref(x, h, w_ih, w_hh, b_ih, b_hh):
    outs = []
    for xt in x:
        gi = xt @ w_ih.T + b_ih
        gh = h @ w_hh.T + b_hh
        ir, iz, inn = np.split(gi, 3, axis=1)
        hr, hz, hn = np.split(gh, 3, axis=1)
        r, z = _sigmoid(ir + hr), _sigmoid(iz + hz)
        n = np.tanh(inn + r * hn)
        h = (1 - z) * n + z * h
        outs.append(h)
    return np.stack(outs), h


def _rnn_ref(x, h, w_ih, w_hh, b_ih, b_hh, act):
    outs = []
    for xt in x:
        h = act(xt @ w_ih.T + b_ih + h @ w_hh.T + b_hh)
        outs.append(h)
    return np.stack(outs), h


def test_lstm_matches_numpy_with_projection_and_initial_state():
    m = nn.LSTM(3, 5, proj_size=2).double()
    x = RNG.standard_normal((4, 2, 3))
    h0, c0 = RNG.standard_normal((1, 2, 2)), RNG.standard_normal((1, 2, 5))
    out, (h, c) = m(ember.from_numpy(x), (ember.from_numpy(h0), ember.from_numpy(c0)))
    p = {k: _np(v) for k, v in m.state_dict().items()}
    ref_out, ref_h, ref_c = _lstm_ref(
        x, h0[0], c0[0], p["weight_ih_l0"], p["weight_hh_l0"], p["bias_ih_l0"], p["bias_hh_l0"], p["weight_hr_l0"]
    )
    np.testing.assert_allclose(_np(out), ref_out, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(_np(h)[0], ref_h, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(_np(c)[0], ref_c, rtol=1e-10, atol=1e-12)


def test_gru_bidirectional_matches_numpy():
    m = nn.GRU(3, 4, bidirectional=True, batch_first=True).double()
    x = RNG.standard_normal((2, 5, 3))  # (N, T, I)
    out, h = m(ember.from_numpy(x))
    p = {k: _np(v) for k, v in m.state_dict().items()}
    xt = x.transpose(1, 0, 2)
    zeros = np.zeros((2, 4))
    fwd, hf = _gru_ref(xt, zeros, p["weight_ih_l0"], p["weight_hh_l0"], p["bias_ih_l0"], p["bias_hh_l0"])
    bwd, hb = _gru_ref(
        xt[::-1],
        zeros,
        p["weight_ih_l0_reverse"],
        p["weight_hh_l0_reverse"],
        p["bias_ih_l0_reverse"],
        p["bias_hh_l0_reverse"],
    )
    ref = np.concatenate([fwd, bwd[::-1]], axis=2).transpose(1, 0, 2)
    np.testing.assert_allclose(_np(out), ref, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(_np(h), np.stack([hf, hb]), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("nonlinearity,act", [("tanh", np.tanh), ("relu", lambda v: np.maximum(v, 0))])
def test_two_layer_rnn_matches_numpy(nonlinearity, act):
    m = nn.RNN(3, 4, 2, nonlinearity=nonlinearity, bias=False).double()
    assert list(m.state_dict()) == ["weight_ih_l0", "weight_hh_l0", "weight_ih_l1", "weight_hh_l1"]
    x = RNG.standard_normal((6, 2, 3))
    out, h = m(ember.from_numpy(x))
    p = {k: _np(v) for k, v in m.state_dict().items()}
    zb = np.zeros(4)
    o1, h1 = _rnn_ref(x, np.zeros((2, 4)), p["weight_ih_l0"], p["weight_hh_l0"], zb, zb, act)
    o2, h2 = _rnn_ref(o1, np.zeros((2, 4)), p["weight_ih_l1"], p["weight_hh_l1"], zb, zb, act)
    np.testing.assert_allclose(_np(out), o2, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(_np(h), np.stack([h1, h2]), rtol=1e-10, atol=1e-12)


def test_cells_match_numpy():
    x, h, c = RNG.standard_normal((3, 4)), RNG.standard_normal((3, 5)), RNG.standard_normal((3, 5))
    e = ember.from_numpy
    lstm = nn.LSTMCell(4, 5).double()
    p = {k: _np(v) for k, v in lstm.state_dict().items()}
    h1, c1 = lstm(e(x), (e(h), e(c)))
    _, rh, rc = _lstm_ref(x[None], h, c, p["weight_ih"], p["weight_hh"], p["bias_ih"], p["bias_hh"])
    np.testing.assert_allclose(_np(h1), rh, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(_np(c1), rc, rtol=1e-10, atol=1e-12)
    gru = nn.GRUCell(4, 5).double()
    p = {k: _np(v) for k, v in gru.state_dict().items()}
    _, rh = _gru_ref(x[None], h, p["weight_ih"], p["weight_hh"], p["bias_ih"], p["bias_hh"])
    np.testing.assert_allclose(_np(gru(e(x), e(h))), rh, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(_np(gru(e(x[0]), e(h[0]))), rh[0], rtol=1e-10, atol=1e-12)  # unbatched
    rnn = nn.RNNCell(4, 5, nonlinearity="relu").double()
    p = {k: _np(v) for k, v in rnn.state_dict().items()}
    ref = np.maximum(x @ p["weight_ih"].T + p["bias_ih"] + p["bias_hh"], 0)  # hx omitted: zeros
    np.testing.assert_allclose(_np(rnn(e(x))), ref, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("mode", ["RNN", "LSTM", "GRU"])
@pytest.mark.parametrize("num_layers", [1, 2])
@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("proj_size", [0, 2])
def test_shapes_all_configs(mode, num_layers, bidirectional, batch_first, proj_size):
    if proj_size and mode != "LSTM":
        with pytest.raises(ValueError, match="proj_size argument is only supported for LSTM"):
            getattr(nn, mode)(3, 4, proj_size=proj_size)
        return
    kwargs = {"bidirectional": bidirectional, "batch_first": batch_first}
    if proj_size:
        kwargs["proj_size"] = proj_size
    m = getattr(nn, mode)(3, 4, num_layers, **kwargs)
    d = 2 if bidirectional else 1
    h_out = proj_size or 4
    x = ember.randn(2, 5, 3) if batch_first else ember.randn(5, 2, 3)
    out, hidden = m(x)
    assert tuple(out.shape) == ((2, 5, d * h_out) if batch_first else (5, 2, d * h_out))
    h = hidden[0] if mode == "LSTM" else hidden
    assert tuple(h.shape) == (num_layers * d, 2, h_out)
    if mode == "LSTM":
        assert tuple(hidden[1].shape) == (num_layers * d, 2, 4)
    # unbatched
    out_u, hidden_u = m(ember.randn(5, 3))
    assert tuple(out_u.shape) == (5, d * h_out)
    assert tuple((hidden_u[0] if mode == "LSTM" else hidden_u).shape) == (num_layers * d, h_out)
    # the last step of the forward direction's output is its final state (last layer)
    np.testing.assert_allclose(
        _np(out if not batch_first else out.transpose(0, 1))[-1, :, :h_out], _np(h)[(num_layers - 1) * d], rtol=1e-6
    )


@pytest.mark.parametrize("mode", ["RNN", "LSTM", "GRU"])
@pytest.mark.parametrize("bidirectional", [False, True])
def test_packed_equals_padded_per_sequence(mode, bidirectional):
    """Each sequence of a packed batch gives exactly what running it alone (unpadded) gives."""
    m = getattr(nn, mode)(3, 4, 2, bidirectional=bidirectional).double()
    lengths = [2, 5, 1, 3]
    seqs = [RNG.standard_normal((n, 3)) for n in lengths]
    padded = ember.from_numpy(np.stack([np.pad(s, ((0, 5 - len(s)), (0, 0))) for s in seqs], axis=1))
    packed = pack_padded_sequence(padded, lengths, enforce_sorted=False)
    out, hidden = m(packed)
    assert isinstance(out, PackedSequence)
    out_pad, out_len = pad_packed_sequence(out)
    assert out_len.tolist() == lengths
    h = hidden[0] if mode == "LSTM" else hidden
    for b, s in enumerate(seqs):
        ref_out, ref_hidden = m(ember.from_numpy(s))  # unbatched, only the valid steps
        ref_h = ref_hidden[0] if mode == "LSTM" else ref_hidden
        np.testing.assert_allclose(_np(out_pad)[: lengths[b], b], _np(ref_out), rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(_np(out_pad)[lengths[b] :, b], 0.0)
        np.testing.assert_allclose(_np(h)[:, b], _np(ref_h), rtol=1e-10, atol=1e-12)
        if mode == "LSTM":
            np.testing.assert_allclose(_np(hidden[1])[:, b], _np(ref_hidden[1]), rtol=1e-10, atol=1e-12)


def test_gradients_flow_to_all_parameters_input_and_state():
    m = nn.LSTM(3, 4, 2, bidirectional=True, proj_size=2)
    x = ember.randn(4, 2, 3, requires_grad=True)
    h0 = ember.randn(4, 2, 2, requires_grad=True)
    c0 = ember.randn(4, 2, 4, requires_grad=True)
    out, (h, c) = m(pack_padded_sequence(x, [4, 2]), (h0, c0))
    (out.data.sum() + h.sum() + c.sum()).backward()
    for name, p in m.named_parameters():
        assert p.grad is not None and p.grad.abs().sum().item() > 0, name
    for t in (x, h0, c0):
        assert t.grad is not None and tuple(t.grad.shape) == tuple(t.shape)
    assert x.grad[2:, 1].abs().sum().item() == 0  # padded steps get no gradient
    assert x.grad[2:, 0].abs().sum().item() > 0


def test_gradient_matches_finite_differences():
    m = nn.GRU(2, 3).double()
    x = ember.from_numpy(RNG.standard_normal((3, 1, 2)))
    w = m.weight_hh_l0
    out, _ = m(x)
    out.sum().backward()
    eps, idx = 1e-6, (4, 1)
    with ember.no_grad():
        base = w[idx].item()
        w[idx] = base + eps
        plus = m(x)[0].sum().item()
        w[idx] = base - eps
        minus = m(x)[0].sum().item()
        w[idx] = base
    assert w.grad[idx].item() == pytest.approx((plus - minus) / (2 * eps), rel=1e-6)


def test_default_init_and_dropout():
    ember.manual_seed(0)
    m = nn.LSTM(30, 100, 2, dropout=0.5)
    bound = 1 / math.sqrt(100)
    for name, p in m.named_parameters():
        a = _np(p)
        assert np.abs(a).max() <= bound and np.abs(a).max() > 0.95 * bound, name
    a = _np(m.weight_ih_l1)
    assert a.var() == pytest.approx(bound**2 / 3, rel=0.05)
    x = ember.randn(3, 2, 30)
    m.eval()
    np.testing.assert_array_equal(_np(m(x)[0]), _np(m(x)[0]))
    m.train()
    ember.manual_seed(1)
    a = _np(m(x)[0])
    ember.manual_seed(2)
    assert not np.allclose(a, _np(m(x)[0]))  # dropout between the layers is active in training
    with pytest.warns(UserWarning, match="non-zero dropout expects num_layers greater than 1"):
        nn.GRU(3, 4, dropout=0.2)


def test_state_dict_roundtrip_through_save(tmp_path):
    m = nn.GRU(3, 4, 2, bidirectional=True)
    ember.save(m.state_dict(), tmp_path / "gru.pt")
    m2 = nn.GRU(3, 4, 2, bidirectional=True)
    m2.load_state_dict(ember.load(tmp_path / "gru.pt"))
    x = ember.randn(5, 2, 3)
    np.testing.assert_array_equal(_np(m(x)[0]), _np(m2(x)[0]))
    assert len(m.all_weights) == 4 and len(m.all_weights[1]) == 4
    assert m.all_weights[1][0] is m.weight_ih_l0_reverse and m.all_weights[2][3] is m.bias_hh_l1


def test_errors():
    with pytest.raises(ValueError, match="dropout should be a number in range"):
        nn.LSTM(3, 4, dropout=1.5)
    with pytest.raises(ValueError, match="proj_size has to be smaller than hidden_size"):
        nn.LSTM(3, 4, proj_size=4)
    with pytest.raises(ValueError, match="hidden_size must be greater than zero"):
        nn.GRU(3, 0)
    with pytest.raises(TypeError, match="batch_first should be of type bool"):
        nn.GRU(3, 4, batch_first=1)
    with pytest.raises(ValueError, match="Unknown nonlinearity 'sigmoid'"):
        nn.RNN(3, 4, nonlinearity="sigmoid")
    m = nn.LSTM(3, 4)
    with pytest.raises(RuntimeError, match=r"input.size\(-1\) must be equal to input_size. Expected 3, got 5"):
        m(ember.randn(2, 2, 5))
    with pytest.raises(ValueError, match="LSTM: Expected input to be 2D or 3D, got 4D instead"):
        m(ember.randn(2, 2, 2, 3))
    with pytest.raises(RuntimeError, match=r"Expected hidden\[0\] size \(1, 2, 4\), got \[1, 3, 4\]"):
        m(ember.randn(5, 2, 3), (ember.zeros(1, 3, 4), ember.zeros(1, 2, 4)))
    with pytest.raises(RuntimeError, match="For batched 3-D input, hx and cx should also be 3-D"):
        m(ember.randn(5, 2, 3), (ember.zeros(2, 4), ember.zeros(2, 4)))
    with pytest.raises(RuntimeError, match="For unbatched 2-D input, hx should also be 2-D but got 3-D tensor"):
        nn.GRU(3, 4)(ember.randn(5, 3), ember.zeros(1, 1, 4))
    with pytest.raises(ValueError, match="does not match weight dtype"):
        nn.GRU(3, 4)(ember.randn(5, 2, 3, dtype=ember.float64))
    with pytest.raises(RuntimeError, match="input has inconsistent input_size: got 2 expected 3"):
        nn.GRUCell(3, 4)(ember.randn(2, 2))
    with pytest.raises(ValueError, match="LSTMCell: Expected hx\\[1\\] to be 1D or 2D, got 3D instead"):
        nn.LSTMCell(3, 4)(ember.randn(2, 3), (ember.zeros(2, 4), ember.zeros(1, 2, 4)))


def test_pack_pad_utilities_values():
    a, b, c = ember.tensor([1.0, 2.0, 3.0]), ember.tensor([4.0, 5.0]), ember.tensor([6.0])
    padded = pad_sequence([b, a, c], batch_first=True, padding_value=-1)
    np.testing.assert_array_equal(padded.numpy(), [[4, 5, -1], [1, 2, 3], [6, -1, -1]])
    left = pad_sequence([b, a, c], padding_side="left")
    np.testing.assert_array_equal(left.numpy(), [[0, 1, 0], [4, 2, 0], [5, 3, 6]])
    p = pack_sequence([b, a, c], enforce_sorted=False)
    assert p.data.tolist() == [1, 4, 6, 2, 5, 3] and p.batch_sizes.tolist() == [3, 2, 1]
    assert p.sorted_indices.tolist() == [1, 0, 2] and p.unsorted_indices.tolist() == [1, 0, 2]
    out, lengths = pad_packed_sequence(p, total_length=4)
    np.testing.assert_array_equal(out.numpy(), [[4, 1, 6], [5, 2, 0], [0, 3, 0], [0, 0, 0]])
    assert lengths.tolist() == [2, 3, 1]
    assert [t.tolist() for t in unpack_sequence(p)] == [[4, 5], [1, 2, 3], [6]]
    assert [t.tolist() for t in unpad_sequence(out, lengths)] == [[4, 5], [1, 2, 3], [6]]
    assert invert_permutation(ember.tensor([2, 0, 3, 1])).tolist() == [1, 3, 0, 2]
    assert invert_permutation(None) is None
    q = p.double()
    assert q.data.dtype == ember.float64 and q.batch_sizes is p.batch_sizes
    with pytest.raises(ValueError, match="Expected total_length to be at least"):
        pad_packed_sequence(p, total_length=2)
    with pytest.raises(RuntimeError, match="must be sorted in decreasing order"):
        pack_padded_sequence(ember.zeros(3, 2), [1, 3])
    with pytest.raises(RuntimeError, match="Length of all samples has to be greater than 0"):
        pack_padded_sequence(ember.zeros(3, 2), [3, 0])
    with pytest.raises(RuntimeError, match="Expected padding_side to be one of left or right"):
        pad_sequence([a], padding_side="middle")


def test_packing_is_differentiable():
    x = ember.randn(4, 3, 2, requires_grad=True)
    p = pack_padded_sequence(x, [4, 2, 1])
    out, _ = pad_packed_sequence(PackedSequence(p.data * 2, p.batch_sizes))
    out.sum().backward()
    mask = np.zeros((4, 3, 1))
    mask[:4, 0] = mask[:2, 1] = mask[:1, 2] = 1
    np.testing.assert_array_equal(x.grad.numpy(), np.broadcast_to(2 * mask, (4, 3, 2)))
