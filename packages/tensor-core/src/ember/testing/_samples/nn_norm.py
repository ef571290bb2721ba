"""OpInfos of the normalization ops (``ember._ops.nn_norm``).

References are written directly from the definitions (in float64, loops where that
is clearer), independently of the kernels; see :mod:`ember.testing._samples._nn_common`.
"""

from __future__ import annotations

import math

import numpy as np

from ... import _dtype as D
from .._opinfo import (
    SampleInput,
)
from ._common import maker
from ._nn_common import (
    _FLOATS,
    _FLOATS_AND_COMPLEX,
    _args,
    _errors,
    _f64,
    _nn,
    _t,
    _z,
)


def _batch_norm_samples(opinfo, device, dtype, requires_grad):
    import ember

    make = maker(device, dtype, requires_grad)
    pmake = maker(device, dtype, False, seed=1, low=0.5, high=2)
    fmake = maker(device, ember.float32, False, seed=2, low=0.5, high=2)
    yield SampleInput(make((4, 3)), (None, None), {"training": True}, name="train 2-d")
    yield SampleInput(make((2, 3, 4)), (None, None, pmake((3,)), pmake((3,))), {"training": True, "eps": 1e-3},
                      name="train 3-d affine")
    yield SampleInput(make((2, 3, 2, 2), noncontiguous=True), (None, None), {"training": True}, name="train 4-d")
    yield SampleInput(make((4, 3)), (pmake((3,)), pmake((3,)), pmake((3,)), pmake((3,))), name="eval affine")
    yield SampleInput(make((2, 3, 5)), (pmake((3,)), pmake((3,))), {"momentum": 0.5}, name="eval 3-d")
    yield SampleInput(make((0, 3)), (pmake((3,)), pmake((3,))), name="empty")
    if dtype in (ember.float16, ember.bfloat16):
        yield SampleInput(make((4, 3)), (fmake((3,)), fmake((3,)), fmake((3,)), fmake((3,))),
                          name="float32 parameters")


def _channel_affine(out, weight, bias, shape):
    """``out * weight + bias`` with the per-channel parameters reshaped to ``shape`` (either may be None)."""
    if weight is not None:
        out = out * _f64(weight).reshape(shape)
    if bias is not None:
        out = out + _f64(bias).reshape(shape)
    return out


def _batch_norm_ref(x, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5):
    x = _f64(x)
    axes = (0,) + tuple(range(2, x.ndim))
    shape = (1, -1) + (1,) * (x.ndim - 2)
    if training:
        mean, var = x.mean(axis=axes, keepdims=True), x.var(axis=axes, keepdims=True)
    else:
        mean, var = _f64(running_mean).reshape(shape), _f64(running_var).reshape(shape)
    return _channel_affine((x - mean) / np.sqrt(var + eps), weight, bias, shape)


_nn("batch_norm", _batch_norm_samples, _FLOATS, _batch_norm_ref,
    _errors((_args(_z(1, 3), None, None), {"training": True}, ValueError, "Expected more than 1 value per channel"),
            (_args(_z(2, 3), None, None), {}, RuntimeError, "running_mean must be defined in evaluation mode"),
            (_args(_z(2, 3), _z(2), _z(3)), {}, RuntimeError, "running_mean should contain 3 elements not 2"),
            (_args(_z(2, 3), _z(3), _z(3), _z(2)), {}, RuntimeError, "weight should contain 3 elements not 2"),
            (_args(_z(2, 3), _z(3), None), {"training": True}, ValueError, "must either both be None"),
            (_args(_z(3, 2, dtype=D.float64), _z(2), _z(2), _z(2), _z(2)), {}, RuntimeError, "mixed dtype"),
            (_args(_z(3, 2, dtype=D.int64), _z(2), _z(2)), {}, NotImplementedError, '"batch_norm" not implemented')),
    tolerances={D.float16: (2e-3, 2e-3)})


def _instance_norm_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    pmake = maker(device, dtype, False, seed=1, low=0.5, high=2)
    yield SampleInput(make((2, 3, 4)), name="3-d")
    yield SampleInput(make((2, 3, 2, 3), noncontiguous=True), kwargs={"weight": pmake((3,)), "bias": pmake((3,))},
                      name="4-d affine")
    yield SampleInput(make((1, 2, 5)), (pmake((2,)), pmake((2,))), {"use_input_stats": False}, name="running stats")
    yield SampleInput(make((0, 3, 4)), name="empty")


def _instance_norm_ref(x, running_mean=None, running_var=None, weight=None, bias=None, use_input_stats=True,
                       momentum=0.1, eps=1e-5):
    x = _f64(x)
    shape = (1, -1) + (1,) * (x.ndim - 2)
    if use_input_stats:
        axes = tuple(range(2, x.ndim))
        mean, var = x.mean(axis=axes, keepdims=True), x.var(axis=axes, keepdims=True)
    else:
        mean, var = _f64(running_mean).reshape(shape), _f64(running_var).reshape(shape)
    return _channel_affine((x - mean) / np.sqrt(var + eps), weight, bias, shape)


_nn("instance_norm", _instance_norm_samples, _FLOATS, _instance_norm_ref,
    _errors((_z(2, 3, 1), {}, ValueError, "Expected more than 1 spatial element"),
            (_z(2, 3, 4), {"use_input_stats": False}, RuntimeError, "to be defined when use_input_stats is false"),
            (_args(_z(2, 3, 4), _z(2), _z(3)), {}, RuntimeError, "running_mean should contain 6 elements not 4")),
    tolerances={D.float16: (2e-3, 2e-3)})


def _layer_norm_samples(opinfo, device, dtype, requires_grad):
    import ember

    make = maker(device, dtype, requires_grad)
    pmake = maker(device, dtype, False, seed=1, low=0.5, high=2)
    yield SampleInput(make((2, 3)), ((3,),), name="last dim")
    yield SampleInput(make((2, 3, 4)), ([3, 4], pmake((3, 4)), pmake((3, 4))), name="two dims affine")
    yield SampleInput(make((5,)), ((5,),), {"weight": pmake((5,)), "eps": 1e-3}, name="1-d")
    yield SampleInput(make((0, 3)), ((3,),), name="empty")
    yield SampleInput(make((3, 4), noncontiguous=True), ((4,), None, pmake((4,))), name="noncontiguous, bias")
    yield SampleInput(make((4, 3)).t(), ((4,),), name="transposed view")
    if dtype in (ember.float16, ember.bfloat16):
        fmake = maker(device, ember.float32, False, seed=2)
        yield SampleInput(make((2, 3)), ((3,), fmake((3,)), fmake((3,))), name="float32 parameters")


def _layer_norm_ref(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    x = _f64(x)
    axes = tuple(range(x.ndim - len(normalized_shape), x.ndim))
    out = (x - x.mean(axis=axes, keepdims=True)) / np.sqrt(x.var(axis=axes, keepdims=True) + eps)
    if weight is not None:
        out = out * _f64(weight)
    if bias is not None:
        out = out + _f64(bias)
    return out


_nn("layer_norm", _layer_norm_samples, _FLOATS, _layer_norm_ref,
    _errors((_args(_z(2, 3), (4,)), {}, RuntimeError, r"Given normalized_shape=\[4\], expected input with shape"),
            (_args(_z(2, 3), (3,), _z(4)), {}, RuntimeError, "Expected weight to be of same shape"),
            (_args(_z(2, 3), ()), {}, RuntimeError, "at least 1-dimensional"),
            (_args(_z(2, 3), 3), {}, TypeError, "must be tuple of ints"),
            (_args(_z(2, 3), (3,), _z(3, dtype=D.float64)), {}, RuntimeError, "mixed dtype")),
    tolerances={D.float16: (2e-3, 2e-3)})


def _group_norm_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    pmake = maker(device, dtype, False, seed=1, low=0.5, high=2)
    yield SampleInput(make((2, 4)), (2,), name="2-d")
    yield SampleInput(make((2, 6, 3)), (3, pmake((6,)), pmake((6,))), name="3-d affine")
    yield SampleInput(make((1, 4, 2, 2), noncontiguous=True), (1,), {"eps": 1e-3}, name="one group")
    yield SampleInput(make((2, 4, 3)), (4,), name="a group per channel")
    yield SampleInput(make((0, 4, 3)), (2,), name="empty")


def _group_norm_ref(x, num_groups, weight=None, bias=None, eps=1e-5):
    x = _f64(x)
    if x.size == 0:
        return x
    g = x.reshape(x.shape[0], num_groups, -1)
    out = ((g - g.mean(axis=2, keepdims=True)) / np.sqrt(g.var(axis=2, keepdims=True) + eps)).reshape(x.shape)
    shape = (1, -1) + (1,) * (x.ndim - 2)
    if weight is not None:
        out = out * _f64(weight).reshape(shape)
    if bias is not None:
        out = out + _f64(bias).reshape(shape)
    return out


_nn("group_norm", _group_norm_samples, _FLOATS, _group_norm_ref,
    _errors((_args(_z(2, 4), 3), {}, RuntimeError, "Expected number of channels in input to be divisible"),
            (_args(_z(4), 2), {}, RuntimeError, "Expected at least 2 dimensions"),
            (_args(_z(2, 4), 2, _z(3)), {}, RuntimeError, "Expected weight to be a vector of size"),
            (_args(_z(2, 4), 0), {}, ZeroDivisionError, "division")),
    tolerances={D.float16: (2e-3, 2e-3)})


def _rms_norm_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    pmake = maker(device, dtype, False, seed=1, low=0.5, high=2)
    yield SampleInput(make((2, 3)), ((3,),), name="last dim")
    yield SampleInput(make((2, 3, 4)), ([3, 4], pmake((3, 4))), name="two dims, weight")
    yield SampleInput(make((5,)), ((5,),), {"eps": 1e-2}, name="1-d, eps")
    yield SampleInput(make((0, 3)), ((3,),), name="empty")
    yield SampleInput(make((3, 4), noncontiguous=True), ((4,),), name="noncontiguous")


def _rms_norm_ref(x, normalized_shape, weight=None, eps=None):
    if eps is None:
        eps = float(D.finfo(D.from_numpy_dtype(np.asarray(x).dtype)).eps)
    x = _f64(x)
    axes = tuple(range(x.ndim - len(normalized_shape), x.ndim))
    out = x / np.sqrt(np.mean(x * x, axis=axes, keepdims=True) + eps)
    return out if weight is None else out * _f64(weight)


_nn("rms_norm", _rms_norm_samples, _FLOATS_AND_COMPLEX, _rms_norm_ref,
    _errors((_args(_z(2, 3), (4,)), {}, RuntimeError, r"expected input with shape \[\*4\]"),
            (_args(lambda device: _t(device, [[1, 2]]), (2,)), {}, NotImplementedError, '"rms_norm" not implemented')),
    tolerances={D.float16: (2e-3, 2e-3)})


def _lrn_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((2, 3, 4)), (2,), name="3-d")
    yield SampleInput(make((2, 4, 3), noncontiguous=True), (1,), name="size 1")
    yield SampleInput(make((2, 3, 4)), (7,), {"alpha": 0.01, "beta": 0.5, "k": 2.0}, name="window larger than channels")
    yield SampleInput(make((0, 3, 4)), (2,), name="empty")
    if dtype not in (D.float16, D.bfloat16):  # PyTorch computes 4-D and larger inputs with avg_pool3d, without them
        yield SampleInput(make((1, 5, 2, 3)), (3,), {"alpha": 0.01, "beta": 0.5, "k": 2.0}, name="4-d")
        yield SampleInput(make((1, 3, 2, 2, 2)), (5,), name="5-d")
    if dtype in (D.float32, D.float64):
        # an inf or nan reaches only the windows that hold it, and 1e8 does not cancel its neighbours' squares
        # (a window sum taken as differences of a cumulative sum got both wrong); gradient tests skip non-finite
        # samples, so the 1e8 one is also a gradcheck case
        for special in (math.inf, math.nan, 1e8):
            values = [[[1.0], [2.0], [special], [3.0], [4.0], [5.0], [6.0], [-7.0]]]
            yield SampleInput(_t(device, values, dtype).requires_grad_(requires_grad), (3,), {"alpha": 1.0},
                              name=f"{special:g} in channel 2")


def _lrn_ref(x, size, alpha=1e-4, beta=0.75, k=1.0):
    x = _f64(x)
    c = x.shape[1]
    out = np.empty_like(x)
    with np.errstate(invalid="ignore", over="ignore"):  # inf * 0 and inf / inf in the special samples
        for i in range(c):
            lo, hi = i - size // 2, i + (size - 1) // 2
            window = x[:, max(lo, 0): min(hi, c - 1) + 1] ** 2
            out[:, i] = x[:, i] / (k + alpha * window.sum(axis=1) / size) ** beta
    return out


_nn("local_response_norm", _lrn_samples, _FLOATS, _lrn_ref,
    _errors((_args(_z(2, 3), 2), {}, ValueError, "Expected 3D or higher dimensionality input"),
            (_args(_z(2, 3, 4), 0), {}, RuntimeError, "kernel size should be greater than zero")))


def _normalize_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((2, 3)), name="default")
    yield SampleInput(make((2, 3, 4)), kwargs={"p": 1.0, "dim": -1}, name="p=1")
    yield SampleInput(make((5,)), kwargs={"dim": 0, "p": math.inf}, name="inf norm")
    yield SampleInput(make(()), kwargs={"dim": 0}, name="zero-dim")
    yield SampleInput(make((3, 4), noncontiguous=True), kwargs={"p": 3.0}, name="noncontiguous, p=3")
    yield SampleInput(make((0, 3)), name="empty")
    yield SampleInput(make((2, 3)) * 0, kwargs={"eps": 0.5}, name="zero vectors")


def _normalize_ref(x, p=2.0, dim=1, eps=1e-12):
    x = _f64(x)
    if x.ndim == 0:
        return x / max(abs(x), eps)
    a = np.abs(x)
    if p == math.inf:
        norm = a.max(axis=dim, keepdims=True) if a.size else a.sum(axis=dim, keepdims=True)
    else:
        norm = (a**p).sum(axis=dim, keepdims=True) ** (1 / p)
    return x / np.maximum(norm, eps)


_nn("normalize", _normalize_samples, _FLOATS_AND_COMPLEX, _normalize_ref,
    _errors((_z(2, 3), {"dim": 2}, IndexError, "Dimension out of range"),
            (lambda device: (_t(device, [[1, 2]]),), {}, RuntimeError, "Expected a floating point or complex")))
