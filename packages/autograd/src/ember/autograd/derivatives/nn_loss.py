"""Derivatives of the losses.

See :mod:`ember.autograd.derivatives._nn_common` for the two treatments (formula or decomposition) the
``nn.functional`` ops get.
"""

from __future__ import annotations

import math

import numpy as np

import ember
from ember._ops import registry as _ops
from ember._ops._nn_common import _kernel_reduction

from .._table import derivative, through_decomposition
from ._helpers import conj
from ._nn_common import _cpu_arrays, _cuda_rows

_softmax = _ops["softmax"]
_log_softmax = _ops["log_softmax"]
_logsigmoid = _ops["logsigmoid"]
_one_hot = _ops["one_hot"]
_BCE_EPSILON = 1e-12  # PyTorch's floor on x * (1 - x) in binary_cross_entropy's gradient


def _reduced_grad(grad, reduction, count):
    """The gradient of each loss element: ``grad`` itself ('none'/'sum') or ``grad / count`` ('mean')."""
    if reduction == "mean":
        return grad * (1.0 / count) if count else grad * math.nan
    return grad


def _mse_backward(grad, input, target, size_average, reduce, reduction, weight, output_mask):
    reduction = _kernel_reduction(size_average, reduce, reduction)
    d = input - target
    if weight is None:
        g = _reduced_grad(grad, reduction, d.numel()) * 2.0
    elif reduction == "mean":
        g = weight * (grad * 2.0 / ember.sum(weight))
    else:
        g = weight * (grad * 2.0)
    d_input = d * g
    return d_input, (-d_input if output_mask[1] else None)


def _mse_weight_grad(grad, input, target, weight, size_average, reduce, reduction, result):
    reduction = _kernel_reduction(size_average, reduce, reduction)
    d = input - target
    if reduction == "mean":  # loss = sum(w d^2) / sum(w): d loss / d w = (d^2 - loss) / sum(w)
        return (d * d - result) * (grad / ember.sum(weight))
    return d * d * grad


derivative("mse_loss", joint={("input", "target"): _mse_backward}, weight=_mse_weight_grad)


def _smooth_l1_backward(grad, input, target, size_average, reduce, reduction, beta, output_mask):
    reduction = _kernel_reduction(size_average, reduce, reduction)
    d = input - target
    # d / beta inside (-beta, beta), its sign outside (beta = 0: the L1 loss, 0 at d = 0)
    slope = ember.sign(d) if beta == 0 else ember.clamp(d * (1.0 / beta), -1.0, 1.0)
    d_input = slope * _reduced_grad(grad, reduction, d.numel())
    return d_input, (-d_input if output_mask[1] else None)


derivative("smooth_l1_loss", joint={("input", "target"): _smooth_l1_backward})


def _huber_backward(grad, input, target, reduction, delta, weight, output_mask):
    d = input - target
    g = _reduced_grad(grad, reduction, d.numel())
    if weight is not None:
        g = g * weight
    d_input = ember.clamp(d, -delta, delta) * g
    return d_input, (-d_input if output_mask[1] else None)


def _huber_weight(grad, input, target, reduction, delta):
    d = input - target
    a = ember.abs(d)
    loss = ember.where(a <= delta, d * d * 0.5, (a - 0.5 * delta) * delta)
    return loss * _reduced_grad(grad, reduction, d.numel())  # 'mean' averages the weighted losses


derivative("huber_loss", joint={("input", "target"): _huber_backward}, weight=_huber_weight)
# PyTorch's l1_loss is |input - target| reduced (complex inputs included)
through_decomposition("l1_loss")


def _bce_input(grad, input, target, weight, size_average, reduce, reduction):
    reduction = _kernel_reduction(size_average, reduce, reduction)
    g = _reduced_grad(grad, reduction, input.numel())
    if weight is not None:
        g = g * weight
    # d/dx of -(t log x + (1 - t) log(1 - x)) = (x - t) / (x (1 - x)), the denominator floored as PyTorch does
    return g * (input - target) / ember.clamp((1 - input) * input, min=_BCE_EPSILON)


def _bce_target(grad, input, weight, size_average, reduce, reduction):
    reduction = _kernel_reduction(size_average, reduce, reduction)
    g = _reduced_grad(grad, reduction, input.numel())
    if weight is not None:
        g = g * weight
    return -ember.logit(input) * g


# weight is not differentiable (PyTorch: "not differentiable with respect to argument 'weight'")
derivative("binary_cross_entropy", input=_bce_input, target=_bce_target)


def _bce_logits_input(grad, input, target, weight, size_average, reduce, reduction, pos_weight):
    reduction = _kernel_reduction(size_average, reduce, reduction)
    s = ember.sigmoid(input)
    if pos_weight is None:
        d = s - target
    else:
        pt = pos_weight * target
        d = (pt + 1 - target) * s - pt
    g = _reduced_grad(grad, reduction, d.numel())
    if weight is not None:
        g = g * weight
    return d * g


def _bce_logits_target(grad, input, weight, size_average, reduce, reduction, pos_weight):
    reduction = _kernel_reduction(size_average, reduce, reduction)
    if pos_weight is None:
        d = -input
    else:
        d = _logsigmoid(-input) - pos_weight * _logsigmoid(input)
    g = _reduced_grad(grad, reduction, d.numel())
    if weight is not None:
        g = g * weight
    return d * g


# weight and pos_weight are not differentiable, as in PyTorch
derivative("binary_cross_entropy_with_logits", input=_bce_logits_input, target=_bce_logits_target)


def _multilabel_soft_margin_backward(grad, input, target, weight, size_average, reduce, reduction, output_mask):
    # loss_n = sum_c w_c * l(x_nc, t_nc) / C with l = -(t logsigmoid(x) + (1 - t) logsigmoid(-x))
    reduction = _kernel_reduction(size_average, reduce, reduction)
    classes = input.shape[-1] if input.ndim else 1
    count = input.numel() // classes if classes else 0
    g = _reduced_grad(grad, reduction, count)
    if reduction == "none" and input.ndim:
        g = ember.unsqueeze(g, -1)
    g = g * (1.0 / classes)
    if weight is not None:
        gw = g * weight
    else:
        gw = g
    d_input = d_target = d_weight = None
    if output_mask[0]:
        d_input = (ember.sigmoid(input) - target) * gw
    if output_mask[1]:
        d_target = -input * gw
    if output_mask[2]:
        d_weight = -(target * _logsigmoid(input) + (1 - target) * _logsigmoid(-input)) * g
    return d_input, d_target, d_weight


derivative(
    "multilabel_soft_margin_loss",
    joint={("input", "target", "weight"): _multilabel_soft_margin_backward},
)

# PyTorch's versions of these are compositions of the same ops (clamp_min, where, pairwise_distance, ...)
through_decomposition(
    "kl_div",
    "poisson_nll_loss",
    "gaussian_nll_loss",
    "margin_ranking_loss",
    "hinge_embedding_loss",
    "cosine_embedding_loss",
    "triplet_margin_loss",
)


def _soft_margin_input(grad, input, target, size_average, reduce, reduction):
    # d/dx log(1 + exp(-t x)) = -t sigmoid(-t x) (holomorphic in x for complex inputs)
    reduction = _kernel_reduction(size_average, reduce, reduction)
    d = -target * ember.sigmoid(-target * input)
    return conj(d) * _reduced_grad(grad, reduction, d.numel())


# target is not differentiable (PyTorch: "not differentiable with respect to argument 'target'")
derivative("soft_margin_loss", input=_soft_margin_input)


def _per_sample_grad(grad, reduction, count):
    """Each sample's share of the loss gradient, shaped ``(count, 1)`` or 0-dim (it broadcasts over the classes)."""
    if reduction == "none":
        return grad.reshape(-1, 1)
    return _reduced_grad(grad, reduction, count)


# multi_margin_loss and multilabel_margin_loss: PyTorch's kernels count a hinge only where it is strictly
# positive (its gradient is 0 at the hinge), where the decompositions' clamp would pass it.


def _multi_margin_input(grad, input, target, p, margin, weight, size_average, reduce, reduction):
    reduction = _kernel_reduction(size_average, reduce, reduction)
    classes = input.shape[-1] if input.ndim else 1
    x = input.reshape(-1, classes)
    y = target.reshape(-1).to(ember.int64)
    one_hot = _one_hot(y, classes)
    z = x - ember.gather(x, 1, ember.unsqueeze(y, 1)) + margin  # the hinge of each class i: margin - x_y + x_i
    active = ember.logical_and(z > 0, one_hot == 0)
    h = active * (z * 2) if p == 2 else active.to(x.dtype)
    if weight is not None:
        h = h * ember.unsqueeze(ember.index_select(weight, 0, y), 1)
    h = h * (_per_sample_grad(grad, reduction, x.shape[0]) * (1.0 / classes))
    # each active hinge pushes its class up and the target class down
    return (h - one_hot * ember.sum(h, 1, keepdim=True)).reshape(tuple(input.shape))


derivative("multi_margin_loss", input=_multi_margin_input, nondiff=("target",))


def _multilabel_margin_input(grad, input, target, size_average, reduce, reduction):
    reduction = _kernel_reduction(size_average, reduce, reduction)
    x = input.reshape(1, -1) if input.ndim < 2 else input
    y = target.reshape(tuple(x.shape)).to(ember.int64)
    classes = x.shape[1]
    valid = ember.cumprod((y != -1).to(ember.int64), 1).to(ember.bool)  # the targets before the first -1
    safe = y * valid
    hits = ember.scatter_add(ember.zeros_like(y), 1, safe, valid.to(ember.int64))
    not_target = hits == 0
    picked = ember.gather(x, 1, safe)  # (N, J): the input at each target
    z = ember.unsqueeze(x, 1) - ember.unsqueeze(picked, 2) + 1  # (N, J, C): 1 - x[y_j] + x_i
    active = ember.logical_and(z > 0, ember.logical_and(ember.unsqueeze(valid, 2), ember.unsqueeze(not_target, 1)))
    g = _per_sample_grad(grad, reduction, x.shape[0]) * (1.0 / classes)
    a = active * (ember.unsqueeze(g, 2) if g.ndim else g)
    # every active (target j, class i) pair pushes class i up and target j down
    d = ember.scatter_add(ember.sum(a, 1), 1, safe, -ember.sum(a, 2))
    return d.reshape(tuple(input.shape))


derivative("multilabel_margin_loss", input=_multilabel_margin_input, nondiff=("target",))


# -- ctc_loss -------------------------------------------------------------------------------------------


def _lengths(value, device):
    if isinstance(value, ember.Tensor):
        return value.reshape(-1).to(ember.int64)
    return ember.tensor([int(v) for v in value], dtype=ember.int64, device=device)


def _masked_log(x):
    """``log(x)`` for ``x >= 0``, whose gradient is 0 (not NaN) where ``x`` is 0 (a state no path reaches)."""
    empty = x == 0
    return ember.where(empty, ember.full_like(x, -math.inf), ember.log(ember.where(empty, ember.ones_like(x), x)))


def _logsumexp3(a, b, c):
    """``log(exp(a) + exp(b) + exp(c))`` elementwise: -inf, with gradient 0, where all three are -inf."""
    top = ember.maximum(ember.maximum(a, b), c)
    safe = ember.where(ember.isneginf(top), ember.zeros_like(top), top)
    return safe + _masked_log(ember.exp(a - safe) + ember.exp(b - safe) + ember.exp(c - safe))


def _ctc_extended_labels(targets, lengths_tg, batch, blank, batched, device):
    """``(ext, skip)``: each target with blanks around its labels ``(N, 2 S + 1)``, and where a state may be
    entered from two states back (a label that differs from the previous label)."""
    if batched and targets.ndim == 2:
        width = targets.shape[1]
        labels = targets.to(ember.int64)
    else:
        flat = targets.reshape(-1).to(ember.int64)
        width = int(ember.amax(lengths_tg).item()) if batch else 0
        positions = ember.arange(width, device=device).reshape(1, -1)
        starts = ember.cumsum(lengths_tg, 0) - lengths_tg
        index = starts.reshape(-1, 1) + positions
        index = index * (positions < lengths_tg.reshape(-1, 1))
        if flat.numel():
            labels = ember.index_select(flat, 0, index.reshape(-1)).reshape(batch, width)
        else:
            labels = ember.zeros((batch, width), dtype=ember.int64, device=device)
    in_range = ember.arange(width, device=device).reshape(1, -1) < lengths_tg.reshape(-1, 1)
    labels = ember.where(in_range, labels, ember.full_like(labels, blank))
    blanks = ember.full_like(labels, blank)
    tail = ember.full((batch, 1), blank, dtype=ember.int64, device=device)
    ext = ember.cat([ember.stack([blanks, labels], 2).reshape(batch, 2 * width), tail], 1)
    states = 2 * width + 1
    head = ember.zeros((batch, min(2, states)), dtype=ember.bool, device=device)
    skip = ember.cat([head, ember.logical_and(ext[:, 2:] != blank, ext[:, 2:] != ext[:, :-2])], 1)
    return ext, skip


def _ctc_backward(grad, log_probs, targets, input_lengths, target_lengths, blank, reduction, zero_infinity):
    """The gradient of CTC's negative log-likelihood, by the forward-backward algorithm in log space.

    ``d nll / d log_probs[t, n, c] = -sum over the states s of label c of alpha_t(s) beta_t(s) / p(t, c) / p``,
    the gradient with respect to ``log_probs`` themselves. (PyTorch's kernel returns ``exp(log_probs)`` plus
    that, the gradient with respect to the logits under a ``log_softmax``; both give the same gradient of
    the logits through ``log_softmax``, which is how ``ctc_loss`` is meant to be used.)
    """
    batched = log_probs.ndim == 3
    lp = log_probs if batched else ember.unsqueeze(log_probs, 1)
    steps, batch, classes = lp.shape
    device = lp.device
    lengths_in, lengths_tg = _lengths(input_lengths, device), _lengths(target_lengths, device)
    ext, skip = _ctc_extended_labels(targets, lengths_tg, batch, blank, batched, device)
    states = ext.shape[1]
    emit = ember.gather(lp, 2, ember.unsqueeze(ext, 0).expand(steps, batch, states))  # (T, N, S)
    minus_inf = ember.full((batch, states), -math.inf, dtype=lp.dtype, device=device)
    pad = ember.full((batch, 2), -math.inf, dtype=lp.dtype, device=device)
    state = ember.arange(states, device=device).reshape(1, -1)
    has_labels = (lengths_tg > 0).reshape(-1, 1)
    # alpha_t(s): the paths through state s at frame t (emissions up to t included)
    start = ember.logical_or(state == 0, ember.logical_and(state == 1, has_labels))
    alpha = ember.where(start, emit[0], minus_inf)
    alphas = [alpha]
    for t in range(1, steps):
        prev1 = ember.cat([pad[:, :1], alpha[:, :-1]], 1)
        prev2 = ember.where(skip, ember.cat([pad, alpha], 1)[:, :states], minus_inf)
        alpha = _logsumexp3(alpha, prev1, prev2) + emit[t]
        alphas.append(alpha)
    alphas = ember.stack(alphas)
    # the log-likelihood, from the two final states at each sample's last frame
    last = ember.clamp(lengths_in - 1, min=0).reshape(1, -1, 1).expand(1, batch, states)
    final = ember.gather(alphas, 0, last).reshape(batch, states)
    end_blank = ember.gather(final, 1, (lengths_tg * 2).reshape(-1, 1)).reshape(-1)
    end_label = ember.gather(final, 1, ember.clamp(lengths_tg * 2 - 1, min=0).reshape(-1, 1)).reshape(-1)
    end_label = ember.where(lengths_tg > 0, end_label, ember.full_like(end_label, -math.inf))
    nll = -ember.logaddexp(end_blank, end_label)
    # beta_t(s): the paths from state s at frame t to the end (emissions from t on included)
    end = ember.logical_or(
        state == (lengths_tg * 2).reshape(-1, 1),
        ember.logical_and(state == (lengths_tg * 2 - 1).reshape(-1, 1), has_labels),
    )
    skip_next = ember.cat([skip[:, 2:], ember.zeros((batch, min(2, states)), dtype=ember.bool, device=device)], 1)
    beta = minus_inf
    betas = [None] * steps
    for t in range(steps - 1, -1, -1):
        next1 = ember.cat([beta[:, 1:], pad[:, :1]], 1)
        next2 = ember.where(skip_next, ember.cat([beta[:, 2:], pad], 1)[:, :states], minus_inf)
        carried = _logsumexp3(beta, next1, next2) + emit[t]
        first = ember.where(end, emit[t], minus_inf)
        beta = ember.where((lengths_in - 1 == t).reshape(-1, 1), first, carried)
        betas[t] = beta
    paths = alphas + ember.stack(betas)  # (T, N, S): log of the paths through (t, s), times p(t, ext[s])
    top = ember.amax(paths, 2, keepdim=True)
    top = ember.where(ember.isneginf(top), ember.zeros_like(top), top)
    index = ember.unsqueeze(ext, 0).expand(steps, batch, states)
    per_class = ember.scatter_add(ember.zeros_like(lp), 2, index, ember.exp(paths - top))
    # each sample's share of the reduced loss
    if reduction == "mean":
        scale = grad / (ember.clamp(lengths_tg, min=1).to(lp.dtype) * batch)
    elif reduction == "sum":
        scale = grad.expand(batch)
    else:
        scale = grad.reshape(batch)
    if zero_infinity:
        infinite = ember.isinf(nll)
        scale = ember.where(infinite, ember.zeros_like(scale), scale)
        nll = ember.where(infinite, ember.zeros_like(nll), nll)
    frames = (ember.arange(steps, device=device).reshape(-1, 1) < lengths_in.reshape(1, -1)).to(lp.dtype)
    weight = ember.unsqueeze(frames * scale.reshape(1, -1), 2)
    d = -ember.exp(_masked_log(per_class) + top + nll.reshape(1, -1, 1) - lp) * weight
    return d if batched else d.reshape(tuple(log_probs.shape))


derivative("ctc_loss", log_probs=_ctc_backward, nondiff=("targets", "input_lengths", "target_lengths"))


# -- nll_loss, cross_entropy -------------------------------------------------------------------------------


def _class_targets(input, target, weight, ignore_index):
    """For class-index targets: ``(class dim, safe targets, per-target weights or None, keep mask)``.

    Ignored targets become class 0 with weight 0 (masked, not branched on: the formula stays one
    graph whatever the targets' values).
    """
    cdim = 1 if input.ndim >= 2 else 0
    keep = target != ignore_index
    safe = target * keep
    per_target = None
    if weight is not None:
        per_target = ember.index_select(weight, 0, safe.reshape(-1)).reshape(tuple(target.shape)) * keep
    return cdim, safe, per_target, keep


def _target_scales(grad, reduction, per_target, keep):
    """The gradient of each target's loss term, shaped like ``target``: ``(unweighted, weighted)``.

    Both are 0 for ignored targets. 'mean' divides by the total weight of the kept targets
    (their count without class weights), as the forward does.
    """
    if reduction == "mean":
        grad = grad / ember.sum(keep if per_target is None else per_target)
    g = grad * keep
    return g, (g if per_target is None else g * per_target)


def _index_of(safe, cdim, input):
    """The targets as an index tensor along the class dim of ``input`` (for gather/scatter)."""
    return ember.unsqueeze(safe, cdim) if input.ndim >= 2 else safe.reshape(1)


def _nll_loss_input(grad, input, target, weight, size_average, ignore_index, reduce, reduction):
    reduction = _kernel_reduction(size_average, reduce, reduction)
    cdim, safe, per_target, keep = _class_targets(input, target, weight, ignore_index)
    _, g = _target_scales(grad, reduction, per_target, keep)
    index = _index_of(safe, cdim, input)
    src = (-g).reshape(tuple(index.shape)).to(input.dtype)
    return ember.scatter(ember.zeros_like(input), cdim, index, src)


derivative("nll_loss", input=_nll_loss_input, nondiff=("target",))


def _cross_entropy_input(grad, input, target, weight, size_average, ignore_index, reduce, reduction, label_smoothing):
    reduction = _kernel_reduction(size_average, reduce, reduction)
    cdim = 1 if input.ndim >= 2 else 0
    classes = input.shape[cdim]
    w_shape = [1] * input.ndim
    w_shape[cdim] = classes
    if tuple(target.shape) == tuple(input.shape):
        return _cross_entropy_probs_input(grad, input, target, weight, reduction, label_smoothing, cdim, w_shape)
    rows = _cuda_rows(input, grad, target, weight)
    if rows is not None:
        fused = rows.cross_entropy_backward_tensor(
            grad, input, target, weight, ignore_index, label_smoothing, reduction)
        if fused is not None:
            return fused
    if weight is None and label_smoothing <= 0:
        fast = _cross_entropy_input_cpu(grad, input, target, ignore_index, reduction)
        if fast is not None:
            return fast
    cdim, safe, per_target, keep = _class_targets(input, target, weight, ignore_index)
    p = _softmax(input, cdim)
    one_hot = _one_hot(safe if safe.dtype is ember.int64 else safe.to(ember.int64), classes)
    if input.ndim > 2:
        one_hot = ember.movedim(one_hot, -1, 1)
    eps = label_smoothing
    g, gw = _target_scales(grad, reduction, per_target, keep)
    if input.ndim >= 2:
        weighted = gw is not g
        g = ember.unsqueeze(g, cdim)
        gw = ember.unsqueeze(gw, cdim) if weighted else g
    if eps <= 0:
        # softmax minus the one-hot target, times each target's gradient (its class weight included)
        return (p - one_hot) * gw
    if weight is None:
        # the target smoothed to q = (1 - eps) one_hot + eps / C: softmax minus q
        return (p - one_hot * (1 - eps) - eps / classes) * g
    # (1 - eps) w_t (p - one_hot) from the picked term, (eps / C) (p sum(w) - w) from the smoothing term
    wv = weight.reshape(w_shape).to(p.dtype)
    smooth = (p * ember.sum(weight).to(p.dtype) - wv) * (eps / classes)
    return (p - one_hot) * (gw * (1 - eps)) + smooth * g


def _cross_entropy_input_cpu(grad, input, target, ignore_index, reduction):
    """The formula's gradient ``(softmax(x) - one_hot(t)) * g`` (``g`` each row's share of ``grad``, 0 for an
    ignored target) for plain CPU ``(N, C)`` float logits and ``(N,)`` class indices without class weights or
    label smoothing, in a backward that records nothing: one softmax op, then numpy on its array (subtract 1 at
    each row's target, scale the rows) instead of the formula's dozen ops (a one-hot matrix among them); the same
    operations in the same order, so the same bits. None for every other call (the formula runs)."""
    if input.ndim != 2 or target.ndim != 1:
        return None
    arrays = _cpu_arrays(grad, input, target)
    if arrays is None:
        return None
    g, x, t = arrays
    if x.dtype not in (np.float32, np.float64) or g.dtype != x.dtype or t.dtype.kind not in "iu" or x.size == 0:
        return None
    keep = t != ignore_index
    safe = np.where(keep, t, 0)
    if safe.size and (safe.min() < 0 or safe.max() >= x.shape[1]):
        return None  # an out-of-range target: the formula's one_hot raises the error
    with np.errstate(all="ignore"):
        if reduction == "mean":  # grad / (number of kept targets), rounded once in the logits' dtype
            g = g / x.dtype.type(np.count_nonzero(keep))
        rows = g * keep  # (N,), or () broadcast by 'sum'/'mean'
        d = _softmax(input, 1)._data
        if not d.flags.writeable:
            d = d.copy()
        d[np.arange(x.shape[0]), safe] -= x.dtype.type(1)
        d *= np.broadcast_to(rows, keep.shape)[:, None]
    return ember.Tensor._make(d, input.device)


def _cross_entropy_probs_input(grad, input, target, weight, reduction, label_smoothing, cdim, w_shape):
    # loss_n = -sum_c w_c q_nc log_softmax(x)_nc: d/dx = p * sum_c(w_c q_c) - w * q
    classes = input.shape[cdim]
    p = _softmax(input.to(grad.dtype), cdim)
    q = target.to(grad.dtype)
    if label_smoothing > 0:
        q = q * (1 - label_smoothing) + label_smoothing / classes
    if weight is not None:
        q = q * weight.reshape(w_shape).to(grad.dtype)
    g = _reduced_grad(grad, reduction, input.numel() // classes if classes else 0)
    if reduction == "none" and input.ndim >= 2:
        g = ember.unsqueeze(g, cdim)
    return (p * ember.sum(q, cdim, keepdim=True) - q) * g


def _cross_entropy_target(grad, input, target, weight, size_average, reduce, reduction, label_smoothing):
    # probability targets only (class indices are integers): d loss / d t = -(1 - eps) w log_softmax(x)
    reduction = _kernel_reduction(size_average, reduce, reduction)
    cdim = 1 if input.ndim >= 2 else 0
    classes = input.shape[cdim]
    logp = _log_softmax(input.to(grad.dtype), cdim)
    if weight is not None:
        w_shape = [1] * input.ndim
        w_shape[cdim] = classes
        logp = logp * weight.reshape(w_shape).to(grad.dtype)
    g = _reduced_grad(grad, reduction, input.numel() // classes if classes else 0)
    if reduction == "none" and input.ndim >= 2:
        g = ember.unsqueeze(g, cdim)
    return logp * (g * -(1.0 - label_smoothing))


derivative("cross_entropy", input=_cross_entropy_input, target=_cross_entropy_target)
