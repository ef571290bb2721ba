"""CUDA kernels of convolution, transposed convolution, im2col and fold (``ember._ops.nn_conv``, ``nn_fold``).

The generic path runs over the arrays' namespace ``xp`` (CuPy on the device, numpy in the tests that check
it against the CPU kernels); float32/float64 convolutions take the fast path of :mod:`.conv_fast` first.
:func:`register` installs the kernels when the CUDA backend initialises; :func:`convolution_backward_cuda`
is the fused backward that the derivative of ``convolution`` calls. CuPy is imported only inside the
functions that launch device kernels, so this module imports without a GPU.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ..._ops._array_module import array_namespace as _array_namespace
from ..._ops._registry import registry
from ..._ops._spatial import _compute, _lift3
from ..._ops.nn_conv import _conv_plan, _conv_transpose_plan, _convolution_plan, _transpose_geometry
from ..._ops.nn_fold import _fold_plan, _im2col_plan
from ..._tensor import Tensor
from .conv_fast import _fast_conv_backward, _fast_conv_forward

__all__ = ["register", "kernels", "convolution_backward_cuda"]

#: Whether float convolutions on CuPy arrays take the fast path of :mod:`.conv_fast` (on by default).
_FAST_CUDA = True


# -- convolution, im2col and fold over xp (numpy or CuPy): the CUDA kernels -------------------------------
#
# The CPU keeps its ember._C kernels (ember._ops.nn_conv); CuPy arrays take these paths, registered as the "cuda"
# kernels of convolution, conv{1,2,3}d, conv_transpose{1,2,3}d, im2col and fold. They use only the array
# namespace ``xp`` of their inputs, so they run on numpy arrays too (tests/cuda/test_cuda_conv.py checks
# them there against the CPU kernels). A convolution is im2col (a strided window view of the zero-padded
# input, copied once into columns ordered (group, C / groups * taps, N * positions)) and one batched matrix
# product over the groups: cuBLAS for floating and complex dtypes, CuPy's integer GEMM kernel for integers
# (exact, wrapping like numpy's). float16 computes in float32, as on CPU. A transposed convolution is the
# product the other way round followed by col2im, which fold shares: one strided add per kernel tap.
# That generic path costs about five kernel launches per forward convolution, whatever its size (small CNNs
# are bound by the host's time per launch); float convolutions take the fast path of .conv_fast instead (three
# launches forward, and a fused backward for the derivative).


# On CuPy arrays, im2col and col2im can each run as one CuPy ElementwiseKernel (zero padding folded into
# the index arithmetic, any input strides) instead of a padded copy plus a layout copy, or one add per tap.
# tests/cuda/test_cuda_conv.py's test_fused_* check them against CPU, and passed on the H200 (2026-11-30);
# they stay off until their speed has been measured against the default path. Float convolutions don't reach
# them while _FAST_CUDA is on (the RawKernels of .conv_fast take them first).
_FUSED_CUDA = False
_cuda_kernels = {}  # name -> compiled cupy.ElementwiseKernel

_IM2COL_PARAMS = ("raw T x, int64 C, int64 N, int64 D, int64 H, int64 W, int64 KD, int64 KH, int64 KW, int64 OD, "
                  "int64 OH, int64 OW, int64 sd, int64 sh, int64 sw, int64 pd, int64 ph, int64 pw, int64 dd, int64 dh, "
                  "int64 dw, int64 xn, int64 xc, int64 xd, int64 xh, int64 xw")
# element i of the columns (C, KD, KH, KW, N, OD, OH, OW): input element (n, c, o * s - p + k * d) or 0 outside
_IM2COL_BODY = """
    long long r = i;
    const long long ow = r % OW; r /= OW;
    const long long oh = r % OH; r /= OH;
    const long long od = r % OD; r /= OD;
    const long long n = r % N; r /= N;
    const long long kw = r % KW; r /= KW;
    const long long kh = r % KH; r /= KH;
    const long long kd = r % KD;
    const long long c = r / KD;
    const long long z = od * sd - pd + kd * dd;
    const long long y = oh * sh - ph + kh * dh;
    const long long q = ow * sw - pw + kw * dw;
    if (z < 0 || z >= D || y < 0 || y >= H || q < 0 || q >= W) {
        col = T(0);
    } else {
        col = x[n * xn + c * xc + z * xd + y * xh + q * xw];
    }
"""
_COL2IM_PARAMS = ("raw T cols, int64 M2, int64 D, int64 H, int64 W, int64 KD, int64 KH, int64 KW, int64 BD, "
                  "int64 BH, int64 BW, int64 sd, int64 sh, int64 sw, int64 pd, int64 ph, int64 pw, int64 dd, int64 dh, "
                  "int64 dw, int64 ckd, int64 ckh, int64 ckw, int64 cm1, int64 cm2, int64 cbd, int64 cbh, int64 cbw")
# element i of the images (M1, M2, D, H, W): the sum over the taps k whose block b has b * s - p + k * d there
_COL2IM_BODY = """
    long long r = i;
    const long long q = r % W; r /= W;
    const long long y = r % H; r /= H;
    const long long z = r % D; r /= D;
    const long long m2 = r % M2;
    const long long m1 = r / M2;
    const long long base = m1 * cm1 + m2 * cm2;
    T acc = T(0);
    for (long long kd = 0; kd < KD; ++kd) {
        const long long tz = z + pd - kd * dd;
        if (tz < 0 || tz % sd != 0 || tz / sd >= BD) continue;
        for (long long kh = 0; kh < KH; ++kh) {
            const long long ty = y + ph - kh * dh;
            if (ty < 0 || ty % sh != 0 || ty / sh >= BH) continue;
            for (long long kw = 0; kw < KW; ++kw) {
                const long long tq = q + pw - kw * dw;
                if (tq < 0 || tq % sw != 0 || tq / sw >= BW) continue;
                acc += cols[base + kd * ckd + kh * ckh + kw * ckw
                            + (tz / sd) * cbd + (ty / sh) * cbh + (tq / sw) * cbw];
            }
        }
    }
    img = acc;
"""


def _cuda_kernel(name):
    kernel = _cuda_kernels.get(name)
    if kernel is None:
        import cupy

        params, out, body = {"im2col": (_IM2COL_PARAMS, "T col", _IM2COL_BODY),
                             "col2im": (_COL2IM_PARAMS, "T img", _COL2IM_BODY)}[name]
        kernel = _cuda_kernels[name] = cupy.ElementwiseKernel(params, out, body, f"ember_{name}")
    return kernel


def _cuda_flat(cp, a):
    """``a``'s memory span as a 1-D CuPy array, and ``a``'s element strides into it (a copy's, if any is negative)."""
    if any(s < 0 for s in a.strides):
        a = cp.ascontiguousarray(a)
    strides = tuple(s // a.itemsize for s in a.strides)
    span = 1 + sum((d - 1) * s for d, s in zip(a.shape, strides))
    return cp.ndarray((span,), a.dtype, memptr=a.data, strides=(a.itemsize,)), strides


def _cuda_columns(x, kernel, stride, pad_lo, dilation, out):
    """The columns (C, *kernel, N, *out) of CuPy x (N, C, *spatial), non-empty, in one kernel launch."""
    import cupy as cp

    flat, st = _cuda_flat(cp, x)
    cols = cp.empty((x.shape[1], *kernel, x.shape[0], *out), x.dtype)
    _cuda_kernel("im2col")(flat, x.shape[1], x.shape[0], *_lift3(x.shape[2:], 1), *_lift3(kernel, 1), *_lift3(out, 1),
                           *_lift3(stride, 1), *_lift3(pad_lo, 0), *_lift3(dilation, 1), st[0], st[1],
                           *_lift3(st[2:], 0), cols)
    return cols


def _cuda_col2im(cols, image, kernel, blocks, stride, pad, dilation):
    """``_xp_col2im`` of CuPy ``cols`` (*kernel, *lead, *blocks), 1 or 2 lead dims: one gather launch, no atomics."""
    import cupy as cp

    n = len(kernel)
    lead = cols.shape[n:cols.ndim - n]
    flat, st = _cuda_flat(cp, cols)
    lead_strides = (0,) * (2 - len(lead)) + st[n:n + len(lead)]
    img = cp.empty((*lead, *image), cols.dtype)
    _cuda_kernel("col2im")(flat, lead[-1], *_lift3(image, 1), *_lift3(kernel, 1), *_lift3(blocks, 1),
                           *_lift3(stride, 1), *_lift3(pad, 0), *_lift3(dilation, 1), *_lift3(st[:n], 0),
                           *lead_strides, *_lift3(st[n + len(lead):], 0), img)
    return img



def convolution_backward_cuda(grad, input, weight, stride, padding, dilation, groups, output_mask):
    """The gradients of ``convolution(input, weight, bias, stride, padding, dilation, False, 0, groups)`` on CUDA
    tensors, for the derivative of ``convolution`` in a backward pass that records nothing.

    Args:
        grad (Tensor): the output gradient (N, C_out, *out).
        input (Tensor): (N, C, *spatial); weight (Tensor): (C_out, C, *kernel).
        stride, padding, dilation (tuple[int]): one int per spatial dim.
        groups (int): only 1 is taken.
        output_mask (sequence of 3 bool): which of the input, weight and bias gradients to compute.

    Returns:
        ``(d input, d weight, d bias)``: new CUDA tensors, None where ``output_mask`` is False; or None when
        the fast path does not take the call (CPU tensors, groups, dtypes other than float32/float64, empty
        tensors, or ``_FAST_CUDA`` off): the caller then runs the generic formulas.
    """
    g = grad._data
    if type(g) is np.ndarray or not _FAST_CUDA or groups != 1:
        return None
    xp = _namespace(g, g)
    if xp is np:
        return None
    grads = _fast_conv_backward(xp, g, input._data, weight._data, stride, padding, dilation, output_mask)
    if grads is None:
        return None
    device = grad._device
    gx, gw, gb = grads
    return (None if gx is None else Tensor._make(gx, device), None if gw is None else Tensor._make(gw, device),
            None if gb is None else Tensor._make(gb, device))


def _xp_as_strided(xp, x, shape, strides):
    """A view of ``x`` with ``shape`` and byte ``strides``, in ``x``'s namespace; never written through."""
    if xp is np:
        return as_strided(x, shape, strides, writeable=False)
    from cupy.lib.stride_tricks import as_strided as device_as_strided

    return device_as_strided(x, shape, strides)


def _xp_windows(xp, x, kernel, stride, pad_lo, pad_hi, dilation, out):
    """The sliding windows of ``x`` (N, C, *spatial) as a view (N, C, *kernel, *out).

    With padding, the view reads a zero-padded copy of ``x``; ``x`` itself is never written.
    """
    n = len(kernel)
    if any(pad_lo) or any(pad_hi):
        padded = xp.zeros((*x.shape[:2], *(x.shape[2 + i] + pad_lo[i] + pad_hi[i] for i in range(n))), x.dtype)
        padded[(slice(None), slice(None), *(slice(pad_lo[i], pad_lo[i] + x.shape[2 + i]) for i in range(n)))] = x
        x = padded
    elif any(s < 0 for s in x.strides):
        x = xp.ascontiguousarray(x)
    st = x.strides
    strides = (st[0], st[1], *(st[2 + i] * dilation[i] for i in range(n)), *(st[2 + i] * stride[i] for i in range(n)))
    return _xp_as_strided(xp, x, (*x.shape[:2], *kernel, *out), strides)


def _xp_col2im(xp, cols, image, kernel, blocks, stride, pad, dilation):
    """Sum ``cols`` (*kernel, *lead, *blocks), any strides, into new images (*lead, *image).

    Kernel tap ``k`` of block ``l`` lands at ``l * stride - pad + k * dilation`` in each spatial dim;
    one strided in-place add per tap (bool adds are logical or, as on CPU).
    """
    n = len(kernel)
    lead = cols.shape[n:cols.ndim - n]
    if _FUSED_CUDA and xp is not np and 1 <= len(lead) <= 2:
        return _cuda_col2im(cols, image, kernel, blocks, stride, pad, dilation)
    full = tuple(max((blocks[i] - 1) * stride[i] + dilation[i] * (kernel[i] - 1) + 1, pad[i] + image[i])
                 for i in range(n))
    buffer = xp.zeros((*lead, *full), cols.dtype)
    head = (slice(None),) * len(lead)
    for offset in np.ndindex(*kernel):
        target = buffer[(*head, *(slice(offset[i] * dilation[i], offset[i] * dilation[i] + (blocks[i] - 1) * stride[i]
                                        + 1, stride[i]) for i in range(n)))]
        xp.add(target, cols[offset], out=target)
    return xp.ascontiguousarray(buffer[(*head, *(slice(pad[i], pad[i] + image[i]) for i in range(n)))])


def _xp_group_matmul(xp, a, b):
    """``a @ b`` of stacks (groups, M, K) and (groups, K, L): one batched GEMM, or per group for integers on GPU.

    CuPy's 2-D product runs an exact integer GEMM kernel (wrapping like numpy's); some CuPy versions compute
    batched integer products in floating point, so integers on the GPU take one 2-D product per group.
    """
    if xp is np or a.dtype.kind not in "biu":
        return xp.matmul(a, b)
    if a.shape[0] == 1:
        return xp.matmul(a[0], b[0])[None]
    return xp.stack([xp.matmul(a[g], b[g]) for g in range(a.shape[0])])


#: array type -> the namespace of its arrays (numpy or CuPy), as array_namespace answered for the first pair of
#: that type: its check of a CuPy array (``__cuda_array_interface__``) builds a dict, the dtype's ``descr`` in it,
#: on every call, a few us a convolution.
_NAMESPACES = {np.ndarray: np}


def _namespace(x, w):
    """``array_namespace(x, w)``, answered by the arrays' type once known (both of one type)."""
    t = type(x)
    xp = _NAMESPACES.get(t)
    if xp is None or type(w) is not t:
        xp = _array_namespace(x, w)
        if type(w) is t:
            _NAMESPACES[t] = xp
    return xp


def _xp_conv_forward(x, w, b, stride, pad_lo, pad_hi, dilation, groups):
    """Convolution of x (N, C, *spatial) by w (C_out, C / groups, *kernel), plus b (C_out,) or None; any namespace.

    Returns a new C-contiguous array of ``x``'s dtype and namespace.
    """
    xp = _namespace(x, w)
    if _FAST_CUDA and xp is not np:
        result = _fast_conv_forward(xp, x, w, b, stride, pad_lo, pad_hi, dilation, groups)
        if result is not None:
            return result
    dtype = x.dtype
    x, w = _compute(x), _compute(w)
    n = w.ndim - 2
    N, C = x.shape[:2]
    out_channels = w.shape[0]
    kernel = w.shape[2:]
    out = tuple((x.shape[2 + i] + pad_lo[i] + pad_hi[i] - dilation[i] * (kernel[i] - 1) - 1) // stride[i] + 1
                for i in range(n))
    if N == 0 or out_channels == 0 or C == 0 or 0 in out:
        result = xp.zeros((N, out_channels, *out), x.dtype)
    else:
        cpg, opg = C // groups, out_channels // groups
        K, P = math.prod(kernel), math.prod(out)
        # columns (C, *kernel, N, *out), seen as (groups, C / groups * K, N * P): channel-and-tap rows, every
        # output position of the batch a column
        if _FUSED_CUDA and xp is not np:
            cols = _cuda_columns(x, kernel, stride, pad_lo, dilation, out)
        else:
            if K == 1 and not any(pad_lo) and not any(pad_hi) and all(s == 1 for s in stride):
                windows = x[(slice(None), slice(None), *(None,) * n)]  # a 1x1 kernel: the input is its own window
            else:
                windows = _xp_windows(xp, x, kernel, stride, pad_lo, pad_hi, dilation, out)
            cols = xp.ascontiguousarray(windows.transpose(1, *range(2, 2 + n), 0, *range(2 + n, 2 + 2 * n)))
        product = _xp_group_matmul(xp, w.reshape(groups, opg, cpg * K), cols.reshape(groups, cpg * K, N * P))
        result = product.reshape(out_channels, N, *out).swapaxes(0, 1)
    if b is not None:
        result = result + _compute(b).reshape((out_channels,) + (1,) * n)  # also lays out (N, C_out, ...)
    return xp.ascontiguousarray(result).astype(dtype, copy=False)


def _xp_conv_transpose_forward(x, w, b, stride, padding, output_padding, dilation, groups):
    """Transposed convolution of x (N, C, *spatial) by w (C, C_out / groups, *kernel); any namespace.

    The matrix product gives every kernel tap's contribution of every input position (columns), which
    col2im sums into the output. Returns a new C-contiguous array of ``x``'s dtype and namespace.
    """
    xp = _array_namespace(x, w)
    dtype = x.dtype
    x, w = _compute(x), _compute(w)
    n, N, C, opg, out_channels, kernel, blocks, out = _transpose_geometry(
        x.shape, w.shape, stride, padding, output_padding, dilation, groups)
    if N == 0 or out_channels == 0 or C == 0:
        result = xp.zeros((N, out_channels, *out), x.dtype)
    else:
        cpg = C // groups
        K, L = math.prod(kernel), math.prod(blocks)
        wm = w.reshape(groups, cpg, opg * K).swapaxes(1, 2)  # (groups, C_out / groups * K, C / groups)
        xm = xp.ascontiguousarray(x.reshape(N, groups, cpg, L).transpose(1, 2, 0, 3)).reshape(groups, cpg, N * L)
        cols = _xp_group_matmul(xp, wm, xm).reshape(out_channels, *kernel, N, *blocks)
        cols = cols.transpose(*range(1, 1 + n), 1 + n, 0, *range(2 + n, 2 + 2 * n))  # (*kernel, N, C_out, *blocks)
        result = _xp_col2im(xp, cols, out, kernel, blocks, stride, padding, dilation)
    if b is not None:
        result = result + _compute(b).reshape((out_channels,) + (1,) * n)
    return xp.ascontiguousarray(result).astype(dtype, copy=False)


def _convolution_cuda(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    stride, padding, dilation, transposed, output_padding, groups, _ = _convolution_plan(
        input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
    b = None if bias is None else bias._data
    if transposed:
        return _xp_conv_transpose_forward(input._data, weight._data, b, stride, padding, output_padding, dilation,
                                          groups)
    return _xp_conv_forward(input._data, weight._data, b, stride, padding, padding, dilation, groups)


def _make_conv_cuda(n):
    """The fused kernel of ``conv{n}d`` over xp (complex inputs directly, unlike the prim)."""
    name = f"conv{n}d"

    def kernel(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
        stride, pad_lo, pad_hi, dilation, groups, unbatched, _ = _conv_plan(name, n, input, weight, bias, stride,
                                                                            padding, dilation, groups)
        x = input._data[None] if unbatched else input._data
        out = _xp_conv_forward(x, weight._data, None if bias is None else bias._data, stride, pad_lo, pad_hi,
                               dilation, groups)
        return out[0] if unbatched else out

    kernel.__name__ = f"{name}_cuda"
    return kernel


def _make_conv_transpose_cuda(n):
    """The fused kernel of ``conv_transpose{n}d`` over xp."""
    name = f"conv_transpose{n}d"

    def kernel(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
        stride, padding, output_padding, groups, dilation, unbatched, _ = _conv_transpose_plan(
            name, n, input, weight, bias, stride, padding, output_padding, groups, dilation)
        x = input._data[None] if unbatched else input._data
        out = _xp_conv_transpose_forward(x, weight._data, None if bias is None else bias._data, stride, padding,
                                         output_padding, dilation, groups)
        return out[0] if unbatched else out

    kernel.__name__ = f"{name}_cuda"
    return kernel


def _im2col_cuda(input, kernel_size, dilation=1, padding=0, stride=1):
    k, d, p, s, blocks, out = _im2col_plan(input, kernel_size, dilation, padding, stride)
    x = input._data
    xp = _array_namespace(x)
    if x.ndim == 3:
        x = x[None]
    if x.size == 0:
        return xp.zeros(out, x.dtype)
    return xp.ascontiguousarray(_xp_windows(xp, x, k, s, p, p, d, blocks)).reshape(out)


def _fold_cuda(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    k, d, p, s, blocks, out_size, out = _fold_plan(input, output_size, kernel_size, dilation, padding, stride)
    x = _compute(input._data)
    xp = _array_namespace(x)
    if x.size == 0:
        return xp.zeros(out, input._data.dtype)
    lead = out[:-2]  # (N, C) or (C,)
    cols = x.reshape((*lead, *k, *blocks))
    m = len(lead)
    cols = cols.transpose(m, m + 1, *range(m), m + 2, m + 3)  # (kH, kW, *lead, *blocks)
    return _xp_col2im(xp, cols, out_size, k, blocks, s, p, d).astype(input._data.dtype, copy=False)


def kernels():
    """The CUDA kernels of this module by op name (they run on numpy arrays too, where the tests check them)."""
    table = {"convolution": _convolution_cuda, "im2col": _im2col_cuda, "fold": _fold_cuda}
    for n in (1, 2, 3):
        table[f"conv{n}d"] = _make_conv_cuda(n)
        table[f"conv_transpose{n}d"] = _make_conv_transpose_cuda(n)
    return table


def register():
    """Install the kernels above as the CUDA kernels of the convolution, im2col and fold ops (once: a second
    registration of an op's kernel raises; ember.cuda.kernels.register guards it)."""
    for name, kernel in kernels().items():
        registry[name].register_kernel("cuda", kernel)
    # _convolution_plan does every check of the meta function: the dispatcher may skip the meta call on cuda
    registry["convolution"].register_checked_kernel("cuda", _convolution_cuda)
