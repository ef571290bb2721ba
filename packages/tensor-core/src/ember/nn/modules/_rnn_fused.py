"""One layer-direction of ``nn.RNN``/``LSTM``/``GRU`` on the CPU as one computation and one autograd node.

The reference recurrence (``rnn._run_direction``) records about a dozen ember ops per time step, and backward
runs each one's formula: for a 2-layer LSTM over 32 steps that is over 1,500 dispatched ops per training step,
and ember took 10x PyTorch's time. Here the whole direction runs on numpy arrays: per step one matrix product
``h W_hh^T`` (numpy's BLAS) and one ``ember._C`` call for the gate arithmetic (``csrc/rnn.cpp``; the Elman
RNN's one activation stays in numpy), into buffers allocated once. Backward (:class:`_Recurrence`, an
``ember.autograd.Function``) walks the steps back with the activations the forward kept, one kernel call and
one product per step, and forms ``dW_hh`` and ``db_hh`` with one product and one sum over all steps. For
LSTM and GRU the time loop itself runs in C++ (``_C.lstm_forward_sequence`` and the like: each step's product
one call of numpy's cblas gemm, found by ``_blas_threads``), the Python loop where that gemm is not found.

Taken only where it gives the reference's result without its graph: plain CPU tensors of float32/float64,
every batch size equal (a padded batch, or a packed one whose sequences all have one length), no LSTM
projection, no dispatch mode (``make_fx``, the profiler, vmap's batched tensors), not while ``ember.compile``
traces. A backward that records (``create_graph=True``) recomputes the direction with the reference's ember
ops and differentiates that, so higher derivatives stay exact. Values: the reference's formulas in the
input's dtype, except the order of two additions (``(h W_hh^T + (x W_ih^T + b_ih)) + b_hh`` is summed as
``h W_hh^T + (x W_ih^T + b_ih + b_hh)``), so float32 results differ from the reference by rounding.

The gates are in PyTorch's order (LSTM: i, f, g, o; GRU: r, z, n) in blocks of ``hidden`` columns.
"""

from __future__ import annotations

import numpy as np

import ember
from ember import _C
from ember._autograd_functions import function_class
from ember._ops import _blas_threads
from ember._ops._dispatch import PLAIN_TENSOR_TYPES, ops_intercepted
from ember._ops._dispatch import state as _dispatch_state

__all__ = ["fused_direction"]

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))

# The csrc/rnn.cpp kernel each mode needs (an ember._C built before it lacks them: the reference runs then).
_STEP_KERNELS = {"LSTM": "lstm_forward_step", "GRU": "gru_forward_step", "RNN_TANH": "__doc__", "RNN_RELU": "__doc__"}


def _applies(mode, tensors, batch_sizes, w_hr):
    """Whether the fused path gives this direction the reference's result (see the module docstring)."""
    if ember.compiler.is_compiling():
        return False  # first: ember.compile traces the reference ops (it can't read ``_data`` while tracing)
    if w_hr is not None or ops_intercepted() or not hasattr(_C, _STEP_KERNELS.get(mode, "_")):
        return False
    first = batch_sizes[0]
    if any(b != first for b in batch_sizes):
        return False
    dtype = tensors[0]._data.dtype
    if dtype not in _FLOATS:
        return False
    for t in tensors:
        if t is None:
            continue
        if type(t) not in PLAIN_TENSOR_TYPES or type(t._data) is not np.ndarray or t._data.dtype != dtype:
            return False
    return True


def fused_direction(mode, gi, batch_sizes, h0, c0, w_hh, b_hh, w_hr, reverse):
    """``rnn._run_direction``'s result, ``(output rows, h_n, c_n)``, computed in one piece; None where the
    fused path does not apply (the caller then runs the reference)."""
    tensors = (gi, h0, c0, w_hh, b_hh)
    if not _applies(mode, tensors, batch_sizes, w_hr):
        return None
    recording = _dispatch_state.grad_enabled and any(t is not None and t._requires_grad for t in tensors)
    if not recording:
        work = _forward(mode, _steps_view(gi, len(batch_sizes)), h0._data, _data(c0), w_hh._data, _data(b_hh),
                        reverse, keep=False)
        return _outputs(work, gi._device)
    function = function_class("_Recurrence", _node_forward, _node_backward)
    if function is None:  # ember-autograd is not installed: the reference raises its own error
        return None
    out, h_n, c_n = function.apply(mode, reverse, len(batch_sizes), gi, h0, c0, w_hh, b_hh)
    return out, h_n, (c_n if mode == "LSTM" else None)


def _data(t):
    return None if t is None else t._data


def _steps_view(gi, steps):
    """The packed rows ``(steps * batch, gates * hidden)`` as ``(steps, batch, gates * hidden)``."""
    a = gi._data
    return a.reshape(steps, a.shape[0] // steps, a.shape[1])


def _outputs(work, device):
    out = work["out"]
    wrap = ember.Tensor._make
    c_n = work.get("c_n")
    return (
        wrap(out.reshape(-1, out.shape[-1]), device),
        wrap(work["h_n"], device),
        None if c_n is None else wrap(c_n, device),
    )


# ------------------------------------------------------------------------------------------------- forward


def _forward(mode, gi, h0, c0, w_hh, b_hh, reverse, keep):
    """Run the recurrence on arrays; returns a dict with ``out`` ``(T, B, H)``, ``h_n``, ``c_n`` (LSTM) and,
    with ``keep``, what backward reads (the gate activations per step)."""
    steps, batch, gates = gi.shape
    with np.errstate(all="ignore"):
        if batch * gates * w_hh.shape[1] < _blas_threads.THREADED_MACS:  # each step's product
            return _blas_threads.one_thread(_FORWARDS[mode], gi, h0, c0, w_hh, b_hh, reverse, keep)
        return _FORWARDS[mode](gi, h0, c0, w_hh, b_hh, reverse, keep)


def _order(steps, reverse):
    return range(steps - 1, -1, -1) if reverse else range(steps)


def _forward_simple(act):
    def run(gi, h0, c0, w_hh, b_hh, reverse, keep):
        steps, batch, hidden = gi.shape
        w_t = w_hh.T
        pre = gi + b_hh if b_hh is not None else gi  # b_hh folded into every step's input term at once
        out = np.empty((steps, batch, hidden), gi.dtype)
        h = h0
        for t in _order(steps, reverse):
            o = out[t]
            np.matmul(h, w_t, out=o)
            o += pre[t]
            act(o)
            h = o
        return {"out": out, "h_n": h.copy()}

    return run


def _tanh_(x):
    np.tanh(x, out=x)


def _relu_(x):
    np.maximum(x, 0, out=x)


def _gemm(dtype):
    """``(address, ilp64)`` of numpy's cblas gemm for ``dtype`` (see ``_blas_threads``), or None: the
    whole-sequence kernels (``_C.lstm_forward_sequence``, ``gru_forward_sequence``, their backward) need it;
    without it the loop runs in Python."""
    if not hasattr(_C, "gru_backward_sequence"):
        return None
    return _blas_threads.cblas_gemm(dtype)


def _forward_lstm(gi, h0, c0, w_hh, b_hh, reverse, keep):
    steps, batch, gates = gi.shape
    hidden = gates // 4
    dtype = gi.dtype
    pre = gi + b_hh if b_hh is not None else np.ascontiguousarray(gi)
    acts = np.empty((steps if keep else 1, batch, gates), dtype)
    cells = np.empty((steps, batch, hidden), dtype)  # c after each step
    tanh_c = np.empty((steps if keep else 1, batch, hidden), dtype)
    out = np.empty((steps, batch, hidden), dtype)
    h, c = np.ascontiguousarray(h0), np.ascontiguousarray(c0)
    gemm = _gemm(dtype)
    if gemm is not None:  # the time loop in C++, one gemm call and one gate kernel per step
        _C.lstm_forward_sequence(gemm[0], gemm[1], pre, np.ascontiguousarray(w_hh), h, c, reverse, acts, cells,
                                 tanh_c, out)
        return _lstm_work(out, cells, acts, tanh_c, time_of_last=0 if reverse else steps - 1, keep=keep)
    w_t = w_hh.T
    step = _C.lstm_forward_step
    for t in _order(steps, reverse):
        k = t if keep else 0
        a = acts[k]
        np.matmul(h, w_t, out=a)
        step(a, pre[t], c, cells[t], tanh_c[k], out[t])
        h, c = out[t], cells[t]
    return _lstm_work(out, cells, acts, tanh_c, time_of_last=0 if reverse else steps - 1, keep=keep)


def _lstm_work(out, cells, acts, tanh_c, time_of_last, keep):
    """The forward's result dict (see :func:`_forward`): the final states are the last step's, copied."""
    work = {"out": out, "h_n": out[time_of_last].copy(), "c_n": cells[time_of_last].copy()}
    if keep:
        work.update(acts=acts, cells=cells, tanh_c=tanh_c)
    return work


def _forward_gru(gi, h0, c0, w_hh, b_hh, reverse, keep):
    steps, batch, gates = gi.shape
    hidden = gates // 3
    dtype = gi.dtype
    w_t = w_hh.T
    gi = np.ascontiguousarray(gi)
    b_hh = None if b_hh is None else np.ascontiguousarray(b_hh)
    kept = steps if keep else 1
    gh_all = np.empty((kept, batch, gates), dtype)  # h W_hh^T + b_hh of each step
    rz_all = np.empty((kept, batch, 2 * hidden), dtype)
    n_all = np.empty((kept, batch, hidden), dtype)
    out = np.empty((steps, batch, hidden), dtype)
    h = np.ascontiguousarray(h0)
    gemm = _gemm(dtype)
    if gemm is not None:  # the time loop in C++ (see _forward_lstm)
        _C.gru_forward_sequence(gemm[0], gemm[1], gi, np.ascontiguousarray(w_hh), b_hh, h, reverse, gh_all, rz_all,
                                n_all, out)
        work = {"out": out, "h_n": out[0 if reverse else steps - 1].copy()}
        if keep:
            work.update(gh=gh_all, rz=rz_all, n=n_all)
        return work
    step = _C.gru_forward_step
    for t in _order(steps, reverse):
        k = t if keep else 0
        np.matmul(h, w_t, out=gh_all[k])
        step(gh_all[k], b_hh, gi[t], h, rz_all[k], n_all[k], out[t])
        h = out[t]
    work = {"out": out, "h_n": h.copy()}
    if keep:
        work.update(gh=gh_all, rz=rz_all, n=n_all)
    return work


_FORWARDS = {
    "RNN_TANH": _forward_simple(_tanh_),
    "RNN_RELU": _forward_simple(_relu_),
    "LSTM": _forward_lstm,
    "GRU": _forward_gru,
}


# ------------------------------------------------------------------------------------------------ backward


def _previous_states(out, h0, reverse):
    """``(T, B, H)``: the state each step read (``h0`` for the first step in its direction)."""
    prev = np.empty_like(out)
    if reverse:
        prev[:-1] = out[1:]
        prev[-1] = h0
    else:
        prev[1:] = out[:-1]
        prev[0] = h0
    return prev


def _backward(mode, work, d_out, d_hn, d_cn, h0, c0, w_hh, reverse):
    """``(d gi (T, B, G), d h0, d c0 or None, d w_hh, d b_hh)`` from the forward's ``work``."""
    with np.errstate(all="ignore"):
        steps, batch, hidden = work["out"].shape
        gates = w_hh.shape[0]
        if batch * gates * hidden < _blas_threads.THREADED_MACS:
            return _blas_threads.one_thread(_backward_arrays, mode, work, d_out, d_hn, d_cn, h0, c0, w_hh, reverse)
        return _backward_arrays(mode, work, d_out, d_hn, d_cn, h0, c0, w_hh, reverse)


def _backward_arrays(mode, work, d_out, d_hn, d_cn, h0, c0, w_hh, reverse):
    out = work["out"]
    steps = out.shape[0]
    prev = _previous_states(out, h0, reverse)
    backward_order = _order(steps, not reverse)
    d_c0 = None
    if mode == "LSTM":
        d_gates, d_h0, d_c0 = _backward_lstm(work, d_out, d_hn, d_cn, c0, w_hh, reverse, backward_order)
        d_hidden_gates = d_gates
    elif mode == "GRU":
        d_gates, d_hidden_gates, d_h0 = _backward_gru(work, d_out, d_hn, prev, w_hh, backward_order, h0, reverse)
    else:
        d_gates, d_h0 = _backward_simple(mode, work, d_out, d_hn, w_hh, backward_order)
        d_hidden_gates = d_gates
    flat = d_hidden_gates.reshape(-1, d_hidden_gates.shape[-1])
    d_w_hh = flat.T @ prev.reshape(-1, prev.shape[-1])
    d_b_hh = flat.sum(0)
    return d_gates, d_h0, d_c0, d_w_hh, d_b_hh


def _backward_simple(mode, work, d_out, d_hn, w_hh, order):
    out = work["out"]
    factor = 1 - out * out if mode == "RNN_TANH" else (out > 0).astype(out.dtype)  # d act / d pre-activation
    d_pre = np.empty_like(out)
    dh = d_hn.copy()
    for t in order:
        dh += d_out[t]
        np.multiply(dh, factor[t], out=d_pre[t])
        np.matmul(d_pre[t], w_hh, out=dh)
    return d_pre, dh


def _backward_lstm(work, d_out, d_hn, d_cn, c0, w_hh, reverse, order):
    acts, cells, tanh_c = work["acts"], work["cells"], work["tanh_c"]
    d_gates = np.empty_like(acts)
    dh = np.array(d_hn, order="C")
    dc = np.array(d_cn, order="C")
    gemm = _gemm(acts.dtype)
    if gemm is not None:  # the time loop in C++ (see _forward_lstm)
        _C.lstm_backward_sequence(gemm[0], gemm[1], np.ascontiguousarray(d_out), acts, tanh_c, cells,
                                  np.ascontiguousarray(c0), np.ascontiguousarray(w_hh), reverse, dh, dc, d_gates)
        return d_gates, dh, dc
    c_prev = _previous_states(cells, c0, reverse)
    step = _C.lstm_backward_step
    for t in order:
        dh += d_out[t]
        step(dh, acts[t], tanh_c[t], c_prev[t], dc, d_gates[t])  # dc becomes c_{t-1}'s gradient
        np.matmul(d_gates[t], w_hh, out=dh)
    return d_gates, dh, dc


def _backward_gru(work, d_out, d_hn, prev, w_hh, order, h0, reverse):
    gh, rz, n = work["gh"], work["rz"], work["n"]
    d_gates = np.empty_like(gh)  # of x W_ih^T + b_ih
    d_hidden_gates = np.empty_like(gh)  # of h W_hh^T + b_hh
    dh = np.array(d_hn, order="C")
    gemm = _gemm(gh.dtype)
    if gemm is not None:  # the time loop in C++ (see _forward_lstm)
        _C.gru_backward_sequence(gemm[0], gemm[1], np.ascontiguousarray(d_out), gh, rz, n, work["out"],
                                 np.ascontiguousarray(h0), np.ascontiguousarray(w_hh), reverse, dh, d_gates,
                                 d_hidden_gates)
        return d_gates, d_hidden_gates, dh
    direct = np.empty_like(dh)
    step = _C.gru_backward_step
    for t in order:
        dh += d_out[t]
        step(dh, rz[t], n[t], gh[t], prev[t], d_gates[t], d_hidden_gates[t], direct)
        np.matmul(d_hidden_gates[t], w_hh, out=dh)
        dh += direct
    return d_gates, d_hidden_gates, dh


# --------------------------------------------------------------------------------------------- autograd node

def _node_forward(ctx, mode, reverse, steps, gi, h0, c0, w_hh, b_hh):
    work = _forward(mode, _steps_view(gi, steps), h0._data, _data(c0), w_hh._data, _data(b_hh), reverse, keep=True)
    ctx.mode, ctx.reverse, ctx.steps, ctx.work = mode, reverse, steps, work
    ctx.save_for_backward(gi, h0, c0, w_hh, b_hh)
    out, h_n, c_n = _outputs(work, gi._device)
    if c_n is None:  # a tensor in every position keeps the node's outputs alike for all modes
        c_n = ember.Tensor._make(np.zeros((0,), gi._data.dtype), gi._device)
        ctx.mark_non_differentiable(c_n)
    return out, h_n, c_n


def _node_backward(ctx, d_out, d_hn, d_cn):
    gi, h0, c0, w_hh, b_hh = ctx.saved_tensors
    if _dispatch_state.grad_enabled:  # create_graph: differentiate the reference's ops instead
        return _backward_by_reference(ctx, (gi, h0, c0, w_hh, b_hh), (d_out, d_hn, d_cn))
    work = ctx.work
    steps = ctx.steps
    batch = h0.shape[0]
    d_out_arr = np.ascontiguousarray(d_out._data).reshape(steps, batch, -1)
    d_cn_arr = d_cn._data if ctx.mode == "LSTM" else None
    d_gates, d_h0, d_c0, d_w_hh, d_b_hh = _backward(
        ctx.mode, work, d_out_arr, d_hn._data, d_cn_arr, h0._data, _data(c0), w_hh._data, ctx.reverse
    )
    device = gi._device
    wrap = ember.Tensor._make
    needs = ctx.needs_input_grad
    return (
        None, None, None,
        wrap(d_gates.reshape(gi.shape), device) if needs[3] else None,
        wrap(d_h0, device) if needs[4] else None,
        wrap(d_c0, device) if needs[5] and d_c0 is not None else None,
        wrap(d_w_hh, device) if needs[6] else None,
        wrap(d_b_hh, device) if b_hh is not None and needs[7] else None,
    )


def _backward_by_reference(ctx, inputs, grads):
    """The input gradients through the reference recurrence's ember ops (recorded, so differentiable)."""
    from .rnn import _STEPS, _run_direction

    gi, h0, c0, w_hh, b_hh = inputs
    needs = ctx.needs_input_grad[3:]
    wanted = [t for t, need in zip(inputs, needs) if need and t is not None]
    sizes = [h0.shape[0]] * ctx.steps
    out, h_n, c_n = _run_direction(_STEPS[ctx.mode], gi, sizes, h0, c0, w_hh, b_hh, None, ctx.reverse)
    outputs, grad_outputs = [out, h_n], [grads[0], grads[1]]
    if ctx.mode == "LSTM":
        outputs.append(c_n)
        grad_outputs.append(grads[2])
    found = iter(ember.autograd.grad(outputs, wanted, grad_outputs, create_graph=True, allow_unused=True))
    return (None, None, None) + tuple(
        next(found) if need and t is not None else None for t, need in zip(inputs, needs)
    )
