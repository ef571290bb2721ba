"""OpInfos of the nn.functional op modules (ember._ops.nn_activation, nn_norm, nn_embedding, nn_attention, nn_loss).

References are written directly from the definitions (in float64, loops where that
is clearer), independently of the kernels. Every OpInfo names its PyTorch
counterpart as ``torch.nn.functional.<name>``, because several ``torch.<name>``
functions (``torch.dropout``, ``torch.batch_norm``, ``torch.embedding``, ...) have
other signatures. Ops that draw random numbers are sampled only in their
deterministic settings (``training=False``, ``p=0``).
"""

from __future__ import annotations

import math

import numpy as np

from ... import _dtype as D
from .._opinfo import (
    ALL_TYPES,
    ALL_TYPES_AND_COMPLEX,
    COMPLEX_TYPES,
    FLOATING_TYPES,
    INTEGRAL_TYPES,
    ErrorInput,
    OpInfo,
    SampleInput,
    register_opinfo,
)
from ._common import maker

_FLOATS = FLOATING_TYPES
_FLOATS_AND_COMPLEX = FLOATING_TYPES + COMPLEX_TYPES
_REAL_NO_BOOL = INTEGRAL_TYPES + FLOATING_TYPES
_NO_BOOL = INTEGRAL_TYPES + FLOATING_TYPES + COMPLEX_TYPES
_F32_F64 = (D.float32, D.float64)


def _nn(name, sample_inputs, dtypes, ref=None, error_inputs=None, **kwargs):
    """Register the OpInfo of an nn op, compared with ``torch.nn.functional.<name>``."""
    extra = {"error_inputs": error_inputs} if error_inputs is not None else {}
    register_opinfo(OpInfo(name, sample_inputs, dtypes=dtypes, ref=ref, torch_name=f"nn.functional.{name}",
                           **extra, **kwargs))


def _f64(x):
    """A numpy array (or number) in float64, or complex128 for complex values."""
    x = np.asarray(x)
    if x.dtype.kind == "c":
        return x.astype(np.complex128)
    return x.astype(np.float64)


def _t(device, values, dtype=None):
    import ember

    return ember.tensor(values, dtype=dtype, device=device)


def _errors(*cases):
    """Error inputs from ``(make_args, kwargs, error, regex)`` tuples.

    ``make_args(device)`` gives the positional arguments; callable values of ``kwargs`` are called
    with the device too.
    """

    def gen(opinfo, device):
        for make_args, kwargs, error, regex in cases:
            args = make_args(device)
            if not isinstance(args, tuple):
                args = (args,)
            kwargs = {k: v(device) if callable(v) else v for k, v in kwargs.items()}
            yield ErrorInput(SampleInput(args[0], tuple(args[1:]), kwargs), error, regex)

    return gen


def _z(*shape, dtype=None):
    """A factory of zero tensors for error inputs."""

    def make(device):
        import ember

        return ember.zeros(shape, dtype=dtype or ember.float32, device=device)

    return make


def _args(*factories):
    return lambda device: tuple(f(device) if callable(f) else f for f in factories)


def _reduce(loss, reduction):
    loss = np.asarray(loss)
    if reduction == "mean":
        return loss.mean() if loss.size else np.float64("nan")
    if reduction == "sum":
        return loss.sum()
    return loss


# =====================================================================================================
# Activations
# =====================================================================================================


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


def _sigmoid64(x):
    return 1 / (1 + np.exp(-x))


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


# =====================================================================================================
# Softmax family
# =====================================================================================================


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


# =====================================================================================================
# Dropout family: the deterministic settings only
# =====================================================================================================


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


# =====================================================================================================
# Linear maps
# =====================================================================================================


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


# =====================================================================================================
# Normalization
# =====================================================================================================


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


def _batch_norm_ref(x, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5):
    x = _f64(x)
    axes = (0,) + tuple(range(2, x.ndim))
    shape = (1, -1) + (1,) * (x.ndim - 2)
    if training:
        mean, var = x.mean(axis=axes, keepdims=True), x.var(axis=axes, keepdims=True)
    else:
        mean, var = _f64(running_mean).reshape(shape), _f64(running_var).reshape(shape)
    out = (x - mean) / np.sqrt(var + eps)
    if weight is not None:
        out = out * _f64(weight).reshape(shape)
    if bias is not None:
        out = out + _f64(bias).reshape(shape)
    return out


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
    out = (x - mean) / np.sqrt(var + eps)
    if weight is not None:
        out = out * _f64(weight).reshape(shape)
    if bias is not None:
        out = out + _f64(bias).reshape(shape)
    return out


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


# =====================================================================================================
# Embeddings, one-hot
# =====================================================================================================


def _embedding_samples(opinfo, device, dtype, requires_grad):
    import ember

    make = maker(device, dtype, requires_grad)
    weight = make((5, 3))
    yield SampleInput(_t(device, [0, 4, 2, 2]), (weight,), name="1-d indices")
    yield SampleInput(_t(device, [[0, 1], [3, 4]]), (weight,), name="2-d indices")
    yield SampleInput(_t(device, 3), (weight,), name="0-dim index")
    yield SampleInput(_t(device, [1, 0], ember.int32), (weight,), {"padding_idx": -1}, name="int32, padding_idx")
    yield SampleInput(_t(device, [], ember.int64), (weight,), name="empty")
    yield SampleInput(_t(device, [[0, 1, 2, 3]])[:, ::2], (make((5, 6), noncontiguous=True),), name="noncontiguous")


def _embedding_ref(indices, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
                   sparse=False):
    return np.asarray(weight)[np.asarray(indices)]


_nn("embedding", _embedding_samples, ALL_TYPES_AND_COMPLEX, _embedding_ref,
    _errors((_args(lambda device: _t(device, [0, 5]), _z(4, 3)), {}, IndexError, "index out of range in self"),
            (_args(lambda device: _t(device, [0.0, 1.0]), _z(4, 3)), {}, RuntimeError, "'indices' to have one of"),
            (_args(lambda device: _t(device, [0, 1]), _z(4)), {}, RuntimeError, "'weight' must be 2-D"),
            (_args(lambda device: _t(device, [0, 1]), _z(4, 3)), {"padding_idx": 4}, AssertionError,
             "Padding_idx must be within num_embeddings")))


def _embedding_bag_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    weight = make((6, 3))
    yield SampleInput(_t(device, [0, 1, 2, 3, 5]), (weight, _t(device, [0, 2])), name="mean")
    yield SampleInput(_t(device, [0, 1, 2, 3, 5]), (weight, _t(device, [0, 2, 2])), {"mode": "sum"},
                      name="sum, empty bag")
    yield SampleInput(_t(device, [4, 1, 2, 3, 5]), (weight, _t(device, [0, 1, 3])), {"mode": "max"}, name="max")
    yield SampleInput(_t(device, [[0, 1], [2, 3], [5, 5]]), (weight,), {"mode": "max"}, name="2-d, max")
    yield SampleInput(_t(device, [[0, 1, 4], [2, 3, 0]]), (weight,), {"mode": "mean", "padding_idx": 0},
                      name="2-d, padding_idx")
    yield SampleInput(_t(device, [1, 1, 2, 3]), (weight, _t(device, [0, 2, 4])),
                      {"mode": "sum", "include_last_offset": True, "per_sample_weights": make((4,))},
                      name="per_sample_weights, include_last_offset")
    yield SampleInput(_t(device, [1, 1, 2]), (weight, _t(device, [0, 2])), {"mode": "max", "padding_idx": 1},
                      name="max, a bag of padding")
    yield SampleInput(_t(device, [1, 1, 2]), (make((6, 4), noncontiguous=True), _t(device, [0, 2], D.int32)),
                      {"mode": "sum"}, name="noncontiguous weight, int32 offsets")


def _embedding_bag_ref(indices, weight, offsets=None, max_norm=None, norm_type=2, scale_grad_by_freq=False,
                       mode="mean", sparse=False, per_sample_weights=None, include_last_offset=False,
                       padding_idx=None):
    indices, weight = np.asarray(indices), _f64(weight)
    if indices.ndim == 2:
        bags = [list(row) for row in indices]
        psw = None if per_sample_weights is None else [list(row) for row in _f64(per_sample_weights)]
    else:
        offs = list(np.asarray(offsets)) + ([] if include_last_offset else [len(indices)])
        bags = [list(indices[offs[i]:offs[i + 1]]) for i in range(len(offs) - 1)]
        psw = None if per_sample_weights is None else [
            list(_f64(per_sample_weights)[offs[i]:offs[i + 1]]) for i in range(len(offs) - 1)]
    if padding_idx is not None and padding_idx < 0:
        padding_idx += weight.shape[0]
    out = np.zeros((len(bags), weight.shape[1]))
    for b, bag in enumerate(bags):
        rows = [weight[i] * (psw[b][k] if psw else 1) for k, i in enumerate(bag) if i != padding_idx]
        if rows:
            out[b] = {"sum": np.sum, "mean": np.mean, "max": np.max}[mode](rows, axis=0)
    return out


_nn("embedding_bag", _embedding_bag_samples, _FLOATS, _embedding_bag_ref,
    _errors((_args(lambda device: _t(device, [0, 1, 2]), _z(4, 3)), {}, ValueError, "offsets has to be a 1D Tensor"),
            (_args(lambda device: _t(device, [0, 1, 2]), _z(4, 3), lambda device: _t(device, [0, 2])),
             {"mode": "foo"}, ValueError, "mode has to be one of sum, mean or max"),
            (_args(lambda device: _t(device, [0, 1, 2]), _z(4, 3), lambda device: _t(device, [0, 2])),
             {"per_sample_weights": _z(3)}, NotImplementedError,
             "per_sample_weights is only supported for mode='sum'"),
            (_args(lambda device: _t(device, [[0, 1]]), _z(4, 3), lambda device: _t(device, [0])), {}, ValueError,
             "if input is 2D, then offsets has to be None"),
            (_args(lambda device: _t(device, [0, 1, 2]), _z(4, 3), lambda device: _t(device, [1, 2])), {},
             RuntimeError, "offsets\\[0\\] has to be 0"),
            (_args(lambda device: _t(device, [0, 1]), lambda device: _t(device, [[1, 2]])), {"offsets": None},
             ValueError, "offsets has to be a 1D Tensor but got None")),
    tolerances={D.float16: (2e-3, 2e-3)})


def _one_hot_samples(opinfo, device, dtype, requires_grad):
    yield SampleInput(_t(device, [0, 2, 1]), name="inferred classes", data_dependent=True)
    yield SampleInput(_t(device, [[0, 2], [3, 1]]), (5,), name="2-d")
    yield SampleInput(_t(device, 2), (3,), name="zero-dim")
    yield SampleInput(_t(device, [], D.int64), (4,), name="empty")
    yield SampleInput(_t(device, [0, 1, 2, 3])[::2], (3,), name="noncontiguous")


def _one_hot_ref(x, num_classes=-1):
    x = np.asarray(x)
    if num_classes == -1:
        num_classes = int(x.max()) + 1
    return (x[..., None] == np.arange(num_classes)).astype(np.int64)


_nn("one_hot", _one_hot_samples, (D.int64,), _one_hot_ref,
    _errors((lambda device: (_t(device, [0, 2]), 2), {}, RuntimeError, "Class values must be smaller than"),
            (lambda device: (_t(device, [0, -1]), 3), {}, RuntimeError, "Class values must be non-negative"),
            (lambda device: (_t(device, [], D.int64),), {}, RuntimeError, "Can not infer total number of classes"),
            (lambda device: (_t(device, [0, 1], D.int32), 3), {}, RuntimeError, "index tensor of type LongTensor")),
    supports_autograd=False)


# =====================================================================================================
# Attention
# =====================================================================================================


def _sdpa_samples(opinfo, device, dtype, requires_grad):
    import ember

    make = maker(device, dtype, requires_grad, low=-2, high=2)
    bools = maker(device, ember.bool, False, seed=3)
    yield SampleInput(make((2, 3, 4)), (make((2, 5, 4)), make((2, 5, 6))), name="3-d")
    yield SampleInput(make((3, 4)), (make((5, 4)), make((5, 2))), name="2-d")
    yield SampleInput(make((2, 2, 3, 4)), (make((2, 5, 4)), make((2, 5, 6))), name="broadcast batch")
    yield SampleInput(make((2, 4, 4)), (make((2, 4, 4)), make((2, 4, 3))), {"is_causal": True}, name="causal")
    yield SampleInput(make((1, 5, 4)), (make((1, 3, 4)), make((1, 3, 2))), {"is_causal": True},
                      name="causal, more queries than keys")
    yield SampleInput(make((2, 3, 4)), (make((2, 5, 4)), make((2, 5, 6))), {"attn_mask": bools((3, 5))},
                      name="bool mask")
    yield SampleInput(make((2, 3, 4)), (make((2, 5, 4)), make((2, 5, 6))), {"attn_mask": make((2, 3, 5))},
                      name="float mask")
    yield SampleInput(make((2, 3, 4)), (make((2, 5, 4)), make((2, 5, 6))),
                      {"attn_mask": ember.zeros(3, 5, dtype=ember.bool, device=device)}, name="everything masked")
    yield SampleInput(make((2, 3, 4)), (make((2, 5, 4)), make((2, 5, 6))), {"scale": 0.3}, name="scale")
    yield SampleInput(make((1, 4, 3, 4)), (make((1, 2, 5, 4)), make((1, 2, 5, 6))), {"enable_gqa": True},
                      name="grouped-query")
    yield SampleInput(make((2, 0, 4)), (make((2, 5, 4)), make((2, 5, 6))), name="no queries")
    yield SampleInput(make((2, 3, 4), noncontiguous=True), (make((2, 5, 4)).transpose(0, 1).transpose(0, 1),
                                                             make((2, 5, 6), noncontiguous=True)),
                      name="noncontiguous")


def _sdpa_ref(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    q, k, v = _f64(q), _f64(k), _f64(v)
    if enable_gqa and q.ndim >= 3:
        k = np.repeat(k, q.shape[-3] // k.shape[-3], axis=-3)
        v = np.repeat(v, q.shape[-3] // v.shape[-3], axis=-3)
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = q @ np.swapaxes(k, -1, -2) * scale
    allowed = np.ones(scores.shape[-2:], bool)
    if is_causal:
        allowed = np.tril(allowed)
    if attn_mask is not None and np.asarray(attn_mask).dtype == np.bool_:
        allowed = allowed & np.asarray(attn_mask)
    elif attn_mask is not None:
        scores = scores + _f64(attn_mask)
    scores = np.where(allowed, scores, -np.inf)
    top = scores.max(axis=-1, keepdims=True, initial=-np.inf)
    weights = np.exp(scores - np.where(np.isfinite(top), top, 0))
    total = weights.sum(axis=-1, keepdims=True)
    weights = np.where(total > 0, weights / np.where(total > 0, total, 1), 0)
    return weights @ v


_nn("scaled_dot_product_attention", _sdpa_samples, _FLOATS, _sdpa_ref,
    _errors((_args(_z(4), _z(4), _z(6)), {}, RuntimeError, "at least 2 dimensional"),
            (_args(_z(2, 3, 4), _z(2, 5, 3), _z(2, 5, 6)), {}, RuntimeError, "Expected size for first two dimensions"),
            (_args(_z(2, 3, 4), _z(2, 5, 4), _z(2, 5, 6)), {"attn_mask": lambda device: _z(3, 5)(device) > 0, "is_causal": True},
             RuntimeError, "Explicit attn_mask should not be set when is_causal=True"),
            (_args(_z(2, 3, 4), _z(2, 5, 4, dtype=D.float64), _z(2, 5, 6)), {}, RuntimeError, "the same dtype"),
            (_args(_z(2, 3, 4), _z(2, 5, 4), _z(2, 5, 6)), {"attn_mask": _z(3, 5, dtype=D.float64)},
             RuntimeError, "Expected attn_mask dtype to be bool or float"),
            (_args(_z(1, 4, 3, 4), _z(1, 3, 5, 4), _z(1, 3, 5, 6)), {"enable_gqa": True}, RuntimeError,
             "Number of heads in key and value must divide")),
    tolerances={D.float16: (3e-3, 3e-3), D.bfloat16: (3e-2, 3e-2)})


# =====================================================================================================
# Distances
# =====================================================================================================


def _cosine_similarity_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((2, 3)), (make((2, 3)),), name="2-d")
    yield SampleInput(make((2, 3)), (make((3,)),), {"dim": -1}, name="broadcast")
    yield SampleInput(make((4,)), (make((4,)),), {"dim": 0}, name="1-d")
    yield SampleInput(make((2, 3, 4), noncontiguous=True), (make((2, 1, 4)),), {"dim": 2, "eps": 1e-3},
                      name="noncontiguous")
    yield SampleInput(make((2, 3)) * 0, (make((2, 3)),), name="zero vectors")
    yield SampleInput(make((0, 3)), (make((0, 3)),), name="empty")


def _cosine_similarity_ref(x1, x2, dim=1, eps=1e-8):
    eps = _eps_in(eps, x1)
    x1, x2 = np.broadcast_arrays(_f64(x1), _f64(x2))
    n1 = np.maximum(np.sqrt((x1 * x1).sum(axis=dim, keepdims=True)), eps)
    n2 = np.maximum(np.sqrt((x2 * x2).sum(axis=dim, keepdims=True)), eps)
    with np.errstate(invalid="ignore", divide="ignore"):  # eps is 0 in float16: zero vectors give nan
        return ((x1 / n1) * (x2 / n2)).sum(axis=dim)


_nn("cosine_similarity", _cosine_similarity_samples, _FLOATS, _cosine_similarity_ref,
    _errors((_args(_z(2, 3), _z(4, 3)), {}, RuntimeError, "must match the size"),
            (_args(_z(3), _z(3)), {}, IndexError, "Dimension out of range"),
            (_args(lambda device: _t(device, [[1, 2]]), lambda device: _t(device, [[1, 2]])), {}, RuntimeError,
             "expected common dtype to be floating point")))


def _pairwise_distance_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad, low=-3, high=3)
    yield SampleInput(make((2, 3)), (make((2, 3)),), name="2-d")
    yield SampleInput(make((2, 3)), (make((3,)),), {"p": 1.0}, name="broadcast, p=1")
    yield SampleInput(make((4,)), (make((4,)),), {"keepdim": True}, name="1-d keepdim")
    yield SampleInput(make(()), (make(()),), name="zero-dim")
    yield SampleInput(make((2, 3, 4), noncontiguous=True), (make((2, 3, 4)),), {"p": 3.0, "eps": 0.0},
                      name="noncontiguous, p=3")
    yield SampleInput(make((2, 3)), (make((2, 3)),), {"p": math.inf}, name="inf norm")
    yield SampleInput(make((0, 3)), (make((0, 3)),), name="empty")


def _sub(a, b):
    """``a - b`` in float64, integer inputs subtracted first in their own (wrapping) dtype, as PyTorch does."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind in "biu" and b.dtype.kind in "biu":
        with np.errstate(all="ignore"):
            return np.subtract(a, b).astype(np.float64)
    return _f64(a) - _f64(b)


def _eps_in(eps, x):
    """``eps`` as the input's floating dtype holds it (1e-8 is 0 in float16)."""
    x = np.asarray(x)
    return float(np.asarray(eps).astype(x.dtype)) if x.dtype.kind == "f" else eps


def _pnorm(d, p, axis=-1, keepdims=False):
    a = np.abs(d)
    if p == math.inf:
        return a.max(axis=axis, keepdims=keepdims)
    if p == 0:
        return (a != 0).sum(axis=axis, keepdims=keepdims).astype(np.float64)
    return (a**p).sum(axis=axis, keepdims=keepdims) ** (1 / p)


def _pairwise_distance_ref(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    d = _sub(x1, x2) + eps
    if d.ndim == 0:
        return np.abs(d)
    return _pnorm(d, p, -1, keepdim)


_nn("pairwise_distance", _pairwise_distance_samples, _NO_BOOL, _pairwise_distance_ref,
    _errors((_args(_z(2, 3), _z(4)), {}, RuntimeError, "must match the size"),
            (lambda device: (_t(device, [True]), _t(device, [False])), {}, RuntimeError, "Subtraction")),
    tolerances={D.bfloat16: (2e-2, 2e-2)})


def _pdist_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((4, 3)), name="4 rows")
    yield SampleInput(make((3, 2)), (1,), name="p=1")
    yield SampleInput(make((3, 5)), (math.inf,), name="inf norm")
    yield SampleInput(make((4, 2), noncontiguous=True), (0.5,), name="noncontiguous, p=0.5")
    yield SampleInput(make((1, 3)), name="one row")
    yield SampleInput(make((3, 0)), name="no columns")


def _pdist_ref(x, p=2):
    x = _f64(x)
    n = x.shape[0]
    return np.array([_pnorm(x[i] - x[j], p) for i in range(n) for j in range(i + 1, n)]).reshape(-1)


_nn("pdist", _pdist_samples, _F32_F64, _pdist_ref,
    _errors((_z(4), {}, RuntimeError, "pdist only supports 2D tensors, got: 1D"),
            (_args(_z(4, 3), -1), {}, RuntimeError, "pdist only supports non-negative p values"),
            (lambda device: (_t(device, [[1, 2]]),), {}, RuntimeError, "pdist only supports floating-point dtypes")))


# =====================================================================================================
# Losses
# =====================================================================================================

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
