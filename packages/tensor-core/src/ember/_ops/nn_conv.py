"""ember.nn.functional: convolution and transposed convolution.

* ``convolution`` is the prim (PyTorch's ``torch.convolution``): forward and
  transposed, every dimensionality, groups; real dtypes only, as in PyTorch.
  ``conv1d``..``conv3d`` and ``conv_transpose1d``..``conv_transpose3d`` are
  composites over it (their decomposition handles unbatched inputs,
  ``padding='same'`` and complex inputs, as four real convolutions) with a
  fused CPU kernel.
* The CPU forward of float32 (and float16/bfloat16, computed in float32) runs
  ``ember._C.conv_avx512`` where the CPU has AVX-512: an implicit GEMM over
  the zero-padded input split into its stride phases, so that every kernel
  tap reads contiguous input; no im2col copy, OpenMP over output tiles (its
  register tile runs along output positions, or, on small images, along
  output channels; the kernel picks by an estimate of cost).
  Otherwise (float64, integers, complex, CPUs without AVX-512): im2col (a
  strided window view of the padded input, copied once) and one batched BLAS
  matmul per group, or a direct OpenMP kernel for thin groups (depthwise).
  Transposed convolution is that GEMM followed by col2im, the scatter-add of
  ``fold``; an ungrouped float32 one of stride 1 is the plain convolution by
  the flipped kernel (channels swapped) on the AVX-512 kernels.
* An ungrouped convolution with few output positions and a large kernel, the
  shape of a weight gradient (which the autograd formula computes as the
  input convolved with the output gradient, batch and channels swapped), runs
  ``ember._C.conv_weight_grad`` in float32 and float64 on AVX-512: the weight
  gradient computed directly, its register tile along the output channels and
  its long reduction over batch and positions kept in registers.
* Small matrix products run on one BLAS thread (``_blas_threads``): OpenBLAS's
  spinning workers would otherwise take the cores of the OpenMP kernels.
* On the cuda device these ops run the kernels of :mod:`ember.cuda.kernels.conv`
  (registered when the CUDA backend initialises).
* The plans of ``conv{n}d`` and ``convolution``, asked four times per
  convolution under autograd, key their common calls (tensors, ints and
  tuples of ints) with a cheaper flat key (see :mod:`._spatial`).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.lib.stride_tricks import as_strided

from .. import _C
from .. import _dtype as D
from .._meta import MetaArray
from ._blas_threads import matmul as _blas_matmul
from ._nn_common import _E, _F32, _NN, _check_tensor, _fmt, _not_implemented
from ._pointwise_helpers import _torch_name
from ._registry import COMPOSITE, defop
from ._spatial import (
    _C_FLOAT,
    _FLOATS,
    _INT_TYPES,
    _LETTERS,
    _bool_arg,
    _compute,
    _expand_param,
    _int_arg,
    _ints_key,
    _lift3,
    _memoized,
    _tensors_key,
)

__all__ = []  # ops are exported by ember/__init__.py and ember.nn.functional from the registry


# -- convolution ---------------------------------------------------------------------------------------

_CONV_TYPES = tuple(d for d in D.ALL_DTYPES if d is not D.bool)
_CONV_TRANSPOSE_TYPES = (D.int64, *_FLOATS, D.complex64, D.complex128)


def _conv_shape(op, x_shape, x_dtype, w_shape, w_dtype, b, stride, pad_lo, pad_hi, dilation, transposed,
                output_padding, groups, allow_complex=True):
    """Check a batched convolution and return its output shape.

    ``x_shape`` is (N, C, *spatial), ``w_shape`` is (O, C / groups, *kernel) or,
    transposed, (C, O / groups, *kernel); ``pad_lo``/``pad_hi`` pad each spatial dim
    before/after. Raises PyTorch's errors (RuntimeError, NotImplementedError).
    ``allow_complex=False`` refuses complex dtypes, as the ``convolution`` prim does.
    """
    n = len(w_shape) - 2
    if (x_dtype is D.bool or (transposed and x_dtype not in _CONV_TRANSPOSE_TYPES)
            or (x_dtype.is_complex and not allow_complex)):
        kernel = f"slow_conv_transpose{max(n, 2)}d_out_cpu" if transposed else f"slow_conv{max(n, 2)}d_cpu"
        raise _not_implemented(kernel, x_dtype)
    if not transposed and any(d != 1 for d in dilation) and x_dtype in _INT_TYPES and x_dtype is not D.int64:
        raise _not_implemented("slow_conv_dilated<>", x_dtype)
    if w_dtype is not x_dtype:
        raise RuntimeError(f"Input type ({_torch_name(x_dtype)}) and weight type ({_torch_name(w_dtype)}) should be "
                           "the same")
    if b is not None and b.dtype is not x_dtype:
        raise RuntimeError(f"Input type ({_torch_name(x_dtype)}) and bias type ({_torch_name(b.dtype)}) should be "
                           "the same")
    if groups <= 0:
        raise RuntimeError("non-positive groups is not supported")
    if any(s <= 0 for s in stride):
        raise RuntimeError("non-positive stride is not supported")
    if any(p < 0 for p in pad_lo + pad_hi):
        raise RuntimeError("negative padding is not supported")
    if any(d <= 0 for d in dilation):
        raise RuntimeError("non-positive dilation is not supported")
    if any(p < 0 for p in output_padding):
        raise RuntimeError("negative output_padding is not supported")
    if w_shape[0] % groups:
        raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by {groups} at dimension 0, but "
                           f"got weight of size [{_fmt(w_shape)}] instead")
    channels = x_shape[1]
    kernel = w_shape[2:]
    spatial = x_shape[2:]
    if transposed:
        if channels != w_shape[0]:
            raise RuntimeError(f"Given transposed=1, weight of size {_fmt(w_shape)}, expected input{_fmt(x_shape)} to "
                               f"have {w_shape[0]} channels, but got {channels} channels instead")
        out_channels = w_shape[1] * groups
        for i in range(n):
            if output_padding[i] >= stride[i] and output_padding[i] >= dilation[i]:
                raise RuntimeError(f"output padding must be smaller than either stride or dilation, but got "
                                   f"output_padding={_fmt(output_padding)}, stride={_fmt(stride)} and "
                                   f"dilation={_fmt(dilation)}")
        out = tuple((spatial[i] - 1) * stride[i] - pad_lo[i] - pad_hi[i] + dilation[i] * (kernel[i] - 1)
                    + output_padding[i] + 1 for i in range(n))
        if any(o <= 0 for o in out):
            raise RuntimeError(f"Given input size per channel: ({' x '.join(map(str, spatial))}). Calculated output "
                               f"size per channel: ({' x '.join(map(str, out))}). Output size is too small")
        bias_prefix = "Given transposed=1, weight of size"
    else:
        if w_shape[0] < 1:
            raise RuntimeError(f"Given groups={groups}, expected weight to be at least 1 at dimension 0, but got "
                               f"weight of size {_fmt(w_shape)} instead")
        if channels != w_shape[1] * groups:
            raise RuntimeError(f"Given groups={groups}, weight of size {_fmt(w_shape)}, expected input{_fmt(x_shape)} "
                               f"to have {w_shape[1] * groups} channels, but got {channels} channels instead")
        padded = tuple(spatial[i] + pad_lo[i] + pad_hi[i] for i in range(n))
        effective = tuple(dilation[i] * (kernel[i] - 1) + 1 for i in range(n))
        if any(p < e for p, e in zip(padded, effective)):
            raise RuntimeError(f"Calculated padded input size per channel: ({' x '.join(map(str, padded))}). Kernel "
                               f"size: ({' x '.join(map(str, effective))}). Kernel size can't be greater than actual "
                               "input size")
        out_channels = w_shape[0]
        out = tuple((padded[i] - effective[i]) // stride[i] + 1 for i in range(n))
        bias_prefix = "Given weight of size"
    if b is not None and (b._data.ndim != 1 or b._data.shape[0] != out_channels):
        raise RuntimeError(f"{bias_prefix} {_fmt(w_shape)}, expected bias to be 1-dimensional with {out_channels} "
                           f"elements, but got bias of size {_fmt(b._data.shape)} instead")
    return (x_shape[0], out_channels, *out)


def _zero_pad(x, pad_lo, pad_hi):
    """``x`` (N, C, *spatial) with zeros around the spatial dims, as a new C-contiguous array."""
    n = len(pad_lo)
    padded = np.zeros((*x.shape[:2], *(x.shape[2 + i] + pad_lo[i] + pad_hi[i] for i in range(n))), x.dtype)
    padded[(slice(None), slice(None), *(slice(pad_lo[i], pad_lo[i] + x.shape[2 + i]) for i in range(n)))] = x
    return padded


def _stride_phases(x, pad_lo, pad_hi, stride, dtype=_F32):
    """``x`` (N, C, *spatial) zero-padded and split by stride phases: (N, C, prod(stride), Dq, Hq, Wq).

    Phase (a, b, c) holds the padded elements (q * stride + (a, b, c)); with stride 1 this is
    the padded input itself. Spatial dims are lifted to 3 for ember._C.conv_avx512 and
    ember._C.conv_weight_grad; the result has ``dtype``.
    """
    n = len(stride)
    N, C = x.shape[:2]
    if all(v == 1 for v in stride):
        x = np.ascontiguousarray(x, dtype)
        if any(pad_lo) or any(pad_hi):
            # ember._C.pad_zero: a few times faster than numpy's copy into the middle of short rows
            x = _C.pad_zero(x.reshape(N * C, *_lift3(x.shape[2:], 1)), _lift3(pad_lo, 0), _lift3(pad_hi, 0))
        return x.reshape(N, C, 1, *_lift3(x.shape[-n:], 1))
    sizes = [x.shape[2 + i] + pad_lo[i] + pad_hi[i] for i in range(n)]
    q = [-(-sizes[i] // stride[i]) for i in range(n)]
    out = np.zeros((N, C, *stride, *q), dtype)
    for phase in np.ndindex(*stride):
        src, dst = [], []
        for i in range(n):
            # padded index q * s + a holds input index q * s + a - pad_lo, when inside the input
            q0 = max(-((phase[i] - pad_lo[i]) // stride[i]), 0)
            start = q0 * stride[i] + phase[i] - pad_lo[i]
            count = len(range(start, x.shape[2 + i], stride[i]))
            src.append(slice(start, start + (count - 1) * stride[i] + 1 if count else start, stride[i]))
            dst.append(slice(q0, q0 + count))
        out[(slice(None), slice(None), *phase, *dst)] = x[(slice(None), slice(None), *src)]
    return out.reshape(N, C, math.prod(stride), *_lift3(q, 1))


def _im2col_windows(x, kernel, stride, pad_lo, pad_hi, dilation, out, groups=1):
    """Sliding windows of ``x`` (N, C, *spatial) as a view (N, groups, C / groups, *kernel, *out).

    The view reads a zero-padded copy when there is padding; it is never written.
    """
    n = len(kernel)
    if any(pad_lo) or any(pad_hi):
        x = _zero_pad(x, pad_lo, pad_hi)
    st = x.strides
    cpg = x.shape[1] // groups
    shape = (x.shape[0], groups, cpg, *kernel, *out)
    strides = (st[0], cpg * st[1], st[1], *(st[2 + i] * dilation[i] for i in range(n)),
               *(st[2 + i] * stride[i] for i in range(n)))
    return as_strided(x, shape, strides, writeable=False)


def _conv_few_outputs(x, w, stride, pad_lo, pad_hi, dilation, out):
    """Ungrouped convolution with few output positions and a large kernel, as one BLAS matmul.

    The zero-padded input is copied once, channels last (N, *padded, C), so that every
    window (*kernel, C) is a strided view of it; the windows of all N * prod(out)
    output positions become a (N * P, prod(kernel) * C) matrix, which is small next to
    the kernel when P is small, multiplied by the (C_out, prod(kernel) * C) weight.
    This is how a weight gradient (input correlated with the output gradient) runs.
    """
    if _FAST_CONV:
        return _conv_few_outputs_avx512(x, w, stride, pad_lo, pad_hi, dilation, out)
    n = len(out)
    N, C = x.shape[:2]
    out_channels = w.shape[0]
    kernel = w.shape[2:]
    padded = tuple(x.shape[2 + i] + pad_lo[i] + pad_hi[i] for i in range(n))
    xcl = np.zeros((N, *padded, C), x.dtype)
    xcl[(slice(None), *(slice(pad_lo[i], pad_lo[i] + x.shape[2 + i]) for i in range(n)))] = np.moveaxis(x, 1, -1)
    st = xcl.strides
    windows = as_strided(xcl, (N, *out, *kernel, C),
                         (st[0], *(st[1 + i] * stride[i] for i in range(n)),
                          *(st[1 + i] * dilation[i] for i in range(n)), st[-1]), writeable=False)
    cols = windows.reshape(N * math.prod(out), -1)
    wm = np.moveaxis(w, 1, -1).reshape(out_channels, -1)
    result = _blas_matmul(cols, wm.T).reshape((N, *out, out_channels))
    return np.ascontiguousarray(np.moveaxis(result, -1, 1))


def _conv_few_outputs_avx512(x, w, stride, pad_lo, pad_hi, dilation, out):
    """``_conv_few_outputs`` on ember._C.conv_weight_grad (float32 or float64, AVX-512).

    The convolution ``y[b, o, k] = sum_{n, p} x[b, n, k * stride + p * dilation] w[o, n, p]`` is a weight
    gradient read the other way round: with ``b`` as the channel, ``n`` as the batch and ``w`` as the output
    gradient, it is ``dW[o, b, k]`` of a convolution whose stride is this one's dilation and whose dilation is
    this one's stride. The autograd formula hands over transposed views of the forward's input and output
    gradient, so swapping the two leading axes back costs no copy.
    """
    dtype = x.dtype
    x_nc = x.swapaxes(0, 1)  # (n, b, *spatial): the "batch" n first
    phases = _stride_phases(x_nc, pad_lo, pad_hi, dilation, dtype)
    g = np.ascontiguousarray(w.swapaxes(0, 1))  # (n, o, *p)
    g = g.reshape((*g.shape[:2], *_lift3(g.shape[2:], 1)))
    dw = _C.conv_weight_grad(phases, g, _lift3(out, 1), 1, _lift3(dilation, 1), _lift3(stride, 1))
    return np.ascontiguousarray(dw.reshape((w.shape[0], x.shape[0], *out)).swapaxes(0, 1))


# Output positions up to which (with a kernel of at least _FEW_OUTPUTS_KERNEL_RATIO times as many taps) an
# ungrouped convolution runs as one matmul over its windows (_conv_few_outputs).
_FEW_OUTPUTS = 64
_FEW_OUTPUTS_KERNEL_RATIO = 4
# Direct kernel (ember._C.conv_direct) when a group is this thin: depthwise and its neighbours.
_DIRECT_MAX_GROUP_WORK = 16
# float32 convolutions run ember._C.conv_avx512 where the CPU has AVX-512.
_FAST_CONV = _C.conv_fast_available()
# Else ember._C.conv_avx2 where it has AVX2 and FMA, for groups of at least this many output channels
# (its register tile spans 8 to 24 output channels; thinner groups would compute mostly padding lanes).
_AVX2_CONV = not _FAST_CONV and _C.conv_avx2_available()
_AVX2_MIN_GROUP_OUTPUTS = 4
# ... and at least this many multiply-adds (input channels of a group x kernel taps) per output: below, its
# transposed store costs more than the products (the demo's first convolution, 1 channel x 3 x 3, runs
# 10-20% faster on im2col and BLAS).
_AVX2_MIN_TAPS = 16


def _conv_avx2_fits(x, cpg, opg, groups, taps):
    """Whether ``_conv_forward`` runs ``ember._C.conv_avx2``: float32 (halves computed in it), AVX2 and no
    AVX-512, not a thin group (depthwise and its neighbours run the direct kernel) and ``taps`` (the
    kernel's size) times ``cpg`` multiply-adds per output at least ``_AVX2_MIN_TAPS``."""
    return (_AVX2_CONV and x.dtype == _F32 and opg >= _AVX2_MIN_GROUP_OUTPUTS and cpg * taps >= _AVX2_MIN_TAPS
            and (groups == 1 or (cpg > 1 and cpg * opg > _DIRECT_MAX_GROUP_WORK)))


def _depthwise_weight_grad_call(x, w, stride, pad_lo, pad_hi, dilation, groups, out):
    """The convolution that a depthwise convolution's weight gradient is, on ``ember._C.depthwise_weight_grad``;
    None for any other call.

    The autograd formula (derivatives/nn_conv.py) writes the weight gradient of a 2-D depthwise convolution
    (groups == channels) as a convolution of the input, one (sample, channel) plane per group, by the output
    gradient as the kernel: a large kernel (the output's size) and a small output (the weight's size, a little
    more where the forward dropped trailing rows). That is what an AOT-traced backward (ember.compile) runs; the
    direct kernel spent 2.7 ms on MobileNetV2's 192-channel 16 x 16 layer looping over the 256 taps of rows 3
    wide. ``depthwise_weight_grad`` computes exactly this sum, ``y[g, a, b] = sum_ij x[g, a S + i Dl - P, ...]
    k[g, i, j]``, as its ``dW`` with stride and dilation exchanged (one float64 dot product per channel and tap):
    a batch of 1, one channel per group and output per group, float32/float64, 2-D, symmetric padding, and
    sizes that the kernel's own geometry check accepts (else the general paths).
    """
    if (x.ndim != 4 or x.shape[0] != 1 or w.shape[1] != 1 or groups != x.shape[1] or w.shape[0] != groups
            or x.dtype not in _C_FLOAT or w.dtype != x.dtype or tuple(pad_lo) != tuple(pad_hi)):
        return None
    kh, kw = w.shape[2:]
    if kh * kw < 4 * out[0] * out[1]:  # a forward-shaped depthwise convolution: the direct kernel's job
        return None
    # the kernel's geometry: the "output gradient" (our kernel) must be exactly what a forward of this
    # input by an (out[0], out[1]) kernel gives with our dilation as its stride and our stride as its dilation
    for i, k in enumerate((kh, kw)):
        if (x.shape[2 + i] + 2 * pad_lo[i] - stride[i] * (out[i] - 1) - 1) // dilation[i] + 1 != k:
            return None
    gy = np.ascontiguousarray(w).reshape(1, groups, kh, kw)
    dw = _C.depthwise_weight_grad(np.ascontiguousarray(x), gy, out[0], out[1], list(dilation), list(pad_lo),
                                  list(stride))
    return dw.reshape(1, groups, *out)


def _conv_forward(x, w, b, stride, pad_lo, pad_hi, dilation, groups):
    """Convolution of numpy x (N, C, *spatial) by w (C_out, C / groups, *kernel), plus bias b (C_out,) or None."""
    dtype = x.dtype
    x, w = _compute(x), _compute(w)
    n = w.ndim - 2
    N, C = x.shape[:2]
    out_channels = w.shape[0]
    kernel = w.shape[2:]
    out = tuple((x.shape[2 + i] + pad_lo[i] + pad_hi[i] - dilation[i] * (kernel[i] - 1) - 1) // stride[i] + 1
                for i in range(n))
    cpg, opg = C // groups, out_channels // groups
    if N == 0 or out_channels == 0 or 0 in out or C == 0:
        result = np.zeros((N, out_channels, *out), x.dtype)
    elif (dw := _depthwise_weight_grad_call(x, w, stride, pad_lo, pad_hi, dilation, groups, out)) is not None:
        result = dw
    elif groups == 1 and x.dtype in _C_FLOAT and not any(pad_lo) and not any(pad_hi) and (
            all(k == 1 for k in kernel) and all(v == 1 for v in stride)):
        # a 1x1 convolution is a matrix product per sample, (O, C) @ (C, P): BLAS, 1.5-3x the implicit GEMM
        # of conv_avx2 (which packs the whole weight for a few output positions) on MobileNet's pointwise layers
        result = _blas_matmul(w.reshape(out_channels, C), x.reshape(N, C, -1)).reshape((N, out_channels, *out))
    elif groups == 1 and x.dtype in _C_FLOAT and not any(pad_lo) and not any(pad_hi) and (
            all(v == 1 for v in dilation) and tuple(x.shape[2:]) == tuple(kernel)):
        # one window covering the whole input (a 1x1 convolution's weight gradient, as the autograd formula
        # writes it: batch and channels swapped, the output gradient as the kernel): one product (N, C K) @ (C K, O)
        result = _blas_matmul(x.reshape(N, -1), w.reshape(out_channels, -1).T).reshape((N, out_channels, *out))
    elif _conv_avx2_fits(x, cpg, opg, groups, math.prod(kernel)):
        # implicit GEMM on the zero-padded input split by stride phases (as conv_avx512's), weight
        # gradients' few-outputs shape included: no im2col copy, no channels-last copy, no BLAS; the kernel
        # packs a strided weight (a weight gradient's transposed output gradient) without a copy first
        w5 = w.reshape((out_channels, cpg, *_lift3(kernel, 1)))
        bias = None if b is None else np.ascontiguousarray(_compute(b), _F32)
        result = _C.conv_avx2(_stride_phases(x, pad_lo, pad_hi, stride), w5, bias, groups, _lift3(stride, 1),
                              _lift3(dilation, 1), _lift3(out, 1)).reshape((N, out_channels, *out))
        return result.astype(dtype, copy=False)
    elif (groups == 1 and x.dtype in _C_FLOAT and math.prod(out) <= _FEW_OUTPUTS
          and math.prod(kernel) >= _FEW_OUTPUTS_KERNEL_RATIO * math.prod(out)):
        result = _conv_few_outputs(x, w, stride, pad_lo, pad_hi, dilation, out)
    elif x.dtype == _F32 and _FAST_CONV and (groups == 1 or cpg == 1 or cpg * opg > _DIRECT_MAX_GROUP_WORK):
        # AVX-512 implicit GEMM on the zero-padded input split by stride phases: no im2col copy
        w5 = np.ascontiguousarray(w).reshape((out_channels, cpg, *_lift3(kernel, 1)))
        bias = None if b is None else np.ascontiguousarray(_compute(b), _F32)
        result = _C.conv_avx512(_stride_phases(x, pad_lo, pad_hi, stride), w5, bias, groups, _lift3(stride, 1),
                                _lift3(dilation, 1), _lift3(out, 1)).reshape((N, out_channels, *out))
        return result.astype(dtype, copy=False)
    elif x.dtype in _C_FLOAT and groups > 1 and cpg * opg <= _DIRECT_MAX_GROUP_WORK:
        x5 = np.ascontiguousarray(x).reshape((N, C, *_lift3(x.shape[2:], 1)))
        w5 = np.ascontiguousarray(w).reshape((out_channels, cpg, *_lift3(kernel, 1)))
        result = _C.conv_direct(x5, w5, _lift3(out, 1), _lift3(stride, 1), _lift3(pad_lo, 0), _lift3(dilation, 1),
                                groups).reshape((N, out_channels, *out))
    else:
        K = math.prod(kernel)
        P = math.prod(out)
        if K == 1 and not any(pad_lo) and not any(pad_hi) and all(s == 1 for s in stride):
            cols = x.reshape(N, groups, cpg, P)
        else:
            cols = _im2col_windows(x, kernel, stride, pad_lo, pad_hi, dilation, out, groups).reshape(
                N, groups, cpg * K, P)
        result = _blas_matmul(w.reshape(groups, opg, cpg * K), cols).reshape((N, out_channels, *out))
    if b is not None:
        result += _compute(b).reshape((out_channels,) + (1,) * n)
    return result.astype(dtype, copy=False)


def _col2im(cols, planes, image, kernel, blocks, stride, pad, dilation, parallel=True):
    """Scatter-add cols (planes, *kernel, *blocks) into images (planes, *image): fold's and conv_transpose's core.

    Block ``l`` and kernel offset ``k`` land at ``l * stride - pad + k * dilation`` in each dim.
    ``parallel=False`` keeps the C++ loop on this thread, for use right after a BLAS call:
    OpenBLAS's threads keep spinning for a while, and OpenMP threads would fight them.
    """
    n = len(kernel)
    if cols.dtype in _C_FLOAT:
        cols = np.ascontiguousarray(cols)
        result = _C.col2im(cols, planes, _lift3(image, 1), _lift3(kernel, 1), _lift3(blocks, 1), _lift3(stride, 1),
                           _lift3(pad, 0), _lift3(dilation, 1), parallel)
        return result.reshape((planes, *image))
    # any other dtype: one vectorised add per kernel offset
    cols = cols.reshape((planes, *kernel, *blocks))
    full = tuple(max((blocks[i] - 1) * stride[i] + dilation[i] * (kernel[i] - 1) + 1, pad[i] + image[i])
                 for i in range(n))
    buffer = np.zeros((planes, *full), cols.dtype)
    for offset in np.ndindex(*kernel):
        target = tuple(slice(offset[i] * dilation[i], offset[i] * dilation[i] + (blocks[i] - 1) * stride[i] + 1,
                             stride[i]) for i in range(n))
        buffer[(slice(None), *target)] += cols[(slice(None), *offset)]
    return np.array(buffer[(slice(None), *(slice(pad[i], pad[i] + image[i]) for i in range(n)))], copy=True)


def _transpose_geometry(x_shape, w_shape, stride, padding, output_padding, dilation, groups):
    """The sizes of a transposed convolution of x (N, C, *blocks) by w (C, C_out / groups, *kernel):
    ``(n, N, C, C_out / groups, C_out, kernel, blocks, output spatial sizes)``."""
    n = len(w_shape) - 2
    N, C = x_shape[:2]
    opg = w_shape[1]
    kernel, blocks = tuple(w_shape[2:]), tuple(x_shape[2:])
    out = tuple((blocks[i] - 1) * stride[i] - 2 * padding[i] + dilation[i] * (kernel[i] - 1) + output_padding[i] + 1
                for i in range(n))
    return n, N, C, opg, opg * groups, kernel, blocks, out


def _conv_transpose_forward(x, w, b, stride, padding, output_padding, dilation, groups):
    """Transposed convolution of x (N, C, *spatial) by w (C, C_out / groups, *kernel): matmul, then col2im."""
    dtype = x.dtype
    x, w = _compute(x), _compute(w)
    n, N, C, opg, out_channels, kernel, blocks, out = _transpose_geometry(
        x.shape, w.shape, stride, padding, output_padding, dilation, groups)
    cpg = C // groups
    K, L = math.prod(kernel), math.prod(blocks)
    if N == 0 or out_channels == 0 or C == 0:
        result = np.zeros((N, out_channels, *out), x.dtype)
    elif (n == 2 and groups == C and opg == 1 and x.dtype in _C_FLOAT and w.dtype == x.dtype
          and all(output_padding[i] < stride[i] for i in range(n))):
        # depthwise: the input gradient of a strided depthwise convolution, as an AOT-traced backward runs it
        # (ember._C.depthwise_input_grad scatters each row into the rows of each tap: no GEMM of one channel
        # per group, no col2im); output_padding below the stride keeps its geometry check's sizes exact
        result = _C.depthwise_input_grad(np.ascontiguousarray(x), np.ascontiguousarray(w), list(out), list(stride),
                                         list(padding), list(dilation))
    elif (x.dtype == _F32 and _FAST_CONV and groups == 1 and all(s == 1 for s in stride) and not any(output_padding)
          and all(padding[i] <= dilation[i] * (kernel[i] - 1) for i in range(n))):
        # at stride 1 it is the plain convolution by the flipped kernel, channels swapped, padded by
        # dilation * (kernel - 1) - padding: the forward's kernels, and no col2im scatter
        flipped = np.flip(w.swapaxes(0, 1), axis=tuple(range(2, 2 + n)))
        pad = tuple(dilation[i] * (kernel[i] - 1) - padding[i] for i in range(n))
        return _conv_forward(x, flipped, b, (1,) * n, pad, pad, dilation, 1).astype(dtype, copy=False)
    elif x.dtype == _F32 and _FAST_CONV:
        # the GEMM as a 1x1 convolution on ember._C's AVX-512 kernel, then col2im (no BLAS threads to fight)
        wm = np.ascontiguousarray(w.reshape(groups, cpg, opg * K).transpose(0, 2, 1)).reshape(
            groups * opg * K, cpg, 1, 1, 1)
        xm = np.ascontiguousarray(x).reshape(N, C, 1, 1, 1, L)
        cols = _C.conv_avx512(xm, wm, None, groups, [1, 1, 1], [1, 1, 1], [1, 1, L])
        result = _col2im(cols, N * out_channels, out, kernel, blocks, stride, padding, dilation)
        result = result.reshape((N, out_channels, *out))
    else:
        wm = w.reshape(groups, cpg, opg * K).transpose(0, 2, 1)
        cols = _blas_matmul(wm, x.reshape(N, groups, cpg, L))  # (N, groups, C_out / groups * K, L)
        result = _col2im(cols, N * out_channels, out, kernel, blocks, stride, padding, dilation, parallel=False)
        result = result.reshape((N, out_channels, *out))
    if b is not None:
        result += _compute(b).reshape((out_channels,) + (1,) * n)
    return result.astype(dtype, copy=False)


def _convolution_key(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    """:func:`_convolution_plan`'s key for calls of tensors, ints or tuples of ints, and a bool (else None):
    the decomposition of ``conv{n}d`` passes its plan's tuples, so every forward convolution is such a call."""
    tensors = _tensors_key(input, weight, bias)
    params = (_ints_key(stride), _ints_key(padding), _ints_key(dilation), _ints_key(output_padding),
              _ints_key(groups))
    if tensors is None or None in params or type(transposed) is not bool:
        return None
    return ("convolution", *tensors, *params, transposed)


@_memoized(fast_key=_convolution_key)
def _convolution_plan(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    op = "convolution"
    _check_tensor(op, "input", input, 1)
    _check_tensor(op, "weight", weight, 2)
    if bias is not None:
        _check_tensor(op, "bias", bias, 3)
    w_shape = weight._data.shape
    x_shape = input._data.shape
    if len(w_shape) < 3:
        raise RuntimeError(f"convolution: expected weight to have at least 3 dimensions, but got weight of size "
                           f"{_fmt(w_shape)}")
    if len(x_shape) != len(w_shape):
        raise RuntimeError(f"Expected {len(w_shape)}-dimensional input for {len(w_shape)}-dimensional weight "
                           f"{_fmt(w_shape)}, but got {len(x_shape)}-dimensional input of size {_fmt(x_shape)} instead")
    n = len(w_shape) - 2
    stride = _expand_param(op, "stride", stride, 4, n)
    padding = _expand_param(op, "padding", padding, 5, n)
    dilation = _expand_param(op, "dilation", dilation, 6, n)
    transposed = _bool_arg(op, "transposed", transposed, 7)
    output_padding = _expand_param(op, "output_padding", output_padding, 8, n)
    groups = _int_arg(op, "groups", groups, 9)
    out = _conv_shape(op, x_shape, input.dtype, w_shape, weight.dtype, bias, stride, padding, padding, dilation,
                      transposed, output_padding, groups, allow_complex=False)
    return stride, padding, dilation, transposed, output_padding, groups, out


def _convolution_meta(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    """Convolution or transposed convolution over 1, 2 or 3 spatial dims: the prim behind ``conv*d``.

    PyTorch's ``torch.convolution``. Every argument is required; ``input`` is
    batched ``(N, C, *spatial)``.

    Args:
        input (Tensor): ``(N, C_in, *spatial)``, not bool.
        weight (Tensor): ``(C_out, C_in / groups, *kernel)``, or transposed
            ``(C_in, C_out / groups, *kernel)``; same dtype as ``input``.
        bias (Tensor or None): (C_out,).
        stride, padding, dilation (int or sequence of ints): per spatial dim.
        transposed (bool): a transposed convolution (the adjoint of the forward one).
        output_padding (int or sequence of ints): extra size on one side of a
            transposed convolution's output, smaller than stride or dilation.
        groups (int): splits channels into independent groups.

    Returns:
        Tensor: ``(N, C_out, *out)``, with ``out = (in + 2 p - d (k - 1) - 1) // s + 1``,
        or transposed ``(in - 1) s - 2 p + d (k - 1) + output_padding + 1``.

    Raises:
        RuntimeError: for mismatched dims, channels, groups, dtypes or bias, bad
            parameters, or a kernel larger than the padded input.
        NotImplementedError: for bool and complex inputs (and transposed integer inputs
            but int64); ``conv*d`` take complex inputs as four real convolutions.

    Example:
        >>> import ember
        >>> x = ember.ones(1, 1, 4)
        >>> ember.convolution(x, ember.ones(1, 1, 2), None, [1], [0], [1], False, [0], 1)
        tensor([[[2., 2., 2.]]])
    """
    out = _convolution_plan(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)[-1]
    return MetaArray(out, input._data.dtype)


def _convolution_cpu(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    stride, padding, dilation, transposed, output_padding, groups, _ = _convolution_plan(
        input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
    b = None if bias is None else bias._data
    if transposed:
        return _conv_transpose_forward(input._data, weight._data, b, stride, padding, output_padding, dilation,
                                       groups)
    return _conv_forward(input._data, weight._data, b, stride, padding, padding, dilation, groups)


convolution = defop("convolution", _convolution_meta, cpu=_convolution_cpu)


def _complex_by_parts(conv, x, weight, bias, n):
    """A complex convolution from real ones: (a + ib) * (c + id) = (ac - bd) + i(ad + bc)."""
    xr, xi, wr, wi = _E.real(x), _E.imag(x), _E.real(weight), _E.imag(weight)
    out = _E.complex(_E.sub(conv(xr, wr, None), conv(xi, wi, None)), _E.add(conv(xr, wi, None), conv(xi, wr, None)))
    if bias is not None:
        out = _E.add(out, _E.reshape(bias, (-1,) + (1,) * n))
    return out


def _conv_key(name, n, input, weight, bias, stride, padding, dilation, groups):
    """:func:`_conv_plan`'s key for calls of tensors, ints or tuples of ints (a string padding too), else None."""
    tensors = _tensors_key(input, weight, bias)
    params = (_ints_key(stride), padding if type(padding) is str else _ints_key(padding), _ints_key(dilation),
              _ints_key(groups))
    if tensors is None or None in params:
        return None
    return (name, n, *tensors, *params)


def _conv_tensors(name, n, input, weight, bias, weight_layout):
    """Check the tensors of a ``conv{n}d``/``conv_transpose{n}d`` call (``weight_layout`` names the weight's first
    two dims in the message); return (input shape with a batch dim, weight shape, unbatched)."""
    _check_tensor(name, "input", input, 1)
    _check_tensor(name, "weight", weight, 2)
    if bias is not None:
        _check_tensor(name, "bias", bias, 3)
    x_shape = input._data.shape
    if len(x_shape) not in (n + 1, n + 2):
        raise RuntimeError(f"Expected {n + 1}D (unbatched) or {n + 2}D (batched) input to {name}, but got input of "
                           f"size: {_fmt(x_shape)}")
    w_shape = weight._data.shape
    if len(w_shape) != n + 2:
        raise RuntimeError(f"{name}: expected weight to be {n + 2}-dimensional ({weight_layout}, *kernel_size), but "
                           f"got weight of size {_fmt(w_shape)}")
    unbatched = len(x_shape) == n + 1
    return ((1, *x_shape) if unbatched else x_shape), w_shape, unbatched


@_memoized(fast_key=_conv_key)
def _conv_plan(name, n, input, weight, bias, stride, padding, dilation, groups):
    """Check a ``conv{n}d`` call; return (stride, pad_lo, pad_hi, dilation, groups, unbatched, output shape)."""
    x_shape, w_shape, unbatched = _conv_tensors(name, n, input, weight, bias, "out_channels, in_channels / groups")
    stride = _expand_param(name, "stride", stride, 4, n)
    dilation = _expand_param(name, "dilation", dilation, 6, n)
    groups = _int_arg(name, "groups", groups, 7)
    if isinstance(padding, str):
        if padding == "valid":
            pad_lo = pad_hi = (0,) * n
        elif padding == "same":
            if any(s != 1 for s in stride):
                raise RuntimeError("padding='same' is not supported for strided convolutions")
            total = tuple(dilation[i] * (w_shape[2 + i] - 1) for i in range(n))
            pad_lo = tuple(t // 2 for t in total)
            pad_hi = tuple(t - t // 2 for t in total)
        else:
            raise RuntimeError(f"Invalid padding string: '{padding}'")
    else:
        pad_lo = pad_hi = _expand_param(name, "padding", padding, 5, n)
    out = _conv_shape(name, x_shape, input.dtype, w_shape, weight.dtype, bias, stride, pad_lo, pad_hi, dilation,
                      False, (0,) * n, groups)
    return stride, pad_lo, pad_hi, dilation, groups, unbatched, out[1:] if unbatched else out


def _shape_names(n):
    """The input's and the kernel's spatial sizes in the docstrings of the ``n``-d convolutions: ``iH, iW``."""
    return ", ".join(f"i{c}" for c in _LETTERS[n]), ", ".join(f"k{c}" for c in _LETTERS[n])


def _make_conv(n):
    name = f"conv{n}d"
    spatial, kernel = _shape_names(n)

    def meta(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
        out = _conv_plan(name, n, input, weight, bias, stride, padding, dilation, groups)[-1]
        return MetaArray(out, input._data.dtype)

    def cpu(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
        stride, pad_lo, pad_hi, dilation, groups, unbatched, _ = _conv_plan(name, n, input, weight, bias, stride,
                                                                            padding, dilation, groups)
        x = input._data[None] if unbatched else input._data
        out = _conv_forward(x, weight._data, None if bias is None else bias._data, stride, pad_lo, pad_hi, dilation,
                            groups)
        return out[0] if unbatched else out

    no_output_padding = (0,) * n

    def decomposition(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
        stride, pad_lo, pad_hi, dilation, groups, unbatched, _ = _conv_plan(name, n, input, weight, bias, stride,
                                                                            padding, dilation, groups)
        x = _E.unsqueeze(input, 0) if unbatched else input
        if pad_lo != pad_hi:  # 'same' with an even effective kernel: the extra zero goes after
            extra = []
            for i in reversed(range(n)):
                extra += [0, pad_hi[i] - pad_lo[i]]
            x = _E.pad(x, extra)

        def conv(x, w, b):
            # the prim of this module (not looked up through _E: a few tenths of a us per call), with the plan's
            # tuples of ints, which key its own plan cheaply (_convolution_key)
            return convolution(x, w, b, stride, pad_lo, dilation, False, no_output_padding, groups)

        out = _complex_by_parts(conv, x, weight, bias, n) if input.dtype.is_complex else conv(x, weight, bias)
        return _E.squeeze(out, 0) if unbatched else out

    meta.__name__ = name
    meta.__doc__ = f"""{n}-D convolution (cross-correlation, as in PyTorch) of ``input`` by ``weight``.

    Args:
        input (Tensor): (N, C_in, {spatial}) or unbatched (C_in, {spatial}); any dtype but bool.
        weight (Tensor): (C_out, C_in / groups, {kernel}), same dtype as ``input``.
        bias (Tensor, optional): (C_out,).
        stride (int or tuple[int]): step of the kernel, per spatial dim. Default 1.
        padding (int, tuple[int] or str): zeros added on both sides of each spatial dim,
            or ``"valid"`` (none) or ``"same"`` (output size = input size; stride 1 only,
            the odd extra zero goes after). Default 0.
        dilation (int or tuple[int]): spacing between kernel elements. Default 1.
        groups (int): input and output channels split into this many independent groups. Default 1.

    Returns:
        Tensor: ``(N, C_out, *out)`` (unbatched: ``(C_out, *out)``), with
        ``out = (in + 2 * padding - dilation * (k - 1) - 1) // stride + 1``. With no input
        channels (``C_in == 0``) each output is an empty sum: the bias, or zeros (PyTorch
        returns ``(N, 0, *out)`` there, dropping ``C_out`` and the bias).

    Raises:
        RuntimeError: for wrong dims, mismatched channels, groups, dtypes or bias,
            non-positive stride/dilation/groups, negative padding, an invalid padding
            string, ``"same"`` with a stride, or a kernel larger than the padded input.
        NotImplementedError: for bool inputs.
"""
    if n == 2:
        meta.__doc__ += """
    Example:
        >>> import ember
        >>> x = ember.arange(16.).reshape(1, 1, 4, 4)
        >>> w = ember.ones(1, 1, 2, 2)
        >>> ember.nn.functional.conv2d(x, w, stride=2)
        tensor([[[[10., 18.],
                  [42., 50.]]]])
"""
    op = defop(name, meta, cpu=cpu, category=COMPOSITE, decomposition=decomposition, tags=_NN)
    op.decomposition_checks = True  # the decomposition runs _conv_plan, whose checks are the meta function's
    return op


conv1d = _make_conv(1)
conv2d = _make_conv(2)
conv3d = _make_conv(3)


@_memoized
def _conv_transpose_plan(name, n, input, weight, bias, stride, padding, output_padding, groups, dilation):
    x_shape, w_shape, unbatched = _conv_tensors(name, n, input, weight, bias, "in_channels, out_channels / groups")
    stride = _expand_param(name, "stride", stride, 4, n)
    padding = _expand_param(name, "padding", padding, 5, n)
    output_padding = _expand_param(name, "output_padding", output_padding, 6, n)
    groups = _int_arg(name, "groups", groups, 7)
    dilation = _expand_param(name, "dilation", dilation, 8, n)
    out = _conv_shape(name, x_shape, input.dtype, w_shape, weight.dtype, bias, stride, padding, padding, dilation,
                      True, output_padding, groups)
    return stride, padding, output_padding, groups, dilation, unbatched, out[1:] if unbatched else out


def _make_conv_transpose(n):
    name = f"conv_transpose{n}d"
    spatial, kernel = _shape_names(n)

    def meta(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
        out = _conv_transpose_plan(name, n, input, weight, bias, stride, padding, output_padding, groups,
                                   dilation)[-1]
        return MetaArray(out, input._data.dtype)

    def cpu(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
        stride, padding, output_padding, groups, dilation, unbatched, _ = _conv_transpose_plan(
            name, n, input, weight, bias, stride, padding, output_padding, groups, dilation)
        x = input._data[None] if unbatched else input._data
        out = _conv_transpose_forward(x, weight._data, None if bias is None else bias._data, stride, padding,
                                      output_padding, dilation, groups)
        return out[0] if unbatched else out

    def decomposition(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
        stride, padding, output_padding, groups, dilation, unbatched, _ = _conv_transpose_plan(
            name, n, input, weight, bias, stride, padding, output_padding, groups, dilation)
        x = _E.unsqueeze(input, 0) if unbatched else input

        def conv(x, w, b):
            return convolution(x, w, b, stride, padding, dilation, True, output_padding, groups)

        out = _complex_by_parts(conv, x, weight, bias, n) if input.dtype.is_complex else conv(x, weight, bias)
        return _E.squeeze(out, 0) if unbatched else out

    meta.__name__ = name
    meta.__doc__ = f"""{n}-D transposed convolution ("deconvolution"): the adjoint of :func:`conv{n}d`.

    Args:
        input (Tensor): (N, C_in, {spatial}) or unbatched (C_in, {spatial}); a floating,
            complex or int64 dtype.
        weight (Tensor): (C_in, C_out / groups, {kernel}), same dtype as ``input``.
        bias (Tensor, optional): (C_out,).
        stride (int or tuple[int]): Default 1.
        padding (int or tuple[int]): ``dilation * (k - 1) - padding`` zeros pad each side
            of the input in the equivalent direct convolution. Default 0.
        output_padding (int or tuple[int]): extra size added to one side of the output,
            smaller than stride or dilation. Default 0.
        groups (int): Default 1.
        dilation (int or tuple[int]): Default 1.

    Returns:
        Tensor: ``(N, C_out, *out)`` (unbatched: ``(C_out, *out)``), with
        ``out = (in - 1) * stride - 2 * padding + dilation * (k - 1) + output_padding + 1``.

    Raises:
        RuntimeError: for wrong dims, mismatched channels, groups, dtypes or bias, bad
            parameters, or an output size below 1.
        NotImplementedError: for bool inputs and integer inputs other than int64.
"""
    if n == 2:
        meta.__doc__ += """
    Example:
        >>> import ember
        >>> x = ember.tensor([[[[1., 2.], [3., 4.]]]])
        >>> ember.nn.functional.conv_transpose2d(x, ember.ones(1, 1, 2, 2), stride=2)
        tensor([[[[1., 1., 2., 2.],
                  [1., 1., 2., 2.],
                  [3., 3., 4., 4.],
                  [3., 3., 4., 4.]]]])
"""
    return defop(name, meta, cpu=cpu, category=COMPOSITE, decomposition=decomposition, tags=_NN)


conv_transpose1d = _make_conv_transpose(1)
conv_transpose2d = _make_conv_transpose(2)
conv_transpose3d = _make_conv_transpose(3)
