"""ember.nn.functional: the linear maps ``linear`` and ``bilinear``.

Composite ops with fused CPU kernels; see :mod:`ember._ops._nn_common` for the
conventions shared by all ``nn.functional`` op modules.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _dtype as D
from .._meta import MetaArray
from ._nn_common import (
    _C_TYPE_NAMES,
    _E,
    _F32,
    _HALF_TYPES,
    _NN,
    _NN_ONLY,
    _check_optional_tensor,
    _check_tensor,
    _composite,
    _fmt,
    _matmul_np,
    _not_implemented,
)
from ._pointwise_helpers import _torch_name

__all__ = []  # ops are exported by ember/__init__.py and ember.nn.functional from the registry

#: Ops of this module that are also Tensor methods (see ember._tensor_methods).
METHODS: list[str] = []
#: Tensor method aliases: alias name -> op name.
ALIASES: dict[str, str] = {}


def _linear_meta(input, weight, bias=None):
    """Affine map ``input @ weight.T + bias``.

    Args:
        input (Tensor): ``(*, in_features)``.
        weight (Tensor): ``(out_features, in_features)``, or ``(in_features,)`` for one output
            (that dim is then dropped).
        bias (Tensor, optional): broadcastable to the output shape ``(*, out_features)``.

    Returns:
        Tensor: ``(*, out_features)``, of the common dtype.

    Raises:
        RuntimeError: for mismatched shapes or dtypes, or 0-dim arguments.
        NotImplementedError: for bool tensors.

    Example:
        >>> import ember
        >>> x = ember.tensor([[1.0, 2.0]])
        >>> ember.nn.functional.linear(x, ember.tensor([[1.0, 0.0], [1.0, 1.0]]), ember.tensor([0.5, -0.5]))
        tensor([[1.5000, 2.5000]])
    """
    _check_tensor("linear", "input", input)
    _check_tensor("linear", "weight", weight, 2)
    _check_optional_tensor("linear", "bias", bias, 3)
    if input.ndim == 0 or weight.ndim == 0:
        raise RuntimeError(
            f"both arguments to linear need to be at least 1D, but they are {input.ndim}D and {weight.ndim}D"
        )
    if weight.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {weight.ndim}D")
    in_features = weight.shape[-1]
    if input.shape[-1] != in_features:
        rows = math.prod(input.shape[:-1])
        out_features = weight.shape[0] if weight.ndim == 2 else 1
        raise RuntimeError(
            f"mat1 and mat2 shapes cannot be multiplied ({rows}x{input.shape[-1]} and {in_features}x{out_features})"
        )
    if input.dtype is not weight.dtype:
        raise RuntimeError(
            "expected m1 and m2 to have the same dtype, but got: "
            f"{_C_TYPE_NAMES[input.dtype.name]} != {_C_TYPE_NAMES[weight.dtype.name]}"
        )
    if input.dtype is D.bool:
        raise _not_implemented("addmm_impl_cpu_", input.dtype)
    shape = tuple(input.shape[:-1]) + ((weight.shape[0],) if weight.ndim == 2 else ())
    if bias is not None:
        if bias.dtype is not input.dtype:
            raise RuntimeError(
                f"self and mat2 must have the same dtype, but got {_torch_name(bias.dtype)} and "
                f"{_torch_name(input.dtype)}"
            )
        _check_expands("linear", bias.shape, shape)
    return MetaArray(shape, input._data.dtype)


def _check_expands(op, source, target):
    """Raise as PyTorch's ``expand`` does unless ``source`` broadcasts to exactly ``target``."""
    source, target = tuple(source), tuple(target)
    ok = len(source) <= len(target)
    if ok:
        for s, t in zip(reversed(source), reversed(target)):
            if s != t and s != 1:
                ok = False
                break
    if not ok:
        bad = next((i for i, (s, t) in enumerate(zip(reversed(source), reversed(target))) if s != t and s != 1), 0)
        dim = len(target) - 1 - bad
        raise RuntimeError(
            f"The expanded size of the tensor ({target[dim] if target else 0}) must match the existing size "
            f"({source[len(source) - 1 - bad] if source else 0}) at non-singleton dimension {dim}.  Target sizes: "
            f"{_fmt(target)}.  Tensor sizes: {_fmt(source)}"
        )


def _linear_cpu(input, weight, bias=None):
    x, w = input._data, weight._data
    lead = x.shape[:-1]
    if x.ndim > 2:  # one BLAS call over all leading dims
        x = x.reshape(-1, x.shape[-1])
    out = _matmul_np(x, w.T)
    out = out.reshape(lead + out.shape[1:]) if x.ndim == 2 else out
    if bias is not None:
        out = np.asarray(out)
        if out.ndim == 0:
            out = np.asarray(out + bias._data, dtype=out.dtype)
        else:
            out += bias._data
    return np.asarray(out)


def _linear_decomp(input, weight, bias=None):
    out = _E.matmul(input, weight.t() if weight.ndim == 2 else weight)
    return out if bias is None else out + bias


linear = _composite("linear", _linear_meta, cpu=_linear_cpu, decomposition=_linear_decomp, tags=_NN_ONLY)


def _bilinear_meta(input1, input2, weight, bias=None):
    """Bilinear map ``y[..., o] = sum_ij input1[..., i] * weight[o, i, j] * input2[..., j] + bias[o]``.

    Args:
        input1 (Tensor): ``(*, in1_features)``.
        input2 (Tensor): ``(*, in2_features)``, with the same leading dims as ``input1``.
        weight (Tensor): ``(out_features, in1_features, in2_features)``.
        bias (Tensor, optional): ``(out_features,)``.

    Returns:
        Tensor: ``(*, out_features)``.

    Raises:
        RuntimeError: for mismatched shapes or dtypes.
        NotImplementedError: for bool tensors.

    Example:
        >>> import ember
        >>> w = ember.ones(1, 2, 2)
        >>> ember.bilinear(ember.tensor([[1.0, 2.0]]), ember.tensor([[3.0, 4.0]]), w)
        tensor([[21.]])
    """
    for name, t, pos in (("input1", input1, 1), ("input2", input2, 2), ("weight", weight, 3)):
        _check_tensor("bilinear", name, t, pos)
    _check_optional_tensor("bilinear", "bias", bias, 4)
    if not input1.dtype is input2.dtype is weight.dtype or (bias is not None and bias.dtype is not weight.dtype):
        names = f"input1: {_C_TYPE_NAMES[input1.dtype.name]}, input2: {_C_TYPE_NAMES[input2.dtype.name]}, "
        names += f"weight: {_C_TYPE_NAMES[weight.dtype.name]}"
        if bias is not None:
            names += f", bias: {_C_TYPE_NAMES[bias.dtype.name]}"
        raise RuntimeError(f"All tensors must have the same dtype, got {names}")
    if input1.ndim != input2.ndim:
        raise RuntimeError(
            f"bilinear(): input dimensions do not match: got {input1.ndim} and {input2.ndim}"
        )
    if input1.ndim == 0:
        raise RuntimeError("bilinear(): input dimensions must be at least 1D, got 0D")
    for i in range(input1.ndim - 1):
        if input1.shape[i] != input2.shape[i]:
            raise RuntimeError(
                f"bilinear(): input batch dimensions do not match at dim {i}: got {input1.shape[i]} and "
                f"{input2.shape[i]}"
            )
    if weight.ndim != 3:
        raise RuntimeError(f"bilinear(): weight must be 3-D (out, in1, in2), got {weight.ndim}-D")
    if input1.shape[-1] != weight.shape[1]:
        raise RuntimeError(
            f"bilinear(): input1 size does not match weight size: got {input1.shape[-1]} but expected {weight.shape[1]}"
        )
    if input2.shape[-1] != weight.shape[2]:
        raise RuntimeError(
            f"bilinear(): input2 size does not match weight size: got {input2.shape[-1]} but expected {weight.shape[2]}"
        )
    shape = tuple(input1.shape[:-1]) + (weight.shape[0],)
    if bias is not None:
        if bias.ndim == 0:
            raise IndexError("Dimension specified as 0 but tensor has no dimensions")
        if bias.shape[0] != weight.shape[0]:
            raise RuntimeError(
                f"bilinear(): bias size does not match weight size: got {bias.shape[0]} but expected {weight.shape[0]}"
            )
        _check_expands("bilinear", bias.shape, shape)
    if input1.dtype is D.bool:
        raise _not_implemented("bmm", input1.dtype)
    return MetaArray(shape, weight._data.dtype)


def _bilinear_cpu(input1, input2, weight, bias=None):
    x1, x2, w = input1._data, input2._data, weight._data
    out_f, in1, in2 = w.shape
    lead = x1.shape[:-1]
    a = x1.reshape(-1, in1)
    b = x2.reshape(-1, in2)
    # (N, in2) @ (in2, out * in1) -> (N, out, in1), then contract in1 with input1
    t = _matmul_np(b, w.reshape(out_f * in1, in2).T).reshape(-1, out_f, in1)
    if t.dtype in _HALF_TYPES:
        out = np.einsum("noi,ni->no", t.astype(_F32), a.astype(_F32)).astype(t.dtype)
    else:
        out = np.einsum("noi,ni->no", t, a)
    out = out.reshape(lead + (out_f,))
    if bias is not None:
        out += bias._data
    return out


def _bilinear_decomp(input1, input2, weight, bias=None):
    out_f, in1, in2 = weight.shape
    t = _E.matmul(input2, weight.reshape(out_f * in1, in2).t())
    t = t.reshape(tuple(input2.shape[:-1]) + (out_f, in1))
    out = _E.sum(t * _E.unsqueeze(input1, -2), -1).to(weight.dtype)
    return out if bias is None else out + bias


bilinear = _composite("bilinear", _bilinear_meta, cpu=_bilinear_cpu, decomposition=_bilinear_decomp, tags=_NN)
