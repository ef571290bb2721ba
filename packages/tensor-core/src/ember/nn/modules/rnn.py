"""Recurrent layers: ``RNN``, ``LSTM``, ``GRU`` and the single-step ``RNNCell``, ``LSTMCell``, ``GRUCell``,
as in ``torch.nn``.

The recurrences are written with ember ops (``linear``, ``sigmoid``, ``tanh``, slicing, ``cat``, ``stack``), so
autograd differentiates them. The input projection ``x W_ih^T + b_ih`` of a whole layer is computed in one
``linear`` call; only the hidden-to-hidden part runs step by step. On plain CPU tensors a layer-direction runs
as one computation and one autograd node instead (:mod:`._rnn_fused`); these ops stay the reference.
Padded inputs are treated as packed sequences whose batch size never shrinks, so padded and
:class:`~ember.nn.utils.rnn.PackedSequence` inputs share one code path.
"""

from __future__ import annotations

import math
import numbers
import warnings

import ember

from .. import functional as F
from .. import init
from ..parameter import Parameter
from ._rnn_fused import fused_direction
from .module import Module

__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]


def _packed_sequence_type():
    from ..utils.rnn import PackedSequence  # lazy: ember.nn.utils imports modules of its own

    return PackedSequence


def _apply_permutation(tensor, permutation, dim=1):
    return tensor.index_select(dim, permutation)


# --------------------------------------------------------------------------- one step of each cell kind
# ``gi`` is the precomputed input projection ``x W_ih^T + b_ih`` of the step, ``(b, gates * hidden)``.


def _rnn_tanh_step(gi, h, c, w_hh, b_hh, w_hr):
    return ember.tanh(gi + F.linear(h, w_hh, b_hh)), None


def _rnn_relu_step(gi, h, c, w_hh, b_hh, w_hr):
    return F.relu(gi + F.linear(h, w_hh, b_hh)), None


def _lstm_step(gi, h, c, w_hh, b_hh, w_hr):
    i, f, g, o = (gi + F.linear(h, w_hh, b_hh)).chunk(4, 1)
    c = ember.sigmoid(f) * c + ember.sigmoid(i) * ember.tanh(g)
    h = ember.sigmoid(o) * ember.tanh(c)
    if w_hr is not None:
        h = F.linear(h, w_hr)
    return h, c


def _gru_step(gi, h, c, w_hh, b_hh, w_hr):
    i_r, i_z, i_n = gi.chunk(3, 1)
    h_r, h_z, h_n = F.linear(h, w_hh, b_hh).chunk(3, 1)
    r = ember.sigmoid(i_r + h_r)
    z = ember.sigmoid(i_z + h_z)
    n = ember.tanh(i_n + r * h_n)
    return n + z * (h - n), None  # (1 - z) * n + z * h


_STEPS = {"RNN_TANH": _rnn_tanh_step, "RNN_RELU": _rnn_relu_step, "LSTM": _lstm_step, "GRU": _gru_step}

# Gates per step: rows of weight_ih/weight_hh are this many blocks of hidden_size.
_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


def _init_uniform_by_hidden_size(module):
    """Every parameter from U(-k, k) with k = 1/sqrt(hidden_size), PyTorch's default for recurrent layers."""
    bound = 1.0 / math.sqrt(module.hidden_size) if module.hidden_size > 0 else 0
    for param in module.parameters():
        init.uniform_(param, -bound, bound)


def _run_direction(step, gi, batch_sizes, h0, c0, w_hh, b_hh, w_hr, reverse):
    """Run one direction of one layer over packed rows.

    ``gi``: ``(sum(batch_sizes), G)`` input projections in packed order; ``h0``/``c0``: ``(B, *)`` with
    ``B = batch_sizes[0]`` (``c0`` is ``None`` except for LSTM). Returns ``(output rows in packed order,
    h_n, c_n)``.
    """
    offsets = [0]
    for b in batch_sizes:
        offsets.append(offsets[-1] + b)
    outputs = []
    if not reverse:
        h, c = h0, c0
        cur = batch_sizes[0]
        done_h, done_c = [], []  # final states of sequences that ended, last batch rows first
        for t, b in enumerate(batch_sizes):
            if b < cur:  # sequences b..cur-1 ended at step t-1
                done_h.append(h[b:])
                h = h[:b]
                if c is not None:
                    done_c.append(c[b:])
                    c = c[:b]
                cur = b
            h, c = step(gi[offsets[t] : offsets[t + 1]], h, c, w_hh, b_hh, w_hr)
            outputs.append(h)
        h_n = ember.cat([h] + done_h[::-1], 0) if done_h else h
        c_n = None if c is None else (ember.cat([c] + done_c[::-1], 0) if done_c else c)
    else:
        cur = batch_sizes[-1]
        h = h0[:cur]
        c = None if c0 is None else c0[:cur]
        for t in range(len(batch_sizes) - 1, -1, -1):
            b = batch_sizes[t]
            if b > cur:  # sequences cur..b-1 start (from their last element) at step t
                h = ember.cat([h, h0[cur:b]], 0)
                if c is not None:
                    c = ember.cat([c, c0[cur:b]], 0)
                cur = b
            h, c = step(gi[offsets[t] : offsets[t + 1]], h, c, w_hh, b_hh, w_hr)
            outputs.append(h)
        outputs.reverse()
        h_n, c_n = h, c
    out = outputs[0] if len(outputs) == 1 else ember.cat(outputs, 0)
    return out, h_n, c_n


class RNNBase(Module):
    """Base class of :class:`RNN`, :class:`LSTM` and :class:`GRU`: parameter creation and naming, argument
    checks and the multi-layer, bidirectional, packed-sequence driver.

    Args:
        mode (str): ``"RNN_TANH"``, ``"RNN_RELU"``, ``"LSTM"`` or ``"GRU"``.
        input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional, proj_size, device,
            dtype: see :class:`LSTM`.

    Parameters (per layer ``k`` and direction, suffix ``_reverse`` for the backward direction), named and
    ordered as PyTorch: ``weight_ih_l{k}``, ``weight_hh_l{k}``, ``bias_ih_l{k}``, ``bias_hh_l{k}`` and, for an
    LSTM with ``proj_size > 0``, ``weight_hr_l{k}``. All are initialised U(-1/sqrt(hidden_size),
    1/sqrt(hidden_size)).

    Raises:
        ValueError: ``dropout`` outside [0, 1], non-positive sizes, ``proj_size`` negative or
            ``>= hidden_size``, an unknown ``mode``.
        TypeError: ``bias``/``batch_first`` not bool, ``input_size``/``hidden_size`` not int.
    """

    __constants__ = [
        "mode",
        "input_size",
        "hidden_size",
        "num_layers",
        "bias",
        "batch_first",
        "dropout",
        "bidirectional",
        "proj_size",
    ]

    def __init__(
        self,
        mode,
        input_size,
        hidden_size,
        num_layers=1,
        bias=True,
        batch_first=False,
        dropout=0.0,
        bidirectional=False,
        proj_size=0,
        device=None,
        dtype=None,
    ):
        super().__init__()
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size

        if not isinstance(dropout, numbers.Number) or not 0 <= dropout <= 1 or isinstance(dropout, bool):
            raise ValueError(
                "dropout should be a number in range [0, 1] representing the probability of an element being zeroed"
            )
        if dropout > 0 and num_layers == 1:
            warnings.warn(
                "dropout option adds dropout after all but last "
                "recurrent layer, so non-zero dropout expects "
                f"num_layers greater than 1, but got dropout={dropout} and "
                f"num_layers={num_layers}",
                stacklevel=2,
            )
        if not isinstance(bias, bool):
            raise TypeError(f"bias should be of type bool, got: {type(bias).__name__}")
        if not isinstance(batch_first, bool):
            raise TypeError(f"batch_first should be of type bool, got: {type(batch_first).__name__}")
        if not isinstance(input_size, int):
            raise TypeError(f"input_size should be of type int, got: {type(input_size).__name__}")
        if input_size <= 0:
            raise ValueError("input_size must be greater than zero")
        if not isinstance(hidden_size, int):
            raise TypeError(f"hidden_size should be of type int, got: {type(hidden_size).__name__}")
        if hidden_size <= 0:
            raise ValueError("hidden_size must be greater than zero")
        if num_layers <= 0:
            raise ValueError("num_layers must be greater than zero")
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable projections")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")

        if mode not in _GATES:
            raise ValueError("Unrecognized RNN mode: " + mode)

        # Parameter names per (layer, direction), in PyTorch's order: they are the state-dict keys.
        self._all_weights = []
        for layer in range(num_layers):
            layer_input = input_size if layer == 0 else self._state_size * self._directions
            for suffix in ("", "_reverse")[: self._directions]:
                shapes = self._cell_parameter_shapes(layer_input)
                names = [f"{kind}_l{layer}{suffix}" for kind in shapes]
                for name, shape in zip(names, shapes.values()):
                    setattr(self, name, Parameter(ember.empty(shape, device=device, dtype=dtype)))
                self._all_weights.append(names)
        self._flat_weights_names = [name for names in self._all_weights for name in names]
        self.reset_parameters()

    @property
    def _directions(self):
        return 2 if self.bidirectional else 1

    @property
    def _state_size(self):
        """Size of ``h``: the projection size of an LSTM with ``proj_size``, else ``hidden_size``."""
        return self.proj_size if self.proj_size > 0 else self.hidden_size

    def _cell_parameter_shapes(self, layer_input):
        """``{kind: shape}`` of one layer-direction's parameters (``weight_ih``, ``weight_hh``, ...)."""
        rows = _GATES[self.mode] * self.hidden_size
        shapes = {"weight_ih": (rows, layer_input), "weight_hh": (rows, self._state_size)}
        if self.bias:
            shapes["bias_ih"] = (rows,)
            shapes["bias_hh"] = (rows,)
        if self.proj_size > 0:
            shapes["weight_hr"] = (self.proj_size, self.hidden_size)
        return shapes

    def _batch_size(self, input, batch_sizes):
        if batch_sizes is not None:  # packed: the first time step has every sequence
            return int(batch_sizes[0])
        return input.size(0) if self.batch_first else input.size(1)

    @property
    def _flat_weights(self):
        return [getattr(self, name, None) for name in self._flat_weights_names]

    @property
    def all_weights(self):
        """The parameters as a list (one entry per layer and direction) of lists, in PyTorch's order."""
        return [[getattr(self, name) for name in names] for names in self._all_weights]

    def flatten_parameters(self):
        """No-op (PyTorch compacts the weights for cuDNN here); kept for compatibility."""

    def reset_parameters(self):
        """Re-draw every parameter from U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))."""
        _init_uniform_by_hidden_size(self)

    # ----------------------------------------------------------------------------------- argument checks
    def check_input(self, input, batch_sizes):
        weight_dtype = self._flat_weights[0].dtype
        if input.dtype != weight_dtype:
            raise ValueError(
                f"RNN input dtype ({input.dtype}) does not match weight dtype ({weight_dtype}). "
                f"Convert input: input.to({weight_dtype}), or convert model: model.to({input.dtype})"
            )
        expected_input_dim = 2 if batch_sizes is not None else 3
        if input.dim() != expected_input_dim:
            raise RuntimeError(f"input must have {expected_input_dim} dimensions, got {input.dim()}")
        if self.input_size != input.size(-1):
            raise RuntimeError(
                f"input.size(-1) must be equal to input_size. Expected {self.input_size}, got {input.size(-1)}"
            )

    def get_expected_hidden_size(self, input, batch_sizes):
        return (self.num_layers * self._directions, self._batch_size(input, batch_sizes), self._state_size)

    def check_hidden_size(self, hx, expected_hidden_size, msg="Expected hidden size {}, got {}"):
        if tuple(hx.size()) != tuple(expected_hidden_size):
            raise RuntimeError(msg.format(expected_hidden_size, list(hx.size())))

    def check_forward_args(self, input, hidden, batch_sizes):
        self.check_input(input, batch_sizes)
        self.check_hidden_size(hidden, self.get_expected_hidden_size(input, batch_sizes))

    def permute_hidden(self, hx, permutation):
        if permutation is None:
            return hx
        return _apply_permutation(hx, permutation)

    def extra_repr(self):
        # Only the options that differ from their defaults are shown.
        defaults = {
            "proj_size": 0,
            "num_layers": 1,
            "bias": True,
            "batch_first": False,
            "dropout": 0,
            "bidirectional": False,
        }
        parts = [f"{self.input_size}, {self.hidden_size}"]
        for name, default in defaults.items():
            value = getattr(self, name)
            if value != default:
                parts.append(f"{name}={value}")
        return ", ".join(parts)

    # ----------------------------------------------------------------------------------- the recurrence
    def _run(self, data, batch_sizes, hx, cx):
        """Multi-layer recurrence over packed rows ``data`` ``(sum(batch_sizes), input_size)``.

        ``hx``/``cx``: ``(num_layers * num_directions, B, *)`` (``cx`` only for LSTM). Returns
        ``(output rows, h_n, c_n)``.
        """
        step = _STEPS[self.mode]
        finals_h, finals_c = [], []
        layer_input = data
        for layer in range(self.num_layers):
            outputs = []
            for direction in range(self._directions):
                index = layer * self._directions + direction
                # "weight_ih_l0_reverse" -> "weight_ih"
                params = {name.rsplit("_l", 1)[0]: getattr(self, name) for name in self._all_weights[index]}
                gates_x = F.linear(layer_input, params["weight_ih"], params.get("bias_ih"))
                c0 = None if cx is None else cx[index]
                args = (gates_x, batch_sizes, hx[index], c0, params["weight_hh"], params.get("bias_hh"),
                        params.get("weight_hr"), direction == 1)
                # one fused computation and autograd node on plain CPU tensors; the step-by-step ops otherwise
                result = fused_direction(self.mode, *args)
                out, h, c = result if result is not None else _run_direction(step, *args)
                outputs.append(out)
                finals_h.append(h)
                finals_c.append(c)
            layer_input = outputs[0] if len(outputs) == 1 else ember.cat(outputs, 1)
            # Dropout between layers only: the last layer's output is returned as it is.
            if self.dropout > 0 and self.training and layer < self.num_layers - 1:
                layer_input = F.dropout(layer_input, self.dropout, True)
        return layer_input, ember.stack(finals_h, 0), (ember.stack(finals_c, 0) if cx is not None else None)

    def _batched_hidden(self, hx, is_batched):
        """Check the initial state's rank against the input's; give an unbatched state its batch dim."""
        want = 3 if is_batched else 2
        kind = "batched 3-D" if is_batched else "unbatched 2-D"
        if self.mode == "LSTM":
            ranks = (hx[0].dim(), hx[1].dim())
            if ranks != (want, want):
                raise RuntimeError(
                    f"For {kind} input, hx and cx should also be {want}-D but got ({ranks[0]}-D, {ranks[1]}-D) tensors"
                )
            return hx if is_batched else (hx[0].unsqueeze(1), hx[1].unsqueeze(1))
        if hx.dim() != want:
            raise RuntimeError(f"For {kind} input, hx should also be {want}-D but got {hx.dim()}-D tensor")
        return hx if is_batched else hx.unsqueeze(1)

    def _zero_state(self, batch, like):
        """``h_0`` (and ``c_0`` for an LSTM) of zeros when the caller gives none."""
        layers = self.num_layers * self._directions
        h0 = ember.zeros((layers, batch, self._state_size), dtype=like.dtype, device=like.device)
        if self.mode != "LSTM":
            return h0
        return h0, ember.zeros((layers, batch, self.hidden_size), dtype=like.dtype, device=like.device)

    def _forward_impl(self, input, hx):
        """Shared forward of RNN/LSTM/GRU; ``hx`` is a tensor, or a ``(h_0, c_0)`` tuple for LSTM."""
        is_lstm = self.mode == "LSTM"
        width = self._state_size * self._directions  # features of the output
        packed = input if isinstance(input, _packed_sequence_type()) else None
        is_batched = True
        if packed is not None:
            input, batch_sizes, sorted_indices, unsorted_indices = packed
        else:
            batch_sizes = sorted_indices = unsorted_indices = None
            if input.dim() not in (2, 3):
                name, tensor_word = ("RNN", " tensor") if self.mode.startswith("RNN") else (self.mode, "")
                raise ValueError(f"{name}: Expected input to be 2D or 3D, got {input.dim()}D{tensor_word} instead")
            is_batched = input.dim() == 3
            if not is_batched:
                input = input.unsqueeze(0 if self.batch_first else 1)
            if hx is not None:
                hx = self._batched_hidden(hx, is_batched)

        if hx is None:
            hx = self._zero_state(self._batch_size(input, batch_sizes), input)
        else:
            hx = self.permute_hidden(hx, sorted_indices)  # packed sequences are sorted by length
        self.check_forward_args(input, hx, batch_sizes)

        # The recurrence runs on rows: packed data as is, a padded batch as (steps * batch, features).
        if packed is not None:
            sizes, rows = [int(b) for b in batch_sizes.tolist()], input
        else:
            time_major = input.transpose(0, 1) if self.batch_first else input
            steps, batch = time_major.shape[0], time_major.shape[1]
            sizes, rows = [batch] * steps, time_major.reshape(steps * batch, time_major.shape[2])
        h0, c0 = hx if is_lstm else (hx, None)
        if sizes and sizes[0] > 0:
            out, h_n, c_n = self._run(rows, sizes, h0, c0)
        else:  # no step or an empty batch: nothing runs, the states pass through
            out = ember.zeros((0, width), dtype=input.dtype, device=input.device)
            h_n, c_n = h0, c0
        hidden = (h_n, c_n) if is_lstm else h_n

        if packed is not None:
            output = type(packed)(out, batch_sizes, sorted_indices, unsorted_indices)
            return output, self.permute_hidden(hidden, unsorted_indices)
        output = out.reshape(steps, batch, width)
        if self.batch_first:
            output = output.transpose(0, 1)
        if not is_batched:
            output = output.squeeze(0 if self.batch_first else 1)
            hidden = (hidden[0].squeeze(1), hidden[1].squeeze(1)) if is_lstm else hidden.squeeze(1)
        return output, hidden


class RNN(RNNBase):
    r"""Elman RNN: ``h_t = act(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh)`` with ``act`` tanh or ReLU,
    stacked ``num_layers`` deep.

    Args:
        input_size (int): features of the input ``x``.
        hidden_size (int): features of the hidden state ``h``.
        num_layers (int): stacked layers. Default 1.
        nonlinearity (str): ``"tanh"`` or ``"relu"``. Default ``"tanh"``.
        bias (bool): use ``b_ih`` and ``b_hh``. Default ``True``.
        batch_first (bool): input/output ``(N, L, *)`` instead of ``(L, N, *)`` (not the hidden states).
        dropout (float): dropout on the outputs of every layer but the last. Default 0.
        bidirectional (bool): add a layer running backward in time. Default ``False``.

    Inputs: ``input, h_0``: ``input`` ``(L, N, H_in)``, ``(N, L, H_in)`` with ``batch_first``, ``(L, H_in)``
    unbatched, or a :class:`~ember.nn.utils.rnn.PackedSequence`; ``h_0`` ``(D * num_layers, N, H_out)``
    (``(D * num_layers, H_out)`` unbatched), zeros if omitted; ``D = 2`` if bidirectional.

    Outputs: ``output, h_n``: ``output`` ``(L, N, D * H_out)`` (a PackedSequence for packed input) holding
    the last layer's ``h_t`` for every ``t``; ``h_n`` ``(D * num_layers, N, H_out)`` the final states.

    Raises:
        ValueError: unknown ``nonlinearity``, ``proj_size`` given, input not 2-D/3-D, dtype mismatch.
        RuntimeError: wrong input feature size or hidden state shape.
    """

    def __init__(self, *args, **kwargs):
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        # nonlinearity is RNN's 4th positional argument but not RNNBase's: take it out of either place.
        if len(args) > 3:
            self.nonlinearity = args[3]
            args = args[:3] + args[4:]
        else:
            self.nonlinearity = kwargs.pop("nonlinearity", "tanh")
        modes = {"tanh": "RNN_TANH", "relu": "RNN_RELU"}
        if self.nonlinearity not in modes:
            raise ValueError(f"Unknown nonlinearity '{self.nonlinearity}'. Select from 'tanh' or 'relu'.")
        super().__init__(modes[self.nonlinearity], *args, **kwargs)

    def forward(self, input, hx=None):
        return self._forward_impl(input, hx)


class LSTM(RNNBase):
    r"""Long short-term memory, stacked ``num_layers`` deep. For each step (gates in PyTorch's order i, f, g, o)::

        i = sigmoid(W_ii x + b_ii + W_hi h + b_hi)      f = sigmoid(W_if x + b_if + W_hf h + b_hf)
        g = tanh(W_ig x + b_ig + W_hg h + b_hg)         o = sigmoid(W_io x + b_io + W_ho h + b_ho)
        c' = f * c + i * g                              h' = o * tanh(c')   (then h' = W_hr h' if proj_size)

    Args:
        input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional: as :class:`RNN`.
        proj_size (int): if ``> 0``, project ``h`` to this size with ``weight_hr_l{k}`` (Sak et al., 2014).

    Inputs: ``input, (h_0, c_0)``: ``input`` as :class:`RNN`; ``h_0`` ``(D * num_layers, N, H_out)`` with
    ``H_out = proj_size or hidden_size``, ``c_0`` ``(D * num_layers, N, hidden_size)``; zeros if omitted.

    Outputs: ``output, (h_n, c_n)``: ``output`` ``(L, N, D * H_out)`` (or a PackedSequence).

    Raises:
        ValueError: input not 2-D/3-D, dtype mismatch, bad constructor arguments.
        RuntimeError: wrong input feature size or state shapes.

    Reference: Hochreiter & Schmidhuber, "Long Short-Term Memory" (1997); Sak et al., "Long Short-Term
    Memory Based Recurrent Neural Network Architectures for Large Vocabulary Speech Recognition" (2014).

    Example:
        >>> import ember
        >>> rnn = ember.nn.LSTM(10, 20, 2)
        >>> output, (hn, cn) = rnn(ember.randn(5, 3, 10))
        >>> output.shape, hn.shape
        (ember.Size([5, 3, 20]), ember.Size([2, 3, 20]))
    """

    def __init__(self, *args, **kwargs):
        super().__init__("LSTM", *args, **kwargs)

    def get_expected_cell_size(self, input, batch_sizes):
        return (self.num_layers * self._directions, self._batch_size(input, batch_sizes), self.hidden_size)

    def check_forward_args(self, input, hidden, batch_sizes):
        self.check_input(input, batch_sizes)
        self.check_hidden_size(
            hidden[0], self.get_expected_hidden_size(input, batch_sizes), "Expected hidden[0] size {}, got {}"
        )
        self.check_hidden_size(
            hidden[1], self.get_expected_cell_size(input, batch_sizes), "Expected hidden[1] size {}, got {}"
        )

    def permute_hidden(self, hx, permutation):
        if permutation is None:
            return hx
        return _apply_permutation(hx[0], permutation), _apply_permutation(hx[1], permutation)

    def forward(self, input, hx=None):
        return self._forward_impl(input, hx)


class GRU(RNNBase):
    r"""Gated recurrent unit, stacked ``num_layers`` deep. For each step (gates in PyTorch's order r, z, n)::

        r = sigmoid(W_ir x + b_ir + W_hr h + b_hr)      z = sigmoid(W_iz x + b_iz + W_hz h + b_hz)
        n = tanh(W_in x + b_in + r * (W_hn h + b_hn))   h' = (1 - z) * n + z * h

    Args, inputs and outputs: as :class:`RNN` (no ``nonlinearity``).

    Raises:
        ValueError: ``proj_size`` given, input not 2-D/3-D, dtype mismatch.
        RuntimeError: wrong input feature size or hidden state shape.

    Reference: Cho et al., "Learning Phrase Representations using RNN Encoder-Decoder for Statistical
    Machine Translation" (2014).
    """

    def __init__(self, *args, **kwargs):
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        super().__init__("GRU", *args, **kwargs)

    def forward(self, input, hx=None):
        return self._forward_impl(input, hx)


# ------------------------------------------------------------------------------------------------ cells


class RNNCellBase(Module):
    """Base class of the single-step cells: ``weight_ih`` ``(num_chunks * hidden_size, input_size)``,
    ``weight_hh`` ``(num_chunks * hidden_size, hidden_size)``, ``bias_ih``/``bias_hh``
    ``(num_chunks * hidden_size,)``, all initialised U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))."""

    __constants__ = ["input_size", "hidden_size", "bias"]

    def __init__(self, input_size, hidden_size, bias, num_chunks, device=None, dtype=None):
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        rows = num_chunks * hidden_size

        def new_parameter(*shape):
            return Parameter(ember.empty(shape, device=device, dtype=dtype))

        self.weight_ih = new_parameter(rows, input_size)
        self.weight_hh = new_parameter(rows, hidden_size)
        # Without bias the names are still registered (as None), so ``cell.bias_ih is None`` works.
        self.register_parameter("bias_ih", new_parameter(rows) if bias else None)
        self.register_parameter("bias_hh", new_parameter(rows) if bias else None)
        self.reset_parameters()

    def extra_repr(self):
        parts = [f"{self.input_size}, {self.hidden_size}"]
        if self.__dict__.get("bias", True) is not True:
            parts.append(f"bias={self.bias}")
        if self.__dict__.get("nonlinearity", "tanh") != "tanh":
            parts.append(f"nonlinearity={self.nonlinearity}")
        return ", ".join(parts)

    def reset_parameters(self):
        """Re-draw every parameter from U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))."""
        _init_uniform_by_hidden_size(self)

    def _check(self, input, states):
        if input.size(1) != self.input_size:
            raise RuntimeError(f"input has inconsistent input_size: got {input.size(1)} expected {self.input_size}")
        for i, h in enumerate(states):
            if h.size(0) != input.size(0):
                raise RuntimeError(f"Input batch size {input.size(0)} doesn't match hidden{i} batch size {h.size(0)}")
            if h.size(1) != self.hidden_size:
                raise RuntimeError(
                    f"hidden{i} has inconsistent hidden_size: got {h.size(1)}, expected {self.hidden_size}"
                )

    def _prepare(self, name, input, hx, what="hidden"):
        if input.dim() not in (1, 2):
            raise ValueError(f"{name}: Expected input to be 1D or 2D, got {input.dim()}D instead")
        if hx is not None and hx.dim() not in (1, 2):
            raise ValueError(f"{name}: Expected {what} to be 1D or 2D, got {hx.dim()}D instead")
        is_batched = input.dim() == 2
        if not is_batched:
            input = input.unsqueeze(0)
        if hx is None:
            hx = ember.zeros((input.size(0), self.hidden_size), dtype=input.dtype, device=input.device)
        elif not is_batched:
            hx = hx.unsqueeze(0)
        self._check(input, [hx])
        return input, hx, is_batched


class RNNCell(RNNCellBase):
    """One Elman RNN step: ``h' = act(x W_ih^T + b_ih + h W_hh^T + b_hh)``.

    Args:
        input_size (int), hidden_size (int), bias (bool, default ``True``),
        nonlinearity (str): ``"tanh"`` (default) or ``"relu"``.

    Shape: ``input`` ``(N, H_in)`` or ``(H_in,)``; ``hx`` ``(N, H_out)`` or ``(H_out,)``, zeros if omitted;
    output like ``hx``.

    Raises:
        ValueError: input or hidden not 1-D/2-D.
        RuntimeError: unknown ``nonlinearity``, inconsistent sizes.
    """

    __constants__ = ["input_size", "hidden_size", "bias", "nonlinearity"]

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, num_chunks=1, device=device, dtype=dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        input, hx, is_batched = self._prepare("RNNCell", input, hx)
        pre = F.linear(input, self.weight_ih, self.bias_ih) + F.linear(hx, self.weight_hh, self.bias_hh)
        if self.nonlinearity == "tanh":
            ret = ember.tanh(pre)
        elif self.nonlinearity == "relu":
            ret = F.relu(pre)
        else:
            raise RuntimeError(f"Unknown nonlinearity: {self.nonlinearity}")
        return ret if is_batched else ret.squeeze(0)


class LSTMCell(RNNCellBase):
    """One LSTM step (equations in :class:`LSTM`); returns ``(h', c')``.

    Args:
        input_size (int), hidden_size (int), bias (bool, default ``True``).

    Shape: ``input`` ``(N, H_in)`` or ``(H_in,)``; ``hx = (h, c)`` each ``(N, H)`` or ``(H,)``, zeros if
    omitted; outputs like ``h``.

    Raises:
        ValueError: input or states not 1-D/2-D.
        RuntimeError: inconsistent sizes.
    """

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, num_chunks=4, device=device, dtype=dtype)

    def forward(self, input, hx=None):
        if input.dim() not in (1, 2):
            raise ValueError(f"LSTMCell: Expected input to be 1D or 2D, got {input.dim()}D instead")
        if hx is not None:
            for idx, value in enumerate(hx):
                if value.dim() not in (1, 2):
                    raise ValueError(f"LSTMCell: Expected hx[{idx}] to be 1D or 2D, got {value.dim()}D instead")
        is_batched = input.dim() == 2
        if not is_batched:
            input = input.unsqueeze(0)
        if hx is None:
            zeros = ember.zeros((input.size(0), self.hidden_size), dtype=input.dtype, device=input.device)
            hx = (zeros, zeros)
        elif not is_batched:
            hx = (hx[0].unsqueeze(0), hx[1].unsqueeze(0))
        self._check(input, hx)
        gi = F.linear(input, self.weight_ih, self.bias_ih)
        h, c = _lstm_step(gi, hx[0], hx[1], self.weight_hh, self.bias_hh, None)
        return (h, c) if is_batched else (h.squeeze(0), c.squeeze(0))


class GRUCell(RNNCellBase):
    """One GRU step (equations in :class:`GRU`).

    Args:
        input_size (int), hidden_size (int), bias (bool, default ``True``).

    Shape: as :class:`RNNCell`.

    Raises:
        ValueError: input or hidden not 1-D/2-D.
        RuntimeError: inconsistent sizes.
    """

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, num_chunks=3, device=device, dtype=dtype)

    def forward(self, input, hx=None):
        input, hx, is_batched = self._prepare("GRUCell", input, hx)
        gi = F.linear(input, self.weight_ih, self.bias_ih)
        ret, _ = _gru_step(gi, hx, None, self.weight_hh, self.bias_hh, None)
        return ret if is_batched else ret.squeeze(0)
