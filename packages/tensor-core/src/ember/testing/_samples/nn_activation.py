"""OpInfos of the activations, the softmax and dropout families and the linear maps
(``ember._ops.nn_activation``, ``nn_softmax``, ``nn_dropout``, ``nn_linear``).

References are written directly from the definitions (in float64, loops where that
is clearer), independently of the kernels; see :mod:`ember.testing._samples._nn_common`.
"""

from __future__ import annotations

import math

import numpy as np

from ... import _dtype as D
from .._opinfo import (
    ALL_TYPES_AND_COMPLEX,
    SampleInput,
)
from ._common import maker
from ._nn_common import (
    _FLOATS,
    _FLOATS_AND_COMPLEX,
    _NO_BOOL,
    _REAL_NO_BOOL,
    _args,
    _errors,
    _f64,
    _nn,
    _sigmoid64,
    _t,
    _z,
)


def _unary(*kwarg_sets, low=None, high=None):
    """Samples of an elementwise activation: the usual shapes, then each kwargs set on a 2-D input."""

    def gen(opinfo, device, dtype, requires_grad):
        make = maker(device, dtype, requires_grad, low=low, high=high)
        yield SampleInput(make(()), name="zero-dim")
        yield SampleInput(make((5,)), name="1-d")
        yield SampleInput(make((2, 3, 4)), name="3-d")
        yield SampleInput(make((0, 2)), name="empty")
        yield SampleInput(make((3, 4), noncontiguous=True), name="noncontiguous")
        yield SampleInput(make((4, 3)).t(), name="transposed view")
        for kwargs in kwarg_sets:
            yield SampleInput(make((2, 5)), kwargs=dict(kwargs), name=f"kwargs {kwargs}")

    return gen


def _bad_input(op_args=()):
    """An error input passing a non-tensor as ``input``."""
    return (lambda device: ("text",) + tuple(op_args), {}, TypeError, "must be Tensor")


def _ints_rejected(kernel):
    return (lambda device: (_t(device, [1, 2]),), {}, NotImplementedError, f'"{kernel}" not implemented for \'Long\'')


def _relu_ref(x, inplace=False):
    return np.maximum(_f64(x), 0)


def _clamp_errors(name):
    return _errors(
        _bad_input(),
        (lambda device: (_t(device, [True, False]),), {}, RuntimeError, "inputs not supported for"),
        (lambda device: (_t(device, [1j]),), {}, NotImplementedError, "clamp is not supported for complex"),
    )


_nn("relu", _unary(), _REAL_NO_BOOL, _relu_ref, _clamp_errors("relu"))
_nn("relu6", _unary(), _REAL_NO_BOOL, lambda x, inplace=False: np.clip(_f64(x), 0, 6), _clamp_errors("relu6"))


def _hardtanh_ref(x, min_val=-1.0, max_val=1.0, inplace=False):
    if np.asarray(x).dtype.kind in "iu":
        min_val, max_val = int(min_val), int(max_val)
    return np.clip(_f64(x), min_val, max_val)


_nn("hardtanh", _unary({"min_val": -2.5, "max_val": 4.0}, {"min_val": 0.0, "max_val": 0.0}),
    tuple(d for d in _REAL_NO_BOOL if d is not D.uint8), _hardtanh_ref,
    _errors(
        (lambda device: (_t(device, [1.0]), 2.0, 1.0), {}, ValueError, "min_val cannot be greater than max_val"),
        (lambda device: (_t(device, [1], D.uint8),), {}, RuntimeError, "unsigned type with negative limits"),
        (lambda device: (_t(device, [True]),), {}, RuntimeError, "Bool inputs not supported for hardtanh"),
    ))


def _leaky_ref(x, negative_slope=0.01, inplace=False):
    x = _f64(x)
    return np.where(x > 0, x, x * negative_slope)


_nn("leaky_relu", _unary({"negative_slope": 0.2}, {"negative_slope": -1.5}), _FLOATS, _leaky_ref,
    _errors(_ints_rejected("leaky_relu_cpu"), (lambda device: (_t(device, [1.0]), "x"), {}, TypeError, "Number")))


def _elu_ref(x, alpha=1.0, inplace=False):
    x = _f64(x)
    return np.where(x > 0, x, alpha * (np.exp(x) - 1))


_nn("elu", _unary({"alpha": 0.5}, {"alpha": -2.0}), _FLOATS, _elu_ref, _errors(_ints_rejected("elu_cpu")))


def _selu_ref(x, inplace=False):
    alpha, scale = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946
    return scale * _elu_ref(x, alpha)


_nn("selu", _unary(), _FLOATS, _selu_ref, _errors(_ints_rejected("elu_cpu")))


def _celu_ref(x, alpha=1.0, inplace=False):
    x = _f64(x)
    return np.maximum(x, 0) + np.minimum(0, alpha * (np.exp(x / alpha) - 1))


_nn("celu", _unary({"alpha": 2.0}, {"alpha": 0.5}), _FLOATS, _celu_ref,
    _errors(_ints_rejected("elu_cpu"),
            (lambda device: (_t(device, [1.0]),), {"alpha": 0.0}, RuntimeError, "alpha cannot be 0 for CELU")))


def _gelu_ref(x, approximate="none"):
    from scipy.special import ndtr

    x = _f64(x)
    if approximate == "tanh":
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    return x * ndtr(x)


_nn("gelu", _unary({"approximate": "tanh"}), _FLOATS, _gelu_ref,
    _errors(_ints_rejected("GeluKernelImpl"),
            (lambda device: (_t(device, [1.0]),), {"approximate": "fast"}, RuntimeError, "either none or tanh")))


def _silu_ref(x, inplace=False):
    x = _f64(x)
    return x * _sigmoid64(x)


_nn("silu", _unary(), _FLOATS_AND_COMPLEX, _silu_ref, _errors(_ints_rejected("silu_cpu")))


def _softplus_ref(x, beta=1, threshold=20):
    x = _f64(x)
    return np.where(x * beta > threshold, x, np.log1p(np.exp(beta * x)) / beta)


def _mish_ref(x, inplace=False):
    x = _f64(x)
    return x * np.tanh(np.log1p(np.exp(x)))


_nn("mish", _unary(), _FLOATS, _mish_ref, _errors(_ints_rejected("mish_cpu")))
_nn("softplus", _unary({"beta": 2.0}, {"beta": 0.5, "threshold": 2.0}), _FLOATS, _softplus_ref,
    _errors(_ints_rejected("softplus_cpu"),
            (lambda device: (_t(device, [1.0]), 1, "x"), {}, TypeError, "'threshold'")),
    tolerances={D.float16: (2e-3, 2e-3)})


def _logsigmoid_ref(x):
    return np.log(_sigmoid64(_f64(x)))


_nn("logsigmoid", _unary(), _FLOATS, _logsigmoid_ref, _errors(_ints_rejected("log_sigmoid_cpu")))


def _hardsigmoid_ref(x, inplace=False):
    return np.clip(_f64(x) / 6 + 0.5, 0, 1)


def _hardswish_ref(x, inplace=False):
    return _f64(x) * _hardsigmoid_ref(x)


_nn("hardsigmoid", _unary(low=-5, high=5), _FLOATS, _hardsigmoid_ref, _errors(_ints_rejected("hardsigmoid_cpu")))
_nn("hardswish", _unary(low=-5, high=5), _FLOATS, _hardswish_ref, _errors(_ints_rejected("hardswish_cpu")))


def _softsign_ref(x):
    x = _f64(x)
    return x / (1 + np.abs(x))


_nn("softsign", _unary(), _NO_BOOL, _softsign_ref,
    _errors((lambda device: (_t(device, [True]),), {}, NotImplementedError, '"abs_cpu" not implemented')))


def _softshrink_ref(x, lambd=0.5):
    x = _f64(x)
    return np.where(x > lambd, x - lambd, np.where(x < -lambd, x + lambd, 0))


_nn("softshrink", _unary({"lambd": 2.0}, {"lambd": 0.0}), _FLOATS, _softshrink_ref,
    _errors(_ints_rejected("softshrink_check"),
            (lambda device: (_t(device, [1.0]), -1.0), {}, RuntimeError, "lambda must be in range")))


def _hardshrink_ref(x, lambd=0.5):
    x = _f64(x)
    return np.where(np.abs(x) <= lambd, 0, x)


_nn("hardshrink", _unary({"lambd": 2.0}, {"lambd": -1.0}), _FLOATS, _hardshrink_ref,
    _errors(_ints_rejected("hardshrink_cpu")))


def _tanhshrink_ref(x):
    x = _f64(x)
    return x - np.tanh(x)


_nn("tanhshrink", _unary(), _NO_BOOL, _tanhshrink_ref,
    _errors((lambda device: (_t(device, [True]),), {}, RuntimeError, "Subtraction, the `-` operator")))


def _threshold_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make(()), (1.0, 7.0), name="zero-dim")
    yield SampleInput(make((2, 3, 4)), (0.5, 2.0), name="3-d")
    yield SampleInput(make((0, 2)), (1.0, 2.0), name="empty")
    yield SampleInput(make((3, 4), noncontiguous=True), (1.5, 9.0), name="noncontiguous")
    if dtype.is_signed:
        yield SampleInput(make((3, 4)), (-0.5, -2.0), name="negative arguments")
    yield SampleInput(make((4, 3)).t(), (3, 1), name="transposed view, int arguments")
    yield SampleInput(make((5,)), (2.5, 7.5), name="fractional arguments")


def _threshold_ref(x, threshold, value, inplace=False):
    kind = np.asarray(x).dtype
    if kind.kind in "iu":
        threshold, value = int(threshold), int(value)
        value = np.array(value).astype(kind).astype(np.float64)
    else:
        threshold = float(np.array(threshold).astype(kind).astype(np.float64))
        value = float(np.array(value).astype(kind).astype(np.float64))
    x = _f64(x)
    return np.where(x > threshold, x, value)


_nn("threshold", _threshold_samples, _REAL_NO_BOOL, _threshold_ref,
    _errors((lambda device: (_t(device, [1, 2], D.uint8), 0.5, -2.0), {}, RuntimeError,
             "value cannot be converted to type uint8_t without overflow"),
            (lambda device: (_t(device, [1, 2], D.int8), 0.5, 300), {}, RuntimeError, "without overflow"),(lambda device: (_t(device, [True]), 0.5, 1.0), {}, NotImplementedError, '"threshold_cpu"'),
            (lambda device: (_t(device, [1j]), 0.5, 1.0), {}, NotImplementedError, '"threshold_cpu"')))


def _glu_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((4,)), name="1-d")
    yield SampleInput(make((2, 6)), (0,), name="dim 0")
    yield SampleInput(make((3, 4, 2)), (1,), name="dim 1")
    yield SampleInput(make((0, 4)), name="empty")
    yield SampleInput(make((3, 4), noncontiguous=True), (-1,), name="noncontiguous")
    yield SampleInput(make((6, 3)).t(), name="transposed view")


def _glu_ref(x, dim=-1):
    a, b = np.split(_f64(x), 2, axis=dim)
    return a * _sigmoid64(b)


_nn("glu", _glu_samples, _FLOATS, _glu_ref,
    _errors((_z(), {}, RuntimeError, "glu does not support scalars"),
            (_z(2, 3), {"dim": 1}, RuntimeError, "Halving dimension must be even, but dimension 1 is size 3"),
            (_z(2, 4), {"dim": 2}, IndexError, "Dimension out of range"),
            (lambda device: (_t(device, [1, 2]),), {}, NotImplementedError, '"glu_cpu"')))


def _prelu_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make(()), (make((1,)),), name="zero-dim")
    yield SampleInput(make((5,)), (make(()),), name="1-d, 0-dim weight")
    yield SampleInput(make((2, 3)), (make((3,)),), name="per channel")
    yield SampleInput(make((2, 3, 4)), (make((3,)),), name="3-d per channel")
    yield SampleInput(make((2, 3, 4)), (make((1,)),), name="shared weight")
    yield SampleInput(make((0, 3)), (make((3,)),), name="empty")
    yield SampleInput(make((3, 4), noncontiguous=True), (make((4,)),), name="noncontiguous")


def _prelu_ref(x, w):
    x, w = _f64(x), _f64(w)
    if x.ndim >= 2 and w.size > 1:
        w = w.reshape((-1,) + (1,) * (x.ndim - 2))
    else:
        w = w.reshape(())
    return np.where(x > 0, x, w * x)


_nn("prelu", _prelu_samples, _FLOATS, _prelu_ref,
    _errors((_args(_z(2, 3), _z(2)), {}, RuntimeError, "Found parameter numbers = 2 and channel size = 3"),
            (_args(_z(2, 3), _z(1, 3)), {}, RuntimeError, "scalar or 1D tensor"),
            (_args(_z(2, 3), _z(3, dtype=D.float64)), {}, RuntimeError, "Type promoting not supported")))


def _rrelu_ref(x, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    return _leaky_ref(x, (lower + upper) / 2)


_nn("rrelu", _unary({"lower": 0.1, "upper": 0.5}, {"training": False}), _FLOATS, _rrelu_ref,
    _errors((lambda device: (_t(device, [1.0]), 0.5, 0.2), {}, RuntimeError, "Lower bound should be less than"),
            _ints_rejected("leaky_relu_cpu")))


def _softmax_samples(opinfo, device, dtype, requires_grad):
    import ember

    make = maker(device, dtype, requires_grad)
    yield SampleInput(make(()), (0,), name="zero-dim")
    yield SampleInput(make((5,)), (0,), name="1-d")
    yield SampleInput(make((2, 3, 4)), (1,), name="middle dim")
    yield SampleInput(make((2, 3, 4)), (-1,), name="last dim")
    yield SampleInput(make((0, 3)), (1,), name="empty")
    yield SampleInput(make((3, 4), noncontiguous=True), (0,), name="noncontiguous")
    yield SampleInput(make((4, 3)).t(), (1,), name="transposed view")
    yield SampleInput(make((2, 5)), (1,), {"dtype": ember.float64}, name="dtype")


def _softmax_ref(x, dim=None, _stacklevel=3, dtype=None, *, negate=False, log=False):
    if dtype is not None:
        x = np.asarray(-x if negate else x).astype(dtype.numpy_dtype)
        negate = False
    x = _f64(x)
    if negate:
        x = -x
    if x.ndim == 0:
        return np.float64(0.0) if log else np.float64(1.0)
    shifted = x - np.max(x, axis=dim, keepdims=True) if x.size else x
    total = np.exp(shifted).sum(axis=dim, keepdims=True)
    return shifted - np.log(total) if log else np.exp(shifted) / total


def _softmax_errors(name, kernel):
    return _errors(
        (lambda device: (_t(device, [1, 2]), 0), {}, NotImplementedError, kernel),
        (_args(_z(3), 1), {}, IndexError, "Dimension out of range"),
    )


_nn("softmax", _softmax_samples, _FLOATS, _softmax_ref, _softmax_errors("softmax", "softmax_lastdim_kernel_impl"))
_nn("log_softmax", _softmax_samples, _FLOATS, lambda x, *a, **k: _softmax_ref(x, *a, **k, log=True),
    _softmax_errors("log_softmax", "log_softmax_lastdim_kernel_impl"))
_nn("softmin", _softmax_samples, _FLOATS, lambda x, *a, **k: _softmax_ref(x, *a, **k, negate=True),
    _errors((lambda device: (_t(device, [True]), 0), {}, RuntimeError, "Negation, the `-` operator")))


def _dropout_samples(shapes):
    def gen(opinfo, device, dtype, requires_grad):
        make = maker(device, dtype, requires_grad)
        for shape in shapes:
            yield SampleInput(make(shape), kwargs={"p": 0.5, "training": False}, name=f"eval {shape}")
        yield SampleInput(make(shapes[-1], noncontiguous=True), kwargs={"p": 0.3, "training": False},
                          name="noncontiguous")
        if dtype.is_floating_point:
            yield SampleInput(make(shapes[-1]), kwargs={"p": 0.0, "training": True}, name="p=0")
            yield SampleInput(make(shapes[-1]), kwargs={"p": 1.0, "training": True}, name="p=1")

    return gen


def _dropout_ref(x, p=0.5, training=True, inplace=False):
    x = np.asarray(x)
    return x * 0 if training and p == 1 else x


_DROPOUT_P_ERROR = (lambda device: (_t(device, [1.0]), 1.5), {}, ValueError, "dropout probability has to be between")

_nn("dropout", _dropout_samples([(), (5,), (0, 3), (2, 3, 4)]), ALL_TYPES_AND_COMPLEX, _dropout_ref,
    _errors(_DROPOUT_P_ERROR))
_nn("dropout1d", _dropout_samples([(3, 4), (2, 3, 4)]), ALL_TYPES_AND_COMPLEX, _dropout_ref,
    _errors(_DROPOUT_P_ERROR, (_z(2, 3, 4, 5), {}, RuntimeError, "Expected 2D or 3D input")))
_nn("dropout2d", _dropout_samples([(2, 3, 4, 5)]), ALL_TYPES_AND_COMPLEX, _dropout_ref,
    _errors(_DROPOUT_P_ERROR, (_z(3), {"training": True}, RuntimeError, "Feature dropout requires at least 2")))
_nn("dropout3d", _dropout_samples([(3, 2, 2, 2), (2, 3, 2, 2, 2)]), ALL_TYPES_AND_COMPLEX, _dropout_ref,
    _errors(_DROPOUT_P_ERROR))
_nn("alpha_dropout", _dropout_samples([(), (5,), (2, 3, 4)]), ALL_TYPES_AND_COMPLEX, _dropout_ref,
    _errors(_DROPOUT_P_ERROR,
            (lambda device: (_t(device, [1, 2]), 0.5, True), {}, RuntimeError, "can't be cast to the desired")))
_nn("feature_alpha_dropout", _dropout_samples([(5,), (2, 3, 4)]), ALL_TYPES_AND_COMPLEX, _dropout_ref,
    _errors(_DROPOUT_P_ERROR, (_z(3), {"p": 0.5, "training": True}, RuntimeError, "Feature dropout requires")))


def _linear_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad, low=-3, high=3)
    yield SampleInput(make((3, 4)), (make((2, 4)),), name="no bias")
    yield SampleInput(make((3, 4)), (make((2, 4)), make((2,))), name="bias")
    yield SampleInput(make((2, 3, 4)), (make((5, 4)), make((5,))), name="3-d input")
    yield SampleInput(make((4,)), (make((2, 4)), make((2,))), name="1-d input")
    yield SampleInput(make((3, 4)), (make((4,)),), name="1-d weight")
    yield SampleInput(make((4,)), (make((4,)), make(())), name="1-d both")
    yield SampleInput(make((0, 4)), (make((2, 4)), make((2,))), name="empty batch")
    yield SampleInput(make((3, 0)), (make((2, 0)), make((2,))), name="no features")
    yield SampleInput(make((3, 4), noncontiguous=True), (make((2, 4), noncontiguous=True), make((3, 2))),
                      name="noncontiguous, full bias")
    yield SampleInput(make((4, 3)).t(), (make((4, 2)).t(), make((1, 1))), name="transposed views")


def _linear_ref(x, w, b=None):
    x, w = _f64(x), _f64(w)
    out = x @ w.T if w.ndim == 2 else x @ w
    return out if b is None else out + _f64(b)


_nn("linear", _linear_samples, _NO_BOOL, _linear_ref,
    _errors((_args(_z(3, 4), _z(2, 5)), {}, RuntimeError, r"mat1 and mat2 shapes cannot be multiplied \(3x4 and 5x2\)"),
            (_args(_z(3, 4), _z(2, 4, dtype=D.float64)), {}, RuntimeError, "expected m1 and m2 to have the same dtype"),
            (_args(_z(3, 4), _z(2, 4), _z(3)), {}, RuntimeError, "The expanded size of the tensor"),
            (_args(_z(), _z(2, 4)), {}, RuntimeError, "at least 1D")),
    tolerances={D.bfloat16: (2e-2, 2e-2), D.float16: (2e-3, 2e-3)})


def _bilinear_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad, low=-2, high=2)
    yield SampleInput(make((3, 4)), (make((3, 5)), make((2, 4, 5))), name="no bias")
    yield SampleInput(make((3, 4)), (make((3, 5)), make((2, 4, 5)), make((2,))), name="bias")
    yield SampleInput(make((4,)), (make((5,)), make((2, 4, 5)), make((2,))), name="1-d")
    yield SampleInput(make((2, 3, 4)), (make((2, 3, 2)), make((3, 4, 2)), make((3,))), name="3-d")
    yield SampleInput(make((0, 4)), (make((0, 5)), make((2, 4, 5))), name="empty")
    yield SampleInput(make((3, 4), noncontiguous=True), (make((3, 5)), make((2, 4, 5))), name="noncontiguous")


def _bilinear_ref(x1, x2, w, b=None):
    out = np.einsum("...i,oij,...j->...o", _f64(x1), _f64(w), _f64(x2))
    return out if b is None else out + _f64(b)


_nn("bilinear", _bilinear_samples, _NO_BOOL, _bilinear_ref,
    _errors((_args(_z(3, 4), _z(2, 5), _z(2, 4, 5)), {}, RuntimeError, "input batch dimensions do not match"),
            (_args(_z(3, 4), _z(3, 5), _z(2, 4, 6)), {}, RuntimeError, "input2 size does not match weight size"),
            (_args(_z(3, 4), _z(3, 5, dtype=D.float64), _z(2, 4, 5)), {}, RuntimeError, "must have the same dtype"),
            (_args(_z(3, 4), _z(3, 5), _z(2, 4, 5), _z(3)), {}, RuntimeError, "bias size does not match")),
    tolerances={D.bfloat16: (3e-2, 5e-2), D.float16: (3e-3, 3e-3)})
