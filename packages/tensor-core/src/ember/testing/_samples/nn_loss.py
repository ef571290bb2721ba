"""OpInfos of the losses (``ember._ops.nn_loss_*``).

References are written directly from the definitions (in float64, loops where that
is clearer), independently of the kernels; see :mod:`ember.testing._samples._nn_common`.
"""

from __future__ import annotations

import math

import numpy as np

from ... import _dtype as D
from .._opinfo import (
    ALL_TYPES,
    SampleInput,
)
from ._common import maker
from ._nn_common import (
    _F32_F64,
    _FLOATS,
    _FLOATS_AND_COMPLEX,
    _NO_BOOL,
    _REAL_NO_BOOL,
    _args,
    _errors,
    _f64,
    _nn,
    _reduce,
    _sigmoid64,
    _t,
    _z,
)
from .nn_distance import _eps_in, _pairwise_distance_ref

_REDUCTION_KWARGS = ({"reduction": "none"}, {"reduction": "sum"})


def _pair_losses(*kwarg_sets, low=None, high=None, target_low=None, target_high=None, broadcast=True):
    """Samples of an elementwise loss ``op(input, target)``: shapes, then each kwargs set."""

    def gen(opinfo, device, dtype, requires_grad):
        make = maker(device, dtype, requires_grad, low=low, high=high)
        target = maker(device, dtype, False, seed=1, low=target_low, high=target_high)
        yield SampleInput(make((2, 3)), (target((2, 3)),), name="2-d")
        yield SampleInput(make(()), (target(()),), name="zero-dim")
        yield SampleInput(make((3, 4), noncontiguous=True), (target((4, 3)).t(),), name="noncontiguous")
        yield SampleInput(make((0, 3)), (target((0, 3)),), {"reduction": "sum"}, name="empty")
        if broadcast:
            yield SampleInput(make((2, 3)), (target((3,)),), name="broadcast target")
        for kwargs in _REDUCTION_KWARGS + kwarg_sets:
            yield SampleInput(make((2, 5)), (target((2, 5)),), dict(kwargs), name=f"kwargs {kwargs}")

    return gen


def _weighted_samples(base):
    def gen(opinfo, device, dtype, requires_grad):
        yield from base(opinfo, device, dtype, requires_grad)
        make = maker(device, dtype, requires_grad, seed=4)
        weights = maker(device, dtype, False, seed=5, low=0.5, high=2)
        for reduction in ("mean", "sum", "none"):
            yield SampleInput(make((2, 3)), (make((2, 3)),), {"weight": weights((2, 3)), "reduction": reduction},
                              name=f"weight, {reduction}")

    return gen


def _weighted_ref(fn, *, divide_by_weight):
    def ref(x, t, *args, reduction="mean", weight=None, **kwargs):
        loss = fn(x, t, *args, **kwargs)
        if weight is None:
            return _reduce(loss, reduction)
        loss = loss * _f64(weight)
        if reduction == "mean" and divide_by_weight:
            return loss.sum() / _f64(weight).sum()
        return _reduce(loss, reduction)

    return ref


def _loss_errors(*extra, kernel=None, target_args=(), reductions=True):
    cases = list(extra)
    if reductions:
        cases.append((_args(_z(3), _z(3), *target_args), {"reduction": "foo"}, ValueError,
                      "foo is not a valid value for reduction"))
    if kernel is not None:
        cases.append((lambda device: (_t(device, [1, 2]), _t(device, [1, 2]), *target_args), {}, NotImplementedError,
                      f'"{kernel}" not implemented'))
    return _errors(*cases)


_nn("mse_loss", _weighted_samples(_pair_losses()), _FLOATS,
    _weighted_ref(lambda x, t: (_f64(x) - _f64(t)) ** 2, divide_by_weight=True),
    _loss_errors((_args(_z(2, 3), _z(4)), {}, RuntimeError, "must match the size"),
                 (_args(_z(3), _z(3)), {"weight": _z(1)}, ValueError, "Weights and input must have the same size"),
                 kernel="mse_cpu"))
_nn("l1_loss", _weighted_samples(_pair_losses()), _FLOATS_AND_COMPLEX,
    _weighted_ref(lambda x, t: np.abs(_f64(x) - _f64(t)), divide_by_weight=True),
    _loss_errors((lambda device: (_t(device, [True]), _t(device, [False])), {}, RuntimeError, "Subtraction"),
                 (lambda device: (_t(device, [1, 2]), _t(device, [1, 2])), {}, RuntimeError,
                  "mean\\(\\): could not infer output dtype")))


def _smooth_l1_ref(x, t, beta=1.0):
    d = np.abs(_f64(x) - _f64(t))
    return d if beta == 0 else np.where(d < beta, 0.5 * d * d / beta, d - 0.5 * beta)


def _huber_ref(x, t, delta=1.0):
    d = np.abs(_f64(x) - _f64(t))
    return np.where(d <= delta, 0.5 * d * d, delta * (d - 0.5 * delta))


_nn("smooth_l1_loss", _pair_losses({"beta": 2.5}, {"beta": 0.0, "reduction": "none"}, low=-3, high=3), _FLOATS,
    lambda x, t, size_average=None, reduce=None, reduction="mean", beta=1.0: _reduce(_smooth_l1_ref(x, t, beta),
                                                                                     reduction),
    _loss_errors((_args(_z(3), _z(3)), {"beta": -1.0}, RuntimeError, "does not support negative values for beta"),
                 kernel="smooth_l1_cpu"))
_nn("huber_loss", _weighted_samples(_pair_losses({"delta": 2.5}, {"delta": 0.5, "reduction": "none"}, low=-3, high=3)),
    _FLOATS, _weighted_ref(_huber_ref, divide_by_weight=False),
    _loss_errors((_args(_z(3), _z(3)), {"delta": 0.0}, RuntimeError, "does not support non-positive values for delta"),
                 kernel="huber_cpu"))


def _bce_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad, low=0.05, high=0.95)
    target = maker(device, dtype, False, seed=1, low=0, high=1)
    weights = maker(device, dtype, False, seed=2, low=0.5, high=2)
    yield SampleInput(make((2, 3)), (target((2, 3)),), name="2-d")
    yield SampleInput(make(()), (target(()),), name="zero-dim")
    yield SampleInput(make((3, 4), noncontiguous=True), (target((4, 3)).t(),), {"reduction": "sum"},
                      name="noncontiguous")
    yield SampleInput(make((2, 3)), (target((2, 3)), weights((3,))), {"reduction": "none"}, name="weight")
    yield SampleInput(make((0, 3)), (target((0, 3)),), {"reduction": "sum"}, name="empty")
    yield SampleInput(_t(device, [0.0, 1.0, 1.0, 0.0], dtype), (_t(device, [1.0, 0.0, 1.0, 0.0], dtype),),
                      {"reduction": "none"}, name="saturated (log clamped at -100)")


def _bce_ref(x, t, weight=None, size_average=None, reduce=None, reduction="mean"):
    x, t = _f64(x), _f64(t)
    with np.errstate(divide="ignore"):
        loss = -(t * np.maximum(np.log(x), -100) + (1 - t) * np.maximum(np.log(1 - x), -100))
    if weight is not None:
        loss = loss * _f64(weight)
    return _reduce(loss, reduction)


_nn("binary_cross_entropy", _bce_samples, _FLOATS, _bce_ref,
    _loss_errors((_args(_z(3), _z(2, 3)), {}, ValueError, "that is different to the input size"),
                 (_args(_z(3), _z(3, dtype=D.float64)), {}, RuntimeError, "Found dtype Double but expected Float"),
                 (lambda device: (_t(device, [1.5]), _t(device, [1.0])), {}, RuntimeError,
                  "all elements of input should be between 0 and 1")),
    tolerances={D.float16: (2e-3, 2e-3)})


def _bce_logits_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad, low=-4, high=4)
    target = maker(device, dtype, False, seed=1, low=0, high=1)
    weights = maker(device, dtype, False, seed=2, low=0.5, high=2)
    yield SampleInput(make((2, 3)), (target((2, 3)),), name="2-d")
    yield SampleInput(make(()), (target(()),), name="zero-dim")
    yield SampleInput(make((3, 4), noncontiguous=True), (target((4, 3)).t(),), {"reduction": "sum"},
                      name="noncontiguous")
    yield SampleInput(make((2, 3)), (target((2, 3)), weights((3,))), {"pos_weight": weights((3,))},
                      name="weight and pos_weight")
    yield SampleInput(make((2, 3)), (target((2, 3)),), {"pos_weight": weights((3,)), "reduction": "none"},
                      name="pos_weight, none")
    yield SampleInput(make((0, 3)), (target((0, 3)),), {"reduction": "sum"}, name="empty")


def _bce_logits_ref(x, t, weight=None, size_average=None, reduce=None, reduction="mean", pos_weight=None):
    x, t = _f64(x), _f64(t)
    log_sig, log_sig_neg = -np.logaddexp(0, -x), -np.logaddexp(0, x)
    pw = 1 if pos_weight is None else _f64(pos_weight)
    loss = -(pw * t * log_sig + (1 - t) * log_sig_neg)
    if weight is not None:
        loss = loss * _f64(weight)
    return _reduce(loss, reduction)


_nn("binary_cross_entropy_with_logits", _bce_logits_samples, _FLOATS, _bce_logits_ref,
    _loss_errors((_args(_z(3), _z(2, 3)), {}, ValueError, "must be the same as input size"),
                 (_args(_z(2, 3), _z(2, 3)), {"pos_weight": _z(4)}, RuntimeError, "must match the size"),
                 (lambda device: (_t(device, [1.0]), _t(device, [1])), {}, RuntimeError, "can't be cast")),
    tolerances={D.float16: (2e-3, 2e-3)})


def _kl_div_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad, low=-3, high=0)
    target = maker(device, dtype, False, seed=1, low=0, high=1)
    yield SampleInput(make((2, 3)), (target((2, 3)),), {"reduction": "batchmean"}, name="batchmean")
    yield SampleInput(make((2, 3)), (target((2, 3)),), {"reduction": "none"}, name="none")
    yield SampleInput(make((3, 4), noncontiguous=True), (target((4,)),), {"reduction": "sum"},
                      name="noncontiguous, broadcast")
    yield SampleInput(make((2, 3)), (make((2, 3)),), {"reduction": "sum", "log_target": True}, name="log_target")
    yield SampleInput(make(()), (target(()),), {"reduction": "batchmean"}, name="zero-dim batchmean")
    yield SampleInput(make((2, 3)), (target((2, 3)) * 0,), {"reduction": "sum"}, name="zero targets")


def _kl_div_ref(x, t, size_average=None, reduce=None, reduction="mean", log_target=False):
    x, t = _f64(x), _f64(t)
    if log_target:
        loss = np.exp(t) * (t - x)
    else:
        with np.errstate(divide="ignore", invalid="ignore"):
            loss = np.where(t > 0, t * np.log(t), 0) - t * x
    if reduction == "batchmean":
        return loss.sum() / (x.shape[0] if x.ndim else 1)
    return _reduce(loss, reduction)


_nn("kl_div", _kl_div_samples, _FLOATS, _kl_div_ref,
    _errors((_args(_z(3), _z(3)), {"reduction": "foo"}, ValueError, "foo is not a valid value for reduction"),
            (lambda device: (_t(device, [1]), _t(device, [1])), {}, RuntimeError, "Integral inputs not supported"),
            (lambda device: (_t(device, [1j]), _t(device, [1j])), {}, RuntimeError, "Complex inputs not supported")),
    tolerances={D.float16: (2e-3, 2e-3)})


def _poisson_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad, low=-2 if dtype.is_signed else 0, high=2)
    rates = maker(device, dtype, requires_grad, low=0.1, high=3)
    counts = maker(device, dtype, False, seed=1, low=0, high=5)
    yield SampleInput(make((2, 3)), (counts((2, 3)),), name="2-d")
    yield SampleInput(make(()), (counts(()),), name="zero-dim")
    yield SampleInput(make((3, 4), noncontiguous=True), (counts((4,)),), {"reduction": "sum"},
                      name="noncontiguous, broadcast")
    if not dtype.is_complex:  # PyTorch has no complex comparison for the Stirling term
        yield SampleInput(make((2, 4)), (counts((2, 4)),), {"full": True, "reduction": "none"}, name="full")
    if dtype.category >= D.FLOATING:
        yield SampleInput(rates((2, 4)), (counts((2, 4)),), {"log_input": False, "reduction": "none"},
                          name="rates")


def _poisson_ref(x, t, log_input=True, full=False, size_average=None, eps=1e-8, reduce=None, reduction="mean"):
    x, t = _f64(x), _f64(t)
    loss = np.exp(x) - t * x if log_input else x - t * np.log(x + eps)
    if full:
        with np.errstate(divide="ignore", invalid="ignore"):
            stirling = t * np.log(t) - t + 0.5 * np.log(2 * np.pi * t)
        loss = loss + np.where(np.real(t) > 1, stirling, 0)
    return _reduce(loss, reduction)


_nn("poisson_nll_loss", _poisson_samples, _NO_BOOL, _poisson_ref,
    _loss_errors((lambda device: (_t(device, [True]), _t(device, [True])), {}, RuntimeError, "Subtraction")),
    tolerances={D.float16: (2e-3, 2e-3), D.bfloat16: (2e-2, 3e-2)})


def _gaussian_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad, low=-2, high=2)
    var = maker(device, dtype, False, seed=1, low=0.1, high=2)
    yield SampleInput(make((2, 3)), (make((2, 3)), var((2, 3))), name="heteroscedastic")
    yield SampleInput(make((2, 3)), (make((2, 3)), var((2, 1))), {"reduction": "none"}, name="one variance per row")
    yield SampleInput(make((2, 3)), (make((2, 3)), var((2,))), {"full": True}, name="var without the last dim")
    yield SampleInput(make((2, 3), noncontiguous=True), (make((3,)), 0.7), {"reduction": "sum"},
                      name="float var, broadcast target")
    yield SampleInput(make((2, 3)), (make((2, 3)), var((2, 3)) * 0), {"eps": 1e-2}, name="clamped var")


def _gaussian_ref(x, t, var, full=False, eps=1e-6, reduction="mean"):
    x, t = _f64(x), _f64(t)
    var = _f64(var)
    if var.ndim and var.shape != x.shape and var.shape == x.shape[:-1]:
        var = var[..., None]
    var = np.maximum(var, eps)
    loss = 0.5 * (np.log(var) + (x - t) ** 2 / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)


_nn("gaussian_nll_loss", _gaussian_samples, _FLOATS, _gaussian_ref,
    _errors((_args(_z(2, 3), _z(2, 3), _z(3)), {}, ValueError, "var is of incorrect size"),
            (_args(_z(2, 3), _z(2, 3), -0.5), {}, ValueError, "var has negative entry"),
            (_args(_z(2, 3), _z(2, 3), _z(2, 3)), {"reduction": "foo"}, ValueError, "foo is not valid")),
    tolerances={D.float16: (2e-3, 2e-3)})


def _margin_ranking_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad, low=-3, high=3)
    signs = _t(device, [1, -1, 1, -1, -1, 1], dtype if dtype.is_signed else D.int64)
    yield SampleInput(make((6,)), (make((6,)), signs), name="1-d")
    yield SampleInput(make((6,)), (make((1,)), signs), {"margin": 0.5, "reduction": "sum"}, name="broadcast, margin")
    yield SampleInput(make((2, 3), noncontiguous=True), (make((2, 3)), signs.reshape(2, 3)), {"reduction": "none"},
                      name="noncontiguous")
    yield SampleInput(make(()), (make(()), signs[0]), name="zero-dim")


def _margin_ranking_ref(x1, x2, t, margin=0, size_average=None, reduce=None, reduction="mean"):
    x1, x2, t = np.asarray(x1), np.asarray(x2), np.asarray(t)
    if x1.dtype.kind in "iu":  # integer arithmetic (wrapping) before the float margin, as PyTorch computes it
        with np.errstate(all="ignore"):
            scores = np.multiply(np.negative(t), np.subtract(x1, x2)).astype(np.float64)
    else:
        scores = -_f64(t) * (_f64(x1) - _f64(x2))
    return _reduce(np.maximum(0, scores + margin), reduction)


_nn("margin_ranking_loss", _margin_ranking_samples, _REAL_NO_BOOL, _margin_ranking_ref,
    _errors((_args(_z(3), _z(3), _z(2, 3)), {}, RuntimeError, "All input tensors should have same dimension"),
            (_args(_z(3), _z(3), _z(3)), {"reduction": "foo"}, ValueError, "foo is not a valid value")))


def _hinge_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad, low=-2, high=3)
    yield SampleInput(make((6,)), (_t(device, [1.0, -1.0, 1.0, -1.0, 1.0, -1.0]),), name="1-d")
    yield SampleInput(make((2, 3), noncontiguous=True), (_t(device, [1, -1, 0]),), {"margin": 2.0, "reduction": "none"},
                      name="broadcast int target")
    yield SampleInput(make(()), (_t(device, -1.0),), {"reduction": "sum"}, name="zero-dim")


def _hinge_ref(x, t, margin=1.0, size_average=None, reduce=None, reduction="mean"):
    x, t = _f64(x), _f64(t)
    loss = np.where(t != 1, np.maximum(margin - x, 0), 0) + np.where(t != -1, x, 0)
    return _reduce(loss, reduction)


_nn("hinge_embedding_loss", _hinge_samples, _FLOATS, _hinge_ref,
    _loss_errors((lambda device: (_t(device, [True]), _t(device, [1])), {}, RuntimeError, "Subtraction")))


def _soft_margin_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad, low=-3, high=3)
    yield SampleInput(make((2, 3)), (_t(device, [[1.0, -1.0, 1.0], [-1.0, -1.0, 1.0]]),), name="2-d")
    yield SampleInput(make((2, 3), noncontiguous=True), (_t(device, [1, -1, 1]),), {"reduction": "none"},
                      name="broadcast int target")
    yield SampleInput(make(()), (_t(device, -1.0),), {"reduction": "sum"}, name="zero-dim")


def _soft_margin_ref(x, t, size_average=None, reduce=None, reduction="mean"):
    return _reduce(np.log1p(np.exp(-_f64(t) * _f64(x))), reduction)


_nn("soft_margin_loss", _soft_margin_samples, _FLOATS_AND_COMPLEX, _soft_margin_ref,
    _loss_errors((_args(_z(3), _z(2, 3)), {}, RuntimeError, "doesn't match the broadcast shape"),
                 (lambda device: (_t(device, [1, 2]), _t(device, [1, 2])), {}, RuntimeError, "can't be cast")),
    tolerances={D.float16: (2e-3, 2e-3)})


def _multilabel_margin_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((2, 4)), (_t(device, [[3, 0, -1, 1], [1, 2, 3, 0]]),), name="2-d")
    yield SampleInput(make((4,)), (_t(device, [2, -1, 0, 0]),), {"reduction": "none"}, name="1-d")
    yield SampleInput(make((3, 4), noncontiguous=True), (_t(device, [[-1, 0, 0, 0], [1, 1, -1, 2], [0, 1, 2, 3]]),),
                      {"reduction": "none"}, name="no targets, repeated target, all targets")
    yield SampleInput(make((2, 4)), (_t(device, [[3, 0, -1, 1], [1, 2, 3, 0]]),), {"reduction": "sum"}, name="sum")


def _multilabel_margin_ref(x, y, size_average=None, reduce=None, reduction="mean"):
    x, y = _f64(x), np.asarray(y)
    rows_x, rows_y = x.reshape(-1, x.shape[-1]), y.reshape(-1, y.shape[-1])
    losses = []
    for xr, yr in zip(rows_x, rows_y):
        targets = []
        for v in yr:
            if v == -1:
                break
            targets.append(int(v))
        total = sum(max(0.0, 1 - (xr[j] - xr[i])) for j in targets for i in range(len(xr)) if i not in targets)
        losses.append(total / len(xr))
    loss = np.array(losses) if x.ndim == 2 else np.array(losses[0])
    return _reduce(loss, reduction)


_nn("multilabel_margin_loss", _multilabel_margin_samples, _F32_F64, _multilabel_margin_ref,
    _errors((lambda device: (_z(2, 3)(device), _t(device, [[1, -1, 0]])), {}, RuntimeError, "inconsistent target size"),
            (lambda device: (_z(2, 3)(device), _t(device, [[1, -1, 0], [3, 0, -1]])), {}, RuntimeError,
             "'target' is out of range"),
            (lambda device: (_z(2, 3)(device), _t(device, [[1, -1, 0], [1, 0, -1]], D.int32)), {}, RuntimeError,
             "expected scalar type Long but found Int"),
            (lambda device: (_z(2, 3, 4)(device), _z(2, 3, 4, dtype=D.int64)(device)), {}, RuntimeError,
             "Expected non-empty vector or matrix")))


def _multilabel_soft_margin_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad, low=-3, high=3)
    labels = maker(device, dtype, False, seed=1, low=0, high=1)
    weights = maker(device, dtype, False, seed=2, low=0.5, high=2)
    yield SampleInput(make((2, 3)), (labels((2, 3)),), name="2-d")
    yield SampleInput(make((4,)), (labels((4,)),), {"reduction": "none"}, name="1-d")
    yield SampleInput(make((2, 3, 4), noncontiguous=True), (labels((2, 3, 4)),), {"reduction": "none"}, name="3-d")
    yield SampleInput(make((2, 3)), (labels((2, 3)), weights((3,))), {"reduction": "sum"}, name="weight")


def _multilabel_soft_margin_ref(x, t, weight=None, size_average=None, reduce=None, reduction="mean"):
    x, t = _f64(x), _f64(t)
    loss = -(t * np.log(_sigmoid64(x)) + (1 - t) * np.log(_sigmoid64(-x)))
    if weight is not None:
        loss = loss * _f64(weight)
    return _reduce(loss.mean(axis=-1), reduction)


_nn("multilabel_soft_margin_loss", _multilabel_soft_margin_samples, _FLOATS, _multilabel_soft_margin_ref,
    _errors((_args(_z(), _z()), {}, IndexError, "Dimension specified as -1 but tensor has no dimensions"),
            (_args(_z(2, 3), _z(2, 3)), {"reduction": "foo"}, ValueError, "foo is not valid")),
    tolerances={D.float16: (2e-3, 2e-3)})


def _multi_margin_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad, low=-2, high=2)
    yield SampleInput(make((3, 4)), (_t(device, [0, 3, 1]),), name="2-d")
    yield SampleInput(make((3, 4)), (_t(device, [0, 3, 1]),), {"p": 2, "margin": 0.5, "reduction": "none"}, name="p=2")
    yield SampleInput(make((3, 4), noncontiguous=True), (_t(device, [2, 2, 0]),),
                      {"weight": _t(device, [0.5, 1.0, 2.0, 1.5], dtype), "reduction": "sum"}, name="weight")
    yield SampleInput(make((4,)), (_t(device, [1]),), {"reduction": "none"}, name="1-d input")
    yield SampleInput(make((4,)), (_t(device, 2),), {"reduction": "none"}, name="1-d input, 0-dim target")


def _multi_margin_ref(x, y, p=1, margin=1.0, weight=None, size_average=None, reduce=None, reduction="mean"):
    x, y = _f64(x), np.asarray(y)
    rows, targets = x.reshape(-1, x.shape[-1]), y.reshape(-1)
    losses = []
    for xr, target in zip(rows, targets):
        w = 1.0 if weight is None else _f64(weight)[target]
        total = sum(max(0.0, margin - xr[target] + xr[i]) ** p * w for i in range(len(xr)) if i != target)
        losses.append(total / len(xr))
    shape = (rows.shape[0],) if x.ndim == 2 else y.shape
    return _reduce(np.array(losses).reshape(shape), reduction)


_nn("multi_margin_loss", _multi_margin_samples, _F32_F64, _multi_margin_ref,
    _errors((lambda device: (_z(3, 4)(device), _t(device, [0, 1, 4])), {}, RuntimeError, "target out of range"),
            (lambda device: (_z(3, 4)(device), _t(device, [0, 1, 2])), {"p": 3}, ValueError,
             "only p == 1 and p == 2 supported"),
            (lambda device: (_z(3, 4)(device), _t(device, [0, 1])), {}, RuntimeError,
             "target tensor should be 1-D with size equal to the number of input samples"),
            (lambda device: (_z(3, 4)(device), _t(device, [0, 1, 2])), {"weight": _z(3)}, RuntimeError,
             "inconsistent weight size")))


def _cosine_embedding_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad, low=-3, high=3)
    yield SampleInput(make((3, 4)), (make((3, 4)), _t(device, [1.0, -1.0, -1.0])), name="2-d")
    yield SampleInput(make((3, 4), noncontiguous=True), (make((3, 4)), _t(device, [1, -1, 1])),
                      {"margin": 0.2, "reduction": "none"}, name="int target, margin")
    yield SampleInput(make((4,)), (make((4,)), _t(device, -1.0)), {"reduction": "sum"}, name="1-d")
    yield SampleInput(make((2, 3)) * 0, (make((2, 3)), _t(device, [1.0, -1.0])), {"reduction": "none"},
                      name="zero vectors")


def _cosine_embedding_ref(x1, x2, t, margin=0, size_average=None, reduce=None, reduction="mean"):
    eps = _eps_in(1e-12, x1)
    x1, x2, t = np.asarray(x1), np.asarray(x2), _f64(t)
    if x1.dtype.kind in "biu":  # products in the integer dtype (wrapping), as PyTorch computes them

        def dot(u, v):
            with np.errstate(all="ignore"):
                return np.multiply(u, v).sum(-1, dtype=np.int64).astype(np.float64)
    else:
        x1, x2 = _f64(x1), _f64(x2)

        def dot(u, v):
            return (u * v).sum(-1)
    with np.errstate(invalid="ignore", divide="ignore"):  # eps is 0 in float16: zero vectors give nan
        cos = dot(x1, x2) / np.sqrt((dot(x1, x1) + eps) * (dot(x2, x2) + eps))
    loss = np.where(t == 1, 1 - cos, 0) + np.where(t == -1, np.maximum(cos - margin, 0), 0)
    return _reduce(loss, reduction)


_nn("cosine_embedding_loss", _cosine_embedding_samples, ALL_TYPES, _cosine_embedding_ref,
    _errors((_args(_z(3), _z(3), _z(1)), {}, RuntimeError, "1D target tensor expects 2D input tensors"),
            (_args(_z(2, 3), _z(2, 3), _z()), {}, RuntimeError, "0D target tensor expects 1D input tensors"),
            (_args(_z(2, 3), _z(2, 3), _z(2, 1)), {}, RuntimeError, "multi-target not supported")),
    tolerances={D.float16: (2e-3, 2e-3)})


def _triplet_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad, low=-3, high=3)
    yield SampleInput(make((3, 4)), (make((3, 4)), make((3, 4))), name="2-d")
    yield SampleInput(make((3, 4)), (make((1, 4)), make((3, 4))), {"margin": 2.0, "p": 1, "reduction": "none"},
                      name="broadcast, p=1")
    yield SampleInput(make((3, 4), noncontiguous=True), (make((3, 4)), make((3, 4))), {"swap": True, "eps": 0.0},
                      name="swap")
    yield SampleInput(make((4,)), (make((4,)), make((4,))), {"reduction": "sum"}, name="1-d")
    yield SampleInput(make((2, 3, 4)), (make((2, 3, 4)), make((2, 3, 4))), {"reduction": "none"}, name="3-d")


def _triplet_ref(a, p_, n, margin=1.0, p=2, eps=1e-6, swap=False, size_average=None, reduce=None,
                 reduction="mean"):
    d_pos = _pairwise_distance_ref(a, p_, p, eps)
    d_neg = _pairwise_distance_ref(a, n, p, eps)
    if swap:
        d_neg = np.minimum(d_neg, _pairwise_distance_ref(p_, n, p, eps))
    return _reduce(np.maximum(margin + d_pos - d_neg, 0), reduction)


_nn("triplet_margin_loss", _triplet_samples, _NO_BOOL, _triplet_ref,
    _errors((_args(_z(2, 3), _z(2, 3), _z(3)), {}, RuntimeError, "expected to have the same number of dimensions"),
            (_args(_z(2, 3), _z(2, 3), _z(2, 3)), {"margin": 0.0}, ValueError, "margin must be greater than 0")),
    tolerances={D.bfloat16: (2e-2, 3e-2), D.float16: (2e-3, 2e-3)})


# -- class-index losses -----------------------------------------------------------------------------------


def _nll_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad, low=-4, high=0)
    weights = maker(device, dtype, False, seed=2, low=0.5, high=2)
    yield SampleInput(make((3, 4)), (_t(device, [0, 3, 1]),), name="2-d")
    yield SampleInput(make((3, 4)), (_t(device, [0, 3, 1]), weights((4,))), {"reduction": "sum"}, name="weight")
    yield SampleInput(make((3, 4)), (_t(device, [0, -100, 1]),), {"reduction": "none"}, name="ignored target")
    yield SampleInput(make((3, 4)), (_t(device, [2, 3, 2]), weights((4,))), {"ignore_index": 2}, name="ignore_index")
    yield SampleInput(make((4,)), (_t(device, 2),), name="1-d input")
    yield SampleInput(make((2, 4, 3)), (_t(device, [[0, 1, 2], [3, 3, 0]]),), {"reduction": "none"}, name="K-dim")
    yield SampleInput(make((2, 3, 2, 2), noncontiguous=True), (_t(device, [[[0, 1], [2, 0]], [[1, 1], [2, 2]]]),),
                      name="2-D spatial")
    yield SampleInput(make((3, 4)), (_t(device, [-100, -100, -100]),), name="every target ignored")


def _nll_ref(x, t, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
    x, t = _f64(x), np.asarray(t)
    if x.ndim == 1:
        x, t = x[None], t.reshape(1)
    xm = np.moveaxis(x, 1, -1).reshape(-1, x.shape[1])
    tf = t.reshape(-1)
    w = np.ones(x.shape[1]) if weight is None else _f64(weight)
    losses, weights = [], []
    for row, target in zip(xm, tf):
        if target == ignore_index:
            losses.append(0.0)
            weights.append(0.0)
        else:
            losses.append(-row[target] * w[target])
            weights.append(w[target])
    losses = np.array(losses)
    if reduction == "none":
        return losses.reshape(np.asarray(t).shape) if np.asarray(x).ndim > 1 and len(t.shape) else losses.reshape(())
    if reduction == "sum":
        return losses.sum()
    with np.errstate(invalid="ignore"):
        return losses.sum() / np.sum(weights)


def _nll_errors(name):
    extra = "cross_entropy: " if name == "cross_entropy" else ""
    return _errors(
        (lambda device: (_z(3, 4)(device), _t(device, [0, 1])), {}, ValueError,
         r"Expected input batch_size \(3\) to match target batch_size \(2\)"),
        (lambda device: (_z(3, 4)(device), _t(device, [0, 1, 4])), {}, IndexError, "Target 4 is out of bounds"),
        (lambda device: (_z(3, 4)(device), _t(device, [0, 1, 2], D.int32)), {}, RuntimeError,
         "expected target dtype to be Long or Byte"),
        (lambda device: (_z(3, 4)(device), _t(device, [0, 1, 2])), {"weight": _z(3)}, RuntimeError,
         f"{extra}weight tensor should be defined either for all 4 classes"),
        (lambda device: (_z(2, 4, 5)(device), _t(device, [[0, 1, 2, 3], [1, 1, 1, 1]])), {}, RuntimeError,
         r"Expected target size \[2, 5\], got \[2, 4\]"),
        (lambda device: (_z(3, 4)(device), _t(device, [0, 1, 2])), {"reduction": "foo"}, ValueError,
         "foo is not a valid value"),
    )


_nn("nll_loss", _nll_samples, _FLOATS, _nll_ref, _nll_errors("nll_loss"), tolerances={D.float16: (2e-3, 2e-3)})


def _cross_entropy_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad, low=-3, high=3)
    probs = maker(device, dtype, False, seed=1, low=0, high=1)
    weights = maker(device, dtype, False, seed=2, low=0.5, high=2)
    yield SampleInput(make((3, 4)), (_t(device, [0, 3, 1]),), name="class indices")
    yield SampleInput(make((3, 4)), (_t(device, [0, 3, 1]), weights((4,))), {"reduction": "sum"}, name="weight")
    yield SampleInput(make((3, 4)), (_t(device, [0, -100, 1]),), {"reduction": "none", "label_smoothing": 0.2},
                      name="ignored target, smoothing")
    yield SampleInput(make((4, 4)), (_t(device, [2, 3, 2, 0]), weights((4,))), {"ignore_index": 2,
                                                                              "label_smoothing": 0.1},
                      name="ignore_index, weight, smoothing")
    yield SampleInput(make((4, 4)), (_t(device, [2, 3, 2, 0]), weights((4,))), {"label_smoothing": 0.3,
                                                                              "reduction": "sum"},
                      name="weight, smoothing, sum")
    yield SampleInput(make((4,)), (_t(device, 2),), name="1-d input")
    yield SampleInput(make((2, 4, 3), noncontiguous=True), (_t(device, [[0, 1, 2], [3, 3, 0]]),),
                      {"label_smoothing": 0.1}, name="K-dim, smoothing")
    yield SampleInput(make((3, 4)), (probs((3, 4)),), name="probabilities")
    yield SampleInput(make((3, 4)), (probs((3, 4)), weights((4,))), {"label_smoothing": 0.2, "reduction": "none"},
                      name="probabilities, weight, smoothing")
    yield SampleInput(make((2, 3, 2)), (probs((2, 3, 2)),), {"reduction": "sum"}, name="K-dim probabilities")
    yield SampleInput(make((0, 4)), (_t(device, [], D.int64),), {"reduction": "sum"}, name="empty batch")


def _cross_entropy_ref(x, t, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean",
                       label_smoothing=0.0):
    x = _f64(x)
    class_dim = 1 if x.ndim >= 2 else 0
    c = x.shape[class_dim]
    shifted = x - x.max(axis=class_dim, keepdims=True) if x.size else x
    logp = shifted - np.log(np.exp(shifted).sum(axis=class_dim, keepdims=True))
    wshape = [1] * x.ndim
    wshape[class_dim] = c
    w = np.ones(wshape) if weight is None else _f64(weight).reshape(wshape)
    t_arr = np.asarray(t)
    if t_arr.shape == x.shape:  # probabilities
        tp = _f64(t_arr) * (1 - label_smoothing) + label_smoothing / c
        loss = -(logp * tp * w).sum(axis=class_dim)
        if reduction == "mean":
            return loss.sum() / (x.size / c)
        return _reduce(loss, reduction)
    nll = _nll_ref(logp, t_arr, weight, ignore_index=ignore_index, reduction=reduction)
    if not label_smoothing:
        return nll
    keep = t_arr != ignore_index
    smooth = np.where(keep, -(logp * w).sum(axis=class_dim), 0)
    if reduction == "none":
        total = smooth
    elif reduction == "sum":
        total = smooth.sum()
    else:
        flat_w = np.ones(c) if weight is None else _f64(weight)
        total = smooth.sum() / flat_w[np.where(keep, t_arr, 0)][keep].sum()
    return (1 - label_smoothing) * nll + total * (label_smoothing / c)


def _cross_entropy_errors(opinfo, device):
    yield from _nll_errors("cross_entropy")(opinfo, device)
    yield from _errors(
        (_args(_z(3, 4), _z(3, 4)), {"ignore_index": 1}, RuntimeError, "ignore_index is not supported for floating"),
        (_args(_z(3, 4), _z(3, 4)), {"label_smoothing": 1.5}, RuntimeError, "label_smoothing must be between"),
        (lambda device: (_z(3, 4)(device), _t(device, [[0, 1, 2, 0]] * 3)), {}, RuntimeError,
         "Expected floating point type for target with class probabilities"),
    )(opinfo, device)


_nn("cross_entropy", _cross_entropy_samples, _FLOATS, _cross_entropy_ref, _cross_entropy_errors,
    tolerances={D.float16: (2e-3, 2e-3), D.bfloat16: (2e-2, 2e-2)})


def _ctc_samples(opinfo, device, dtype, requires_grad):
    import ember

    rng = np.random.default_rng(0)

    def log_probs(*shape):
        logits = rng.normal(size=shape)
        logp = logits - np.log(np.exp(logits).sum(axis=-1, keepdims=True))
        return ember.tensor(logp, dtype=dtype, device=device)

    padded = _t(device, [[1, 2, 2], [3, 1, 0]])
    yield SampleInput(log_probs(6, 2, 4), (padded, _t(device, [6, 5]), _t(device, [3, 2])), name="padded")
    yield SampleInput(log_probs(6, 2, 4), (_t(device, [1, 2, 2, 3, 1]), [6, 5], [3, 2]), {"reduction": "none"},
                      name="concatenated, list lengths")
    yield SampleInput(log_probs(5, 4), (_t(device, [1, 3]), _t(device, 5), _t(device, 2)), {"reduction": "none"},
                      name="unbatched")
    yield SampleInput(log_probs(3, 2, 4), (_t(device, [[1, 1], [2, 3]]), _t(device, [2, 3]), _t(device, [2, 2])),
                      {"reduction": "none"}, name="impossible alignment (inf)")
    yield SampleInput(log_probs(3, 2, 4), (_t(device, [[1, 1], [2, 3]]), _t(device, [2, 3]), _t(device, [2, 2])),
                      {"zero_infinity": True, "reduction": "sum"}, name="zero_infinity")
    yield SampleInput(log_probs(5, 3, 5), (_t(device, [[4, 4, 1], [0, 0, 0], [2, 1, 0]]), _t(device, [5, 0, 4]),
                                           _t(device, [3, 0, 2])), {"blank": 3, "reduction": "none"},
                      name="blank 3, empty input and target")


def _ctc_ref(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean", zero_infinity=False):
    lp = _f64(log_probs)
    if lp.ndim == 2:
        lp = lp[:, None]
        input_lengths, target_lengths = [int(np.asarray(input_lengths))], [int(np.asarray(target_lengths))]
        targets = np.asarray(targets)[None]
    input_lengths = [int(v) for v in np.asarray(input_lengths).reshape(-1)]
    target_lengths = [int(v) for v in np.asarray(target_lengths).reshape(-1)]
    targets = np.asarray(targets)
    losses = []
    start = 0
    for n, (length, tl) in enumerate(zip(input_lengths, target_lengths)):
        if targets.ndim == 2:
            label = list(targets[n, :tl])
        else:
            label = list(targets[start:start + tl])
            start += tl
        ext = [blank]
        for symbol in label:
            ext += [int(symbol), blank]
        alpha = np.full(len(ext), -np.inf)
        if length:
            alpha[0] = lp[0, n, ext[0]]
            if len(ext) > 1:
                alpha[1] = lp[0, n, ext[1]]
        for step in range(1, length):
            new = np.full(len(ext), -np.inf)
            for s in range(len(ext)):
                terms = [alpha[s]]
                if s >= 1:
                    terms.append(alpha[s - 1])
                if s >= 2 and ext[s] != blank and ext[s] != ext[s - 2]:
                    terms.append(alpha[s - 2])
                new[s] = np.logaddexp.reduce(terms) + lp[step, n, ext[s]]
            alpha = new
        if length == 0:
            loss = 0.0 if tl == 0 else np.inf
        else:
            loss = -np.logaddexp(alpha[-1], alpha[-2] if len(ext) > 1 else -np.inf)
        if zero_infinity and np.isinf(loss):
            loss = 0.0
        losses.append(loss)
    losses = np.array(losses)
    if reduction == "mean":
        return (losses / np.maximum(target_lengths, 1)).mean()
    if reduction == "sum":
        return losses.sum()
    return losses if np.asarray(log_probs).ndim == 3 else losses.reshape(())


_nn("ctc_loss", _ctc_samples, _F32_F64, _ctc_ref,
    _errors((lambda device: (_z(5, 2, 4)(device), _t(device, [[1, 2], [3, 1]]), _t(device, [6, 4]),
                             _t(device, [2, 1])), {}, RuntimeError, "Expected input_lengths to have value at most 5"),
            (lambda device: (_z(5, 2, 4)(device), _t(device, [[1, 2], [3, 1]]), _t(device, [5]), _t(device, [2, 1])),
             {}, RuntimeError, "input_lengths must be of size batch_size"),
            (lambda device: (_z(5, 2, 4)(device), _t(device, [[1, 2], [3, 1]]), _t(device, [5, 4]),
                             _t(device, [3, 1])), {}, RuntimeError, "Expected tensor to have size at least 3"),
            (lambda device: (_z(5, 2, 4)(device), _t(device, [[1, 2], [3, 1]]), _t(device, [5, 4]),
                             _t(device, [2, 1])), {"blank": 4}, RuntimeError, "blank must be in label range"),
            (lambda device: (_z(5, 2, 4)(device), _t(device, [[1, 2], [3, 1]]), _t(device, [5.0, 4.0]),
                             _t(device, [2, 1])), {}, RuntimeError, "input_lengths must be integral")))
