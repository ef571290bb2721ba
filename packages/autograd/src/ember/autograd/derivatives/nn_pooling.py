"""Derivatives of pooling (``ember._ops.nn_pooling``).

Max pools are recorded as their ``*_with_indices`` prims, whose backward scatters ``grad`` to the argmax
of each window that the forward returned (``scatter_add``); average pools spread it over each window (a
transposed convolution by a kernel of ones, or a broadcast for non-overlapping windows). Window sizes come
from the forward's own plan, so they match it exactly.
"""

from __future__ import annotations

import math

import numpy as np

import ember
from ember._ops import nn_pooling as _core  # the forward's plans

from .._table import derivative, through_decomposition
from ._nn_common import _cpu_arrays
from ._spatial import _const, _narrow_to, _tup

# -- pooling --------------------------------------------------------------------------------------------


def _window_adjoint(g, in_sizes, kernel, stride, padding):
    """Each window's gradient spread (summed, not divided) over the window's elements: (..., *out) -> (..., *in).

    Windows that reach past the input (padding, ``ceil_mode``) drop the part outside.
    """
    n = len(kernel)
    lead = g.shape[: g.dim() - n]
    out = g.shape[g.dim() - n :]
    if all(stride[i] == kernel[i] and padding[i] == 0 for i in range(n)):
        # non-overlapping windows: a broadcast, then zeros for (or a cut of) the rows the windows missed
        shape, expanded = [], []
        for i in range(n):
            shape += [out[i], 1]
            expanded += [out[i], kernel[i]]
        spread = g.reshape(*lead, *shape).expand(*lead, *expanded).reshape(*lead, *(o * k for o, k in zip(out, kernel)))
        spread = _narrow_to(spread, [min(o * k, s) for o, k, s in zip(out, kernel, in_sizes)], len(lead))
        extra = []
        for i in reversed(range(n)):
            extra += [0, in_sizes[i] - spread.shape[len(lead) + i]]
        return ember.nn.functional.pad(spread, extra) if any(extra) else spread
    planes = g.reshape(-1, 1, *out)
    ones = ember.ones((1, 1, *kernel), dtype=g.dtype, device=g.device)
    full = [(out[i] - 1) * stride[i] - 2 * padding[i] + kernel[i] for i in range(n)]
    out_pad = [max(in_sizes[i] - full[i], 0) for i in range(n)]
    spread = ember.convolution(planes, ones, None, list(stride), list(padding), [1] * n, True, out_pad, 1)
    return _narrow_to(spread, in_sizes).reshape(*lead, *in_sizes)


def _avg_divisors(in_sizes, out, kernel, stride, padding, count_include_pad, divisor_override):
    """``1 / divisor`` of every output cell of an average pool (numpy, shape ``out``), or a number if all agree."""
    if divisor_override is not None:
        return 1.0 / divisor_override
    n = len(kernel)
    per_dim = []
    for i in range(n):
        start = np.arange(out[i]) * stride[i] - padding[i]
        end = np.minimum(start + kernel[i], in_sizes[i] + padding[i])
        if count_include_pad:
            per_dim.append(end - start)
        else:
            per_dim.append(np.minimum(end, in_sizes[i]) - np.maximum(start, 0))
    sizes = per_dim[0].astype(np.float64)
    for d in per_dim[1:]:
        sizes = np.multiply.outer(sizes, d)
    if np.all(sizes == sizes.flat[0]):
        return 1.0 / float(sizes.flat[0])
    return 1.0 / sizes


def _max_pool_with_indices_grad(n):
    """The backward of ``adaptive_max_pool{n}d_with_indices``: ``grad`` scattered to the saved argmax."""

    def max_pool_grad(grad, input, results):
        # the indices are the op's second output, saved at forward time: no second pooling pass
        return _scatter_max(grad, results[1], input, n)

    return max_pool_grad


def _max_pool_window_grad(n):
    """The backward of ``max_pool{n}d_with_indices``: the scatter of :func:`_scatter_max`, or, for windows
    that tile the input (stride = kernel, no padding, no dilation, the common ``MaxPool2d(2)``) in a backward
    that records, its gather form (:func:`_gather_max`), which a compiler fuses with its neighbours."""

    def max_pool_grad(grad, input, results, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False):
        indices = results[1]
        if _cpu_arrays(grad, indices) is None:
            k = _tup(kernel_size, n)
            s = k if stride is None or (isinstance(stride, (list, tuple)) and not stride) else _tup(stride, n)
            out = grad.shape[grad.dim() - n :]
            # (a ceil-mode window that reaches past the input is left to the scatter)
            if (s == k and _tup(padding, n) == (0,) * n and _tup(dilation, n) == (1,) * n
                    and all(o * w <= size for o, w, size in zip(out, k, input.shape[input.dim() - n :]))):
                return _gather_max(grad, indices, input, k)
        return _scatter_max(grad, indices, input, n)

    return max_pool_grad


def _make_pool_grads(n):
    spatial_names = f"max_pool{n}d", f"avg_pool{n}d"

    # max_pool{n}d is recorded as max_pool{n}d_with_indices, whose formula reads the indices it returned
    derivative(f"{spatial_names[0]}_with_indices", input=_max_pool_window_grad(n))
    through_decomposition(spatial_names[0])

    if n == 1:

        def avg_pool_grad(grad, input, kernel_size, stride, padding, ceil_mode, count_include_pad):
            return _avg_pool_grad(grad, input, kernel_size, stride, padding, ceil_mode, count_include_pad, None)
    else:

        def avg_pool_grad(grad, input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
            return _avg_pool_grad(
                grad, input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override
            )

    def _avg_pool_grad(grad, input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
        k, s, p, _, out, _ = _core._window_plan(
            spatial_names[1], n, input, kernel_size, stride, padding, None, ceil_mode
        )
        in_sizes = input.shape[input.dim() - n :]
        inv = _avg_divisors(in_sizes, out, k, s, p, count_include_pad, divisor_override)
        g = grad * (inv if isinstance(inv, float) else _const(inv.astype(grad._data.dtype), grad))
        return _window_adjoint(g, in_sizes, k, s, p)

    derivative(spatial_names[1], input=avg_pool_grad)


_C_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _scatter_max(grad, indices, input, n):
    """``grad`` added at the argmax ``indices`` (flat positions in each input plane)."""
    shape = input.shape
    lead = shape[: len(shape) - n]
    count = math.prod(lead)
    size = math.prod(shape[len(shape) - n :])
    cells = math.prod(grad.shape[grad.dim() - n :])
    arrays = _cpu_arrays(grad, indices)
    if arrays is not None and arrays[0].dtype in _C_FLOATS and arrays[1].dtype == np.int64:
        # nothing records: ember._C's kernel adds each plane's gradients at its indices (no checks, no dispatch)
        g, idx = (np.ascontiguousarray(a).reshape(count, cells) for a in arrays)
        return ember.Tensor._make(ember._C.max_pool_backward(g, idx, size).reshape(shape), grad.device)
    flat = ember.zeros((count, size), dtype=grad.dtype, device=grad.device)
    return flat.scatter_add(1, indices.reshape(count, cells), grad.reshape(count, cells)).reshape(shape)


def _gather_max(grad, indices, input, kernel):
    """``_scatter_max`` for windows that tile the input (stride = kernel, no padding, no dilation).

    Every input element lies in at most one window, so its gradient is a gather, not a scatter: the
    gradient of its window where the window's argmax is this element, else 0. Built from views, a
    comparison with the element's flat position and a ``where`` (no scatter, no zero-filled buffer), it is
    one pointwise loop for a compiler (ember-inductor fuses it into the kernel that reads it, as
    torch.compile does; the scatter was an extern call and two copies). Rows and columns that no window
    covered (a floor-mode remainder) get zeros.

    Args:
        grad: ``(..., *out)`` gradient of the pooled values; ``indices`` the forward's int64 argmax, of the
            same shape, as flat positions in each input plane.
        input: ``(..., *in)`` the forward's input (its shape is used).
        kernel: the window size per spatial dim (= the stride).
    """
    n = len(kernel)
    shape = input.shape
    lead = tuple(shape[: len(shape) - n])
    in_sizes = tuple(shape[len(shape) - n :])
    out = tuple(grad.shape[grad.dim() - n :])
    covered = tuple(o * k for o, k in zip(out, kernel))
    split, spread = [], []
    for o, k in zip(out, kernel):
        split += [o, 1]
        spread += [o, k]

    def over_windows(t):  # (..., *out) -> (..., *covered): each window's value repeated over its elements
        return t.reshape(*lead, *split).expand(*lead, *spread).reshape(*lead, *covered)

    # the flat position (in the whole input plane) of every covered element, broadcast over the leading dims
    position = None
    plane_stride = 1
    for i in reversed(range(n)):
        axis = ember.arange(covered[i], dtype=ember.int64, device=grad.device) * plane_stride
        axis = axis.reshape(covered[i], *([1] * (n - 1 - i)))
        position = axis if position is None else axis + position
        plane_stride *= in_sizes[i]
    hit = over_windows(indices) == position
    result = ember.where(hit, over_windows(grad), ember.zeros((), dtype=grad.dtype, device=grad.device))
    if covered != in_sizes:
        pad = []
        for i in reversed(range(n)):
            pad += [0, in_sizes[i] - covered[i]]
        result = ember.nn.functional.pad(result, pad)
    return result


for _n in (1, 2, 3):
    _make_pool_grads(_n)


def _adaptive_windows(in_size, out_size):
    """Start and end of every window of an adaptive pool along one dim (as the core's kernel)."""
    i = np.arange(out_size)
    return (i * in_size) // out_size, -((-(i + 1) * in_size) // out_size)


def _adaptive_avg_adjoint(g, in_sizes):
    """The gradient of adaptive average pooling ``(..., *out) -> (..., *in)``, one spatial dim at a time."""
    n = len(in_sizes)
    for i in range(n):
        d = g.dim() - n + i
        out, size = g.shape[d], in_sizes[i]
        if size % out == 0:  # equal windows that tile the input: a broadcast
            k = size // out
            if k != 1:
                shape = list(g.shape)
                g = (
                    (g / k)
                    .unsqueeze(d + 1)
                    .expand(*shape[: d + 1], k, *shape[d + 1 :])
                    .reshape(*shape[:d], size, *shape[d + 1 :])
                )
            continue
        start, end = _adaptive_windows(size, out)
        matrix = np.zeros((out, size), np.float64)
        for o in range(out):
            matrix[o, start[o] : end[o]] = 1.0 / (end[o] - start[o])
        m = _const(matrix.astype(g._data.dtype), g)
        g = ember.matmul(g.movedim(d, -1), m).movedim(-1, d)
    return g


def _make_adaptive(n):
    def avg_grad(grad, input):
        return _adaptive_avg_adjoint(grad, input.shape[input.dim() - n :])

    derivative(f"adaptive_avg_pool{n}d", input=avg_grad)
    entry = derivative(f"adaptive_max_pool{n}d_with_indices", input=_max_pool_with_indices_grad(n))
    entry.node_name = f"AdaptiveMaxPool{n}DBackward0"  # PyTorch's adaptive_max_pool{n}d returns the indices itself
    through_decomposition(f"adaptive_max_pool{n}d")


for _n in (1, 2, 3):
    _make_adaptive(_n)


def _make_lp_pool(n):
    name = f"lp_pool{n}d"
    avg = getattr(ember.nn.functional, f"avg_pool{n}d")
    maxpool = getattr(ember.nn.functional, f"max_pool{n}d")

    def lp_grad(grad, input, norm_type, kernel_size, stride, ceil_mode):
        p = float(norm_type)
        if math.isinf(p):
            # the max (p = inf) or min (p = -inf) of |x| over each window
            a = input.abs()
            _, indices = maxpool(a if p > 0 else -a, kernel_size, stride, 0, 1, ceil_mode, return_indices=True)
            return _scatter_max(grad, indices, input, n) * ember.sign(input)
        # as PyTorch composes it: (sign(m) * relu(|m|) * K) ** (1 / p), m = avg_pool(x ** p)
        k = _tup(kernel_size, n)
        K = math.prod(k)
        xp = ember.pow(input, p)
        m = avg(xp, kernel_size, stride, 0, ceil_mode)
        v = m * K
        dv = grad * ((1.0 / p) * ember.pow(v, 1.0 / p - 1))
        dm = ember.where(m != 0, dv * K, 0.0)
        dxp = avg_pool_backward(dm, input, kernel_size, stride, ceil_mode)
        return dxp * (p * ember.pow(input, p - 1))

    def avg_pool_backward(g, input, kernel_size, stride, ceil_mode):
        k, s, pad, _, out, _ = _core._window_plan(f"avg_pool{n}d", n, input, kernel_size, stride, 0, None,
                                                       ceil_mode)
        in_sizes = input.shape[input.dim() - n :]
        inv = _avg_divisors(in_sizes, out, k, s, pad, True, None)
        g = g * (inv if isinstance(inv, float) else _const(inv.astype(g._data.dtype), g))
        return _window_adjoint(g, in_sizes, k, s, pad)

    derivative(name, input=lp_grad)


for _n in (1, 2, 3):
    _make_lp_pool(_n)
