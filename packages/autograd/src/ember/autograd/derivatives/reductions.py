"""Derivatives of the reductions, scans, sorts and searches (``ember._ops.sums``, ``scans``, ...).

The formulas give PyTorch's gradient values, including at the points where
the function is not differentiable:

* ``amax``/``amin`` (and ``aminmax``, ``norm(p=inf)``) split the gradient
  evenly among the elements equal to the extreme; so do ``max()``/``min()``
  and ``median()`` without a ``dim``. With a ``dim``, ``max``/``min``,
  ``median``, ``kthvalue``, ``mode``, ``sort``, ``topk`` and the running
  ``cummax``/``cummin`` give the whole gradient to the element their
  ``indices`` output names (a scatter of the gradient).
* ``prod`` and ``cumprod`` are exact with zeros in the input (one or
  several): products that leave out one element are formed directly rather
  than as ``result / input``.
* ``var``/``std`` with no degrees of freedom left (``N <= correction``) give
  PyTorch's ``inf``/``NaN``.

Composite ops with a fused CPU kernel (``mean``, ``nansum``, ``nanmean``,
``std``, ``var_mean``, ``std_mean``, ``max``/``min``, ``aminmax``,
``logsumexp``, ``norm``, ``logcumsumexp``, ``kthvalue``) get formulas: their
forward then runs the kernel, which is faster than recording the
decomposition and, for ``logsumexp``/``logcumsumexp``/``norm``, exact where
the decomposition underflows. ``msort`` and ``diff`` are differentiated
through their decompositions (a ``sort``; ``narrow``/``sub``).

Ops PyTorch lets run on inputs that require grad but cannot differentiate
(``unique``, ``unique_consecutive``, ``bincount`` with weights,
``histogram``) get formulas that raise ``NotImplementedError`` at backward
time, as PyTorch does; integer/bool results are non-differentiable.
"""

from __future__ import annotations

import math
import operator

import ember

from .._table import derivative, nondifferentiable, through_decomposition
from ._helpers import conj, unsqueeze_to

# -- shared pieces -----------------------------------------------------------------------------------


def _is_tensor(x):
    return isinstance(x, ember.Tensor)


def _wrap_dims(dim, ndim):
    """The reduced dims of ``dim`` as a sorted tuple (``None`` and ``()`` mean all); ``()`` for a 0-d input."""
    if ndim == 0:
        return ()
    if dim is None:
        return tuple(range(ndim))
    if not isinstance(dim, (tuple, list)):
        return (operator.index(dim) % ndim,)  # an int (or a numpy integer)
    if not dim:
        return tuple(range(ndim))
    return tuple(sorted(d % ndim for d in dim))


def _restore(g, ndim, dims, keepdim):
    """``g`` (a reduction's gradient or output) with its reduced ``dims`` back as size-1 dims, for broadcasting."""
    if keepdim or ndim == 0:
        return g
    return unsqueeze_to(g, dims, ndim)


def _count(shape, dims):
    """How many elements each output element of a reduction over ``dims`` reduces."""
    return math.prod(shape[d] for d in dims)


def _reversed_cumsum(g, dim):
    """``out[i] = sum(g[i:])`` along ``dim``: the gradient of a cumulative sum (differentiable)."""
    return ember.flip(ember.cumsum(ember.flip(g, [dim]), dim), [dim])


def _scale_by_count(g, mask, dims):
    """``g`` split evenly among the True elements of ``mask`` over ``dims`` (PyTorch's ``scale_grad_by_count``).

    Written as ``g / count * mask`` (not a ``where``), so that a slice with no
    True element (an extreme that is NaN) gets NaN, as in PyTorch.
    """
    return g / ember.sum(mask, dims, True) * mask


def _evenly_distribute(grad, input, value):
    """The gradient of a full reduction that picks ``value`` (``max()``, ``median()``): split among its copies.

    A NaN ``value`` is shared among the NaN elements of ``input``.
    """
    mask = ember.logical_or(input == value, ember.logical_and(ember.isnan(input), ember.isnan(value)))
    return ember.where(mask, grad / ember.sum(mask), 0)


def _select_backward(grad, input, dim, indices, keepdim):
    """The gradient of an op that picks ``input``'s elements at ``indices`` along ``dim`` (``max(dim)``, ``sort``).

    Each picked element gets its gradient; the others get zero. The indices of
    one slice are distinct, so a scatter (not a scatter-add) is exact.
    """
    ndim = input.dim()
    if ndim == 0:
        return grad
    d = dim % ndim
    if not keepdim:
        grad = grad.unsqueeze(d)
        indices = indices.unsqueeze(d)
    return ember.zeros(input.shape, dtype=grad.dtype, device=grad.device).scatter(d, indices, grad)


def _not_implemented(name):
    """A formula that raises: PyTorch records these ops but cannot differentiate them either."""

    def formula():
        raise NotImplementedError(f"the derivative for '{name}' is not implemented.")

    return formula


# -- sum, nansum, mean, nanmean ----------------------------------------------------------------------


def _sum_backward(grad, input_meta, dim, keepdim):
    # only the input's shape is kept: sum saves no tensor, as in PyTorch
    ndim = input_meta.dim()
    dims = _wrap_dims(dim, ndim)
    if not keepdim and len(dims) == ndim:  # a 0-d grad of a full sum expands in one view (no unsqueezes)
        return grad.expand(input_meta.shape)
    return _restore(grad, ndim, dims, keepdim).expand(input_meta.shape)


def _nansum_backward(grad, input, dim, keepdim):
    # a product with the mask (not a where): an inf gradient gives NaN at the NaN elements, as in PyTorch
    return _sum_backward(grad, input, dim, keepdim) * ember.logical_not(ember.isnan(input))


def _mean_backward(grad, input_meta, dim, keepdim):
    ndim = input_meta.dim()
    dims = _wrap_dims(dim, ndim)
    count = _count(input_meta.shape, dims) if ndim else 1
    return _restore(grad / count, ndim, dims, keepdim).expand(input_meta.shape)


def _nanmean_backward(grad, input, dim, keepdim):
    ndim = input.dim()
    dims = _wrap_dims(dim, ndim)
    valid = ember.logical_not(ember.isnan(input))
    count = ember.sum(valid, dims, True)
    return _restore(grad, ndim, dims, keepdim) / count * valid  # an all-NaN slice gets NaN, as in PyTorch


derivative("sum", input=_sum_backward)
derivative("nansum", input=_nansum_backward)
derivative("mean", input=_mean_backward)
derivative("nanmean", input=_nanmean_backward)


# -- prod --------------------------------------------------------------------------------------------


def _any_zero(t):
    return bool(ember.any(t == 0))


def _prod_leave_one_out(grad, input, dim):
    """``grad * conj(prod of the other elements of the slice)`` along ``dim``, exact with zeros.

    The product without element ``k`` is (product of the elements before ``k``)
    times (product of those after ``k``): two exclusive cumulative products,
    one of them over the flipped slice. ``grad`` has the reduced dim kept.
    """
    n = input.shape[dim]
    if input.numel() == 0:
        return grad.expand(input.shape)
    ones_shape = list(input.shape)
    ones_shape[dim] = 1
    ones = ember.ones(ones_shape, dtype=input.dtype, device=input.device)
    before = ember.cumprod(ember.cat([ones, ember.narrow(input, dim, 0, n - 1)], dim), dim)
    after_flipped = ember.cumprod(ember.cat([ones, ember.flip(ember.narrow(input, dim, 1, n - 1), [dim])], dim), dim)
    return grad * conj(before * ember.flip(after_flipped, [dim]))


def _prod_backward(grad, input, result, dim, keepdim, dtype):
    if dtype is not None and input.dtype is not dtype:
        input = input.to(dtype)
    if input.dim() == 0:
        return grad
    if dim is None:
        if not _any_zero(input):
            return grad * conj(result / input)
        if not ember.is_grad_enabled() and int(ember.sum(input == 0)) > 1:
            return ember.zeros_like(input)  # every product leaving one element out has a zero in it
        return _prod_leave_one_out(grad, input.reshape(-1), 0).reshape(input.shape)
    d = dim % input.dim()
    if not keepdim:
        grad = grad.unsqueeze(d)
        result = result.unsqueeze(d)
    if not _any_zero(input):
        return grad * conj(result / input)
    return _prod_leave_one_out(grad, input, d)


derivative("prod", input=_prod_backward)


# -- var, std, var_mean, std_mean ----------------------------------------------------------------------


def _var_backward(grad, input, dim, unbiased, keepdim, correction):
    """The gradient of ``var``: ``2 / (N - correction) * grad * (input - mean)``.

    With no degrees of freedom left (``N - correction <= 0``) a full reduction
    gives ``NaN`` where ``input`` equals its mean and ``inf`` elsewhere, as in
    PyTorch; a reduction over ``dim`` divides by ``N - correction`` as it is.
    """
    if isinstance(dim, bool):  # the var(input, unbiased) overload
        unbiased, dim = dim, None
    if correction is None:
        correction = 0 if unbiased is False else 1
    ndim = input.dim()
    full = ndim == 0 or dim is None or (isinstance(dim, (tuple, list)) and not dim)
    dims = _wrap_dims(dim, ndim)
    dof = (_count(input.shape, dims) if ndim else 1) - correction
    if full:
        if dof <= 0:
            return grad * ember.where(input == ember.mean(input), math.nan, math.inf)
        return grad * (2.0 / dof) * (input - ember.mean(input))
    scale = 2.0 / dof if dof != 0 else math.inf
    return _restore(grad, ndim, dims, keepdim) * scale * (input - ember.mean(input, dims, True))


def _std_backward(grad, result, input, dim, unbiased, keepdim, correction):
    """``std = sqrt(var)``: ``var``'s gradient of ``grad / (2 std)`` (zero where ``std`` is zero, as PyTorch)."""
    grad_var = ember.where(result == 0, 0, grad / (2 * result))
    return _var_backward(grad_var, input, dim, unbiased, keepdim, correction)


def _moments_mean_backward(grad, input, dim, keepdim):
    if isinstance(dim, bool):
        dim = None
    return _mean_backward(grad, input, dim, keepdim)


def _var_mean_backward(grads, input, dim, unbiased, keepdim, correction):
    return _var_backward(grads[0], input, dim, unbiased, keepdim, correction) + _moments_mean_backward(
        grads[1], input, dim, keepdim
    )


def _std_mean_backward(grads, results, input, dim, unbiased, keepdim, correction):
    return _std_backward(grads[0], results[0], input, dim, unbiased, keepdim, correction) + _moments_mean_backward(
        grads[1], input, dim, keepdim
    )


derivative("var", input=_var_backward)
derivative("std", input=_std_backward)
derivative("var_mean", input=_var_mean_backward)
derivative("std_mean", input=_std_mean_backward)


# -- amax, amin, max, min, aminmax -------------------------------------------------------------------


def _extreme_backward(grad, input, result, dim, keepdim):
    """``amax``/``amin``: the gradient split evenly among the elements equal to the extreme."""
    ndim = input.dim()
    dims = _wrap_dims(dim, ndim)
    mask = input == _restore(result, ndim, dims, keepdim)
    return _scale_by_count(_restore(grad, ndim, dims, keepdim), mask, dims)


def _aminmax_backward(grads, results, input, dim, keepdim):
    return _extreme_backward(grads[0], input, results[0], dim, keepdim) + _extreme_backward(
        grads[1], input, results[1], dim, keepdim
    )


derivative("amax", input=_extreme_backward)
derivative("amin", input=_extreme_backward)
derivative("aminmax", input=_aminmax_backward)


def _pairwise_backward(grad, input, other, largest, for_input):
    """``maximum``/``minimum``'s gradient (the elementwise ``max(input, other)``): half to each side of a tie.

    The side that lost gets zero; where either is NaN both sides get the gradient (PyTorch's values).
    """
    g = ember.where(input == other, grad / 2, grad)
    lost = (input < other) if largest == for_input else (input > other)
    return ember.where(lost, 0, g)


def _max_min_formulas(largest):
    def input_grad(grad, input, dim, keepdim, other, results):
        if _is_tensor(dim):  # max(input, other) passed positionally
            dim, other = None, dim
        if other is not None:
            return _pairwise_backward(grad, input, other, largest, True)
        if dim is None:
            return _evenly_distribute(grad, input, results[0])
        return _select_backward(grad, input, dim, results[1], keepdim)

    def other_grad(grad, input, other):
        return _pairwise_backward(grad, input, other, largest, False)

    def dim_grad(grad, input, dim):  # called only when ``dim`` holds the tensor ``other``
        return _pairwise_backward(grad, input, dim, largest, False)

    return {"input": input_grad, "dim": dim_grad, "other": other_grad}


derivative("max", **_max_min_formulas(largest=True))
derivative("min", **_max_min_formulas(largest=False))


# -- logsumexp, norm ---------------------------------------------------------------------------------


def _logsumexp_backward(grad, input, result, dim, keepdim):
    """``grad * softmax(input)``, the softmax written as ``exp(input - result)``."""
    ndim = input.dim()
    dims = _wrap_dims(dim, ndim)
    g = _restore(grad, ndim, dims, keepdim)
    return g * conj(ember.exp(input - _restore(result, ndim, dims, keepdim)))


derivative("logsumexp", input=_logsumexp_backward)


def _norm_order(p):
    """``norm``'s ``p`` as a number, or ``"nuc"``."""
    if isinstance(p, str):
        return p if p == "nuc" else 2.0  # "fro" over up to two dims is the 2-norm of the elements
    return 2.0 if p is None else float(p)


def _norm_backward(grad, input, result, p, dim, keepdim, dtype):
    """The vector p-norm's gradient, PyTorch's values at zeros (0 for p >= 1) and ties (split for p = inf)."""
    order = _norm_order(p)
    if order == "nuc":
        raise NotImplementedError(
            "the derivative of norm(p='nuc') is not implemented in ember-autograd: it needs the singular vectors "
            "of the input (U @ Vh), and ember has no SVD yet"
        )
    if dtype is not None and input.dtype is not dtype:
        input = input.to(dtype)
    ndim = input.dim()
    dims = _wrap_dims(dim, ndim)
    if order == 0.0:
        return ember.zeros_like(input)
    g = _restore(grad, ndim, dims, keepdim)
    norm = _restore(result, ndim, dims, keepdim)
    if order == 1.0:
        return ember.sgn(input) * g
    if order == 2.0:
        return g * ember.where(norm == 0, 0, input / norm)
    if math.isinf(order):
        magnitude = ember.abs(input)
        mask = ember.logical_or(magnitude == norm, ember.isnan(magnitude))
        return ember.sgn(input) * _scale_by_count(g, mask, dims)
    if order < 1.0:
        scaled = ember.sgn(input) * ember.where(input == 0, 0, ember.pow(ember.abs(input), order - 1))
        return scaled * g * ember.pow(norm, 1 - order)
    if order < 2.0:
        scaled = ember.sgn(input) * ember.pow(ember.abs(input), order - 1)
    else:
        scaled = input * ember.pow(ember.abs(input), order - 2)
    return scaled * ember.where(norm == 0, 0, g / ember.pow(norm, order - 1))


derivative("norm", input=_norm_backward)


# -- cumsum, cumprod, cummax, cummin, logcumsumexp ---------------------------------------------------


def _cumsum_backward(grad, dim):
    if grad.dim() == 0 or grad.numel() <= 1:
        return grad
    d = dim % grad.dim()
    if grad.shape[d] == 1:
        return grad
    return _reversed_cumsum(grad, d)


def _cumprod_backward(grad, input, result, dim, dtype):
    """``grad_k = sum_{i >= k} grad_i * conj(prod_{j <= i, j != k} input_j)``, exact with zeros.

    Without zeros this is ``reversed_cumsum(grad * conj(result)) / conj(input)``.
    With zeros, the O(n) split of :func:`_cumprod_zeros_backward` when no graph
    of the backward is recorded; else the O(n^2) :func:`_cumprod_zeros_differentiable`,
    whose own derivative is exact too (PyTorch's choice).
    """
    if dtype is not None and input.dtype is not dtype:
        input = input.to(dtype)
    if input.numel() <= 1:
        return grad
    d = dim % input.dim()
    if input.shape[d] == 1:
        return grad
    if not _any_zero(input):
        return _reversed_cumsum(grad * conj(result), d) / conj(input)
    if not ember.is_grad_enabled():
        return _cumprod_zeros_backward(grad, input, result, d)
    return _cumprod_zeros_differentiable(grad, input, d)


def _cumprod_zeros_backward(grad, input, result, d):
    """The cumprod gradient with zeros in ``input``, in O(n) along ``d``.

    Along a slice whose first zero is at ``z``: before ``z`` the division by
    ``input`` is safe; at ``z`` the gradient is ``conj(prod(input[:z]))`` times
    the sum of ``grad_i * conj(prod(input[z+1:i+1]))`` up to the next zero
    (later terms contain it); after ``z`` every term has the zero in it.
    """
    is_zero = input == 0
    zeros_so_far = ember.cumsum(is_zero, d)
    before = zeros_so_far == 0
    head = _reversed_cumsum(grad * conj(result), d) / ember.where(before, conj(input), 1)
    head = ember.where(before, head, 0)
    first_run = zeros_so_far == 1  # from the first zero to just before the second
    first_zero = ember.logical_and(is_zero, first_run)
    after_zero = ember.cumprod(ember.where(ember.logical_and(first_run, ember.logical_not(is_zero)), input, 1), d)
    tail = ember.sum(ember.where(first_run, grad * conj(after_zero), 0), d, True)
    prefix = ember.prod(ember.where(before, input, 1), d, True)
    return ember.where(first_zero, conj(prefix) * tail, head)


def _cumprod_zeros_differentiable(grad, input, d):
    """The cumprod gradient with zeros, from an (n, n) table of partial products (exact and differentiable).

    ``partial[k, i] = prod(input[k+1:i+1])`` for ``i >= k`` (a cumprod of the
    slice with the entries up to ``k`` set to one), and the gradient is
    ``conj(prod(input[:k])) * sum_i grad_i * conj(partial[k, i])``.
    """
    x = ember.movedim(input, d, -1)
    g = ember.movedim(grad, d, -1)
    n = x.shape[-1]
    position = ember.arange(n, device=x.device)
    later = position.unsqueeze(0) > position.unsqueeze(1)  # [k, i]: i > k
    partial = ember.cumprod(ember.where(later, x.unsqueeze(-2), 1), -1)
    partial = ember.where(ember.logical_or(later, position.unsqueeze(0) == position.unsqueeze(1)), partial, 0)
    ones = ember.ones((*x.shape[:-1], 1), dtype=x.dtype, device=x.device)
    prefix = ember.cumprod(ember.cat([ones, ember.narrow(x, -1, 0, n - 1)], -1), -1)
    result = conj(prefix) * ember.sum(g.unsqueeze(-2) * conj(partial), -1)
    return ember.movedim(result, -1, d)


def _cum_extreme_backward(grad, results, dim):
    """``cummax``/``cummin``: each output's gradient to the element its index names (several may share one).

    The indices have the input's shape, so the input itself is not saved.
    """
    indices = results[1]
    if indices.numel() == 0 or indices.dim() == 0:
        return grad
    zeros = ember.zeros(indices.shape, dtype=grad.dtype, device=grad.device)
    return zeros.scatter_add(dim % indices.dim(), indices, grad)


def _reversed_logcumsumexp(x, d):
    return ember.flip(ember.logcumsumexp(ember.flip(x, [d]), d), [d])


def _logcumsumexp_backward(grad, input, result, dim):
    """``grad_k = sum_{i >= k} grad_i * exp(input_k - result_i)``, summed in log space (stable).

    A real gradient is split into its positive and negative parts, whose logs
    exist; a complex one is taken to the log as it is (PyTorch's formula).
    """
    if grad.dim() == 0 or grad.numel() == 0:
        return grad
    d = dim % grad.dim()
    if grad.is_complex():
        out = ember.exp(_reversed_logcumsumexp(ember.log(conj(grad)) - result, d) + input)
        return conj(out)
    lowest = ember.finfo(grad.dtype).min  # not -inf: -inf - (-inf) would be NaN
    log_magnitude = ember.log(ember.abs(grad))
    log_positive = ember.where(grad > 0, log_magnitude, lowest)
    log_negative = ember.where(grad < 0, log_magnitude, lowest)
    positive = ember.exp(_reversed_logcumsumexp(log_positive - result, d) + input)
    negative = ember.exp(_reversed_logcumsumexp(log_negative - result, d) + input)
    return positive - negative


derivative("cumsum", input=_cumsum_backward)
derivative("cumprod", input=_cumprod_backward)
derivative("cummax", input=_cum_extreme_backward)
derivative("cummin", input=_cum_extreme_backward)
derivative("logcumsumexp", input=_logcumsumexp_backward)


# -- sort, topk, kthvalue, median, nanmedian, mode ---------------------------------------------------


def _sort_backward(grad, dim, results):
    """Each sorted value's gradient back to where it came from (the indices have the input's shape)."""
    indices = results[1]
    if indices.dim() == 0:
        return grad
    zeros = ember.zeros(indices.shape, dtype=grad.dtype, device=grad.device)
    return zeros.scatter(dim % indices.dim(), indices, grad)


derivative("sort", input=_sort_backward)
derivative("topk", input=lambda grad, input, dim, results: _select_backward(grad, input, dim, results[1], True))


def _selected_backward(grad, input, dim, keepdim, results):
    """``kthvalue``, ``mode``, ``median``/``nanmedian``: to the index output; without ``dim``, split evenly."""
    if dim is None:
        return _evenly_distribute(grad, input, results[0])
    return _select_backward(grad, input, dim, results[1], keepdim)


derivative("kthvalue", input=_selected_backward)
derivative("median", input=_selected_backward)
derivative("nanmedian", input=_selected_backward)
derivative("mode", input=_selected_backward)
through_decomposition("msort")


# -- quantile, nanquantile ---------------------------------------------------------------------------


def _quantile_parts(input, q, dim, interpolation, ignore_nan):
    """What the gradients of ``quantile`` need, with the reduced dim last and the ``q`` dim at the end.

    Returns ``(order, below, above, weight, low, high, (fixed, slope))``: the
    sort order of each row, the sorted positions interpolated between, the
    weight of ``above`` (a lerp), the values there, where the rank does not
    follow ``q`` (rows that pick a NaN) and ``d rank / d q`` elsewhere. Ranks
    are computed as the kernel (and PyTorch) compute them, so the same
    elements are picked.
    """
    if dim is None or input.dim() == 0:
        x = input.reshape(1, -1)
    else:
        x = ember.movedim(input, dim % input.dim(), -1)
    rows = x.shape[:-1]
    n = x.shape[-1]
    values, order = ember.sort(x, -1)  # NaN last, as the kernel sorts
    nans = ember.sum(ember.isnan(x), -1, True)  # (*rows, 1)
    q_flat = q.reshape(-1) if _is_tensor(q) else ember.tensor([float(q)], dtype=x.dtype, device=x.device)
    q_flat = q_flat.reshape((*(1,) * len(rows), -1))  # (1, ..., 1, Q)
    if ignore_nan:
        slope = (n - 1 - nans).to(x.dtype)
        ranks = q_flat * slope
        fixed = ranks < 0  # all-NaN rows pick a NaN
    else:
        slope = ember.full((*rows, 1), n - 1, dtype=x.dtype, device=x.device)
        ranks = q_flat * slope
        fixed = (nans > 0).expand(ranks.shape)  # rows with a NaN pick it
    ranks = ember.where(fixed, float(n - 1), ranks)
    if interpolation == "lower":
        ranks = ember.floor(ranks)
    elif interpolation == "higher":
        ranks = ember.ceil(ranks)
    elif interpolation == "nearest":
        ranks = ember.round(ranks)
    below = ember.floor(ranks).to(ember.int64)
    above = ember.clamp(ember.ceil(ranks).to(ember.int64), max=n - 1)
    if interpolation == "linear":
        weight = ranks - below.to(ranks.dtype)
    elif interpolation == "midpoint":
        weight = ember.full(ranks.shape, 0.5, dtype=ranks.dtype, device=ranks.device)
    else:
        weight = None
    low = ember.gather(values, -1, below)
    high = ember.gather(values, -1, above) if weight is not None else None
    return order, below, above, weight, low, high, (fixed, slope)


def _quantile_grad_rows(grad, input, q, dim, keepdim):
    """``grad`` (shape ``q.shape + out_shape``) as ``(*rows, Q)`` to match :func:`_quantile_parts`."""
    if _is_tensor(q) and q.dim() == 1:
        grad = ember.movedim(grad, 0, -1)
    else:
        grad = grad.unsqueeze(-1)
    if dim is None or input.dim() == 0:
        return grad.reshape(1, -1)
    if keepdim:
        grad = grad.squeeze(dim % input.dim())
    return grad


def _quantile_formulas(ignore_nan):
    def input_grad(grad, input, q, dim, keepdim, interpolation):
        order, below, above, weight, _, _, _ = _quantile_parts(input, q, dim, interpolation, ignore_nan)
        g = _quantile_grad_rows(grad, input, q, dim, keepdim)
        picked_low = ember.gather(order, -1, below)
        zeros = ember.zeros(order.shape, dtype=g.dtype, device=g.device)
        if weight is None:
            grad_rows = zeros.scatter_add(-1, picked_low, g)
        else:
            grad_rows = zeros.scatter_add(-1, picked_low, g * (1 - weight))
            grad_rows = grad_rows.scatter_add(-1, ember.gather(order, -1, above), g * weight)
        if dim is None or input.dim() == 0:
            return grad_rows.reshape(input.shape)
        return ember.movedim(grad_rows, -1, dim % input.dim())

    def q_grad(grad, input, q, dim, keepdim, interpolation):
        if interpolation != "linear":  # the rank is rounded (or the weight fixed): no dependence on q
            return ember.zeros_like(q)
        _, _, _, _, low, high, (fixed, slope) = _quantile_parts(input, q, dim, interpolation, ignore_nan)
        g = _quantile_grad_rows(grad, input, q, dim, keepdim)
        per_q = ember.where(fixed, 0, g * (high - low) * slope)  # (*rows, Q); rows picking a NaN don't follow q
        per_q = ember.sum(per_q.reshape(-1, per_q.shape[-1]), 0)
        return per_q.reshape(q.shape)

    return {"input": input_grad, "q": q_grad}


derivative("quantile", **_quantile_formulas(ignore_nan=False))
derivative("nanquantile", **_quantile_formulas(ignore_nan=True))


# -- diff, and what has no gradient ------------------------------------------------------------------

through_decomposition("diff")

nondifferentiable(
    "argmax",
    "argmin",
    "all",
    "any",
    "count_nonzero",
    "argsort",
    "histc",
    "searchsorted",
    "bucketize",
)
derivative("unique", input=_not_implemented("unique"))
derivative("unique_consecutive", input=_not_implemented("unique_consecutive"))
derivative("bincount", weights=_not_implemented("bincount"))
derivative(
    "histogram",
    input=_not_implemented("histogram"),
    bins=_not_implemented("histogram"),
    weight=_not_implemented("histogram"),
)
