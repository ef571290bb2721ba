"""ember.nn RNN/LSTM/GRU, the cells and ember.nn.utils.rnn against torch: torch's weights copied over ->
same state_dict keys (names and order), same outputs, final states and gradients, for padded and packed input.

ember's modules and tensors live on the backend's device (``_parity_device``); torch's stay on its CPU (see
TORCH_DEVICE below)."""

import numpy as np
import pytest
import torch
from _parity_device import EMBER_DEVICE

import ember
import ember.nn as enn
from ember.nn.utils import rnn as ernn

pytestmark = pytest.mark.parity

# torch runs on its CPU here even with the cuda backend: cuDNN's RNNs refuse backward in eval mode, and its
# float32 kernels differ from the sequential recurrence by ~5e-6, more than these tolerances.
TORCH_DEVICE = "cpu"

RNG = np.random.default_rng(0)


def _e(a):
    return ember.from_numpy(np.ascontiguousarray(a)).to(EMBER_DEVICE)


def _t(a):
    return torch.from_numpy(np.ascontiguousarray(a)).to(TORCH_DEVICE)


def _np(t):
    """The values of a torch or ember tensor, from any device, as numpy."""
    return t.detach().cpu().numpy()


def _pair(cls_name, args, kwargs, dtype=torch.float64):
    torch.manual_seed(0)
    tm = getattr(torch.nn, cls_name)(*args, **kwargs).to(dtype)
    em = getattr(enn, cls_name)(*args, **kwargs).to(ember.float64 if dtype == torch.float64 else ember.float32)
    assert list(em.state_dict()) == list(tm.state_dict())
    em.load_state_dict({k: _e(_np(v)) for k, v in tm.state_dict().items()})
    return tm.to(TORCH_DEVICE), em.to(EMBER_DEVICE)


def _flat(out):
    """Flatten (output, hidden) structures into a list of tensors (PackedSequence -> its data)."""
    if isinstance(out, (tuple, list)) and not hasattr(out, "batch_sizes"):
        return [t for o in out for t in _flat(o)]
    if hasattr(out, "batch_sizes"):
        return [out.data]
    return [out]


def _check(tm, em, t_args, e_args, rtol=1e-9, atol=1e-10):
    t_out = _flat(tm(*t_args))
    e_out = _flat(em(*e_args))
    assert len(t_out) == len(e_out)
    for t, e in zip(t_out, e_out):
        assert tuple(e.shape) == tuple(t.shape)
        np.testing.assert_allclose(_np(e), _np(t), rtol=rtol, atol=atol)
    weights = [RNG.standard_normal(tuple(t.shape)) for t in t_out]
    t_loss = sum((t * _t(w).to(t.dtype)).sum() for t, w in zip(t_out, weights))
    e_loss = sum((e * _e(w).to(e.dtype)).sum() for e, w in zip(e_out, weights))
    t_loss.backward()
    e_loss.backward()
    for (name, tp), (ename, ep) in zip(tm.named_parameters(), em.named_parameters()):
        assert name == ename
        np.testing.assert_allclose(_np(ep.grad), _np(tp.grad), rtol=rtol * 10, atol=atol * 10, err_msg=name)
    return t_out, e_out


def _inputs(*shapes, dtype=np.float64):
    arrays = [RNG.standard_normal(s).astype(dtype) for s in shapes]
    t = [_t(a).requires_grad_(True) for a in arrays]
    e = [_e(a).requires_grad_(True) for a in arrays]
    return t, e


CASES = [
    ("RNN", (4, 5), {}),
    ("RNN", (4, 5, 2), {"nonlinearity": "relu", "bidirectional": True}),
    ("RNN", (4, 5, 2, "tanh", False), {"batch_first": True}),
    ("LSTM", (4, 5), {}),
    ("LSTM", (4, 6, 2), {"bidirectional": True, "batch_first": True}),
    ("LSTM", (4, 6, 2), {"proj_size": 3, "bidirectional": True}),
    ("LSTM", (4, 6), {"proj_size": 2, "bias": False, "batch_first": True}),
    ("GRU", (4, 5), {}),
    ("GRU", (4, 5, 2), {"bidirectional": True}),
    ("GRU", (4, 5, 3), {"batch_first": True, "bias": False, "dropout": 0.3}),
]


def _hidden_shapes(tm, batch):
    d = 2 if tm.bidirectional else 1
    real = tm.proj_size if getattr(tm, "proj_size", 0) else tm.hidden_size
    shapes = [(tm.num_layers * d, batch, real)]
    if isinstance(tm, torch.nn.LSTM):
        shapes.append((tm.num_layers * d, batch, tm.hidden_size))
    return shapes


@pytest.mark.parametrize("name,args,kwargs", CASES)
@pytest.mark.parametrize("with_hx", [False, True])
def test_padded_forward_backward(name, args, kwargs, with_hx):
    tm, em = _pair(name, args, kwargs)
    tm.eval(), em.eval()  # dropout (if any) off in both
    batch, steps = 3, 6
    shape = (batch, steps, 4) if kwargs.get("batch_first") else (steps, batch, 4)
    (tx,), (ex,) = _inputs(shape)
    t_args, e_args = [tx], [ex]
    if with_hx:
        th, eh = _inputs(*_hidden_shapes(tm, batch))
        t_args.append(tuple(th) if name == "LSTM" else th[0])
        e_args.append(tuple(eh) if name == "LSTM" else eh[0])
    _check(tm, em, t_args, e_args)
    np.testing.assert_allclose(_np(ex.grad), _np(tx.grad), rtol=1e-8, atol=1e-10)
    if with_hx:
        for t, e in zip(th, eh):
            np.testing.assert_allclose(_np(e.grad), _np(t.grad), rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("name,args,kwargs", CASES)
@pytest.mark.parametrize("enforce_sorted", [True, False])
def test_packed_forward_backward(name, args, kwargs, enforce_sorted):
    tm, em = _pair(name, args, kwargs)
    tm.eval(), em.eval()
    bf = kwargs.get("batch_first", False)
    lengths = [6, 4, 4, 1] if enforce_sorted else [3, 6, 1, 4]
    shape = (4, 6, 4) if bf else (6, 4, 4)
    (tx,), (ex,) = _inputs(shape)
    tp = torch.nn.utils.rnn.pack_padded_sequence(tx, lengths, batch_first=bf, enforce_sorted=enforce_sorted)
    ep = ernn.pack_padded_sequence(ex, lengths, batch_first=bf, enforce_sorted=enforce_sorted)
    assert ep.batch_sizes.tolist() == tp.batch_sizes.tolist()
    th, eh = _inputs(*_hidden_shapes(tm, 4))
    t_hx = tuple(th) if name == "LSTM" else th[0]
    e_hx = tuple(eh) if name == "LSTM" else eh[0]
    t_res = tm(tp, t_hx)
    e_res = em(ep, e_hx)
    assert isinstance(e_res[0], ernn.PackedSequence)
    t_pad, t_len = torch.nn.utils.rnn.pad_packed_sequence(t_res[0], batch_first=bf)
    e_pad, e_len = ernn.pad_packed_sequence(e_res[0], batch_first=bf)
    assert e_len.tolist() == t_len.tolist()
    np.testing.assert_allclose(_np(e_pad), _np(t_pad), rtol=1e-9, atol=1e-10)
    t_states = _flat(t_res[1])
    e_states = _flat(e_res[1])
    for t, e in zip(t_states, e_states):
        np.testing.assert_allclose(_np(e), _np(t), rtol=1e-9, atol=1e-10)
    w = RNG.standard_normal(tuple(t_pad.shape))
    ws = [RNG.standard_normal(tuple(t.shape)) for t in t_states]
    (((t_pad * _t(w)).sum()) + sum((t * _t(v)).sum() for t, v in zip(t_states, ws))).backward()
    (((e_pad * _e(w)).sum()) + sum((e * _e(v)).sum() for e, v in zip(e_states, ws))).backward()
    for (pname, tparam), (_, eparam) in zip(tm.named_parameters(), em.named_parameters()):
        np.testing.assert_allclose(_np(eparam.grad), _np(tparam.grad), rtol=1e-8, atol=1e-10, err_msg=pname)
    np.testing.assert_allclose(_np(ex.grad), _np(tx.grad), rtol=1e-8, atol=1e-10)
    for t, e in zip(th, eh):
        np.testing.assert_allclose(_np(e.grad), _np(t.grad), rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("name", ["RNN", "LSTM", "GRU"])
def test_unbatched_and_float32(name):
    tm, em = _pair(name, (3, 4, 2), {"bidirectional": True}, dtype=torch.float32)
    (tx,), (ex,) = _inputs((5, 3), dtype=np.float32)
    _check(tm, em, [tx], [ex], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(_np(ex.grad), _np(tx.grad), rtol=1e-4, atol=1e-5)


CELL_CASES = [
    ("RNNCell", (4, 5), {}),
    ("RNNCell", (4, 5), {"nonlinearity": "relu", "bias": False}),
    ("LSTMCell", (4, 5), {}),
    ("GRUCell", (4, 5), {}),
    ("GRUCell", (4, 5), {"bias": False}),
]


@pytest.mark.parametrize("name,args,kwargs", CELL_CASES)
@pytest.mark.parametrize("batched", [True, False])
def test_cells(name, args, kwargs, batched):
    tm, em = _pair(name, args, kwargs)
    lead = (3,) if batched else ()
    (tx, *th), (ex, *eh) = _inputs(lead + (4,), *([lead + (5,)] * (2 if name == "LSTMCell" else 1)))
    t_hx = tuple(th) if name == "LSTMCell" else th[0]
    e_hx = tuple(eh) if name == "LSTMCell" else eh[0]
    _check(tm, em, [tx, t_hx], [ex, e_hx])
    np.testing.assert_allclose(_np(ex.grad), _np(tx.grad), rtol=1e-8, atol=1e-10)
    for t, e in zip(th, eh):
        np.testing.assert_allclose(_np(e.grad), _np(t.grad), rtol=1e-8, atol=1e-10)
    # without a state: zeros
    t_out, e_out = _flat(tm(tx)), _flat(em(ex))
    for t, e in zip(t_out, e_out):
        np.testing.assert_allclose(_np(e), _np(t), rtol=1e-9, atol=1e-10)


def test_reprs_match_torch():
    for name, args, kwargs in CASES + CELL_CASES:
        torch.manual_seed(0)
        assert repr(getattr(enn, name)(*args, **kwargs)) == repr(getattr(torch.nn, name)(*args, **kwargs))


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("padding_side", ["right", "left"])
def test_pad_sequence(batch_first, padding_side):
    arrays = [RNG.standard_normal((n, 2)) for n in (2, 5, 3)]
    t = torch.nn.utils.rnn.pad_sequence(
        [_t(a) for a in arrays], batch_first=batch_first, padding_value=-1.5, padding_side=padding_side
    )
    e = ernn.pad_sequence(
        [_e(a) for a in arrays], batch_first=batch_first, padding_value=-1.5, padding_side=padding_side
    )
    np.testing.assert_array_equal(_np(e), _np(t))


@pytest.mark.parametrize("enforce_sorted", [True, False])
def test_pack_unpack_roundtrip(enforce_sorted):
    lengths = (5, 3, 3, 1) if enforce_sorted else (3, 5, 1, 3)
    arrays = [RNG.standard_normal((n, 2)) for n in lengths]
    tp = torch.nn.utils.rnn.pack_sequence([_t(a) for a in arrays], enforce_sorted=enforce_sorted)
    ep = ernn.pack_sequence([_e(a) for a in arrays], enforce_sorted=enforce_sorted)
    np.testing.assert_array_equal(_np(ep.data), _np(tp.data))
    assert ep.batch_sizes.tolist() == tp.batch_sizes.tolist()
    for attr in ("sorted_indices", "unsorted_indices"):
        tv, ev = getattr(tp, attr), getattr(ep, attr)
        assert (ev is None) == (tv is None)
        if tv is not None:
            assert ev.tolist() == tv.tolist()
    t_pad, t_len = torch.nn.utils.rnn.pad_packed_sequence(tp, batch_first=True, padding_value=7.0, total_length=7)
    e_pad, e_len = ernn.pad_packed_sequence(ep, batch_first=True, padding_value=7.0, total_length=7)
    np.testing.assert_array_equal(_np(e_pad), _np(t_pad))
    assert e_len.tolist() == t_len.tolist() and e_len.dtype == ember.int64
    for a, e in zip(arrays, ernn.unpack_sequence(ep)):
        np.testing.assert_array_equal(_np(e), a)
