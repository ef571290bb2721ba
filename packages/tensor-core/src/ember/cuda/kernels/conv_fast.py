"""The fast CUDA path of float convolutions: NVRTC-compiled im2col, layout and col2im kernels around cuBLAS.

Used by :mod:`.conv` while its ``_FAST_CUDA`` is on. CuPy is reached only through the array namespace
``xp`` that the callers pass, so this module imports without a GPU.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from ..._ops._nn_common import _F32, _HALF_TYPES
from ..._ops._spatial import _F64, _lift3

__all__ = []


# The fast CUDA path of float convolutions (float32 and float64; float16/bfloat16 computed in float32), on by
# default. Every CuPy call costs the host about 5-10 us, and a small CNN's step is bound by that host time, so
# a convolution here is as few calls as it can be:
#
# * forward: one im2col launch (the columns (C * K, N * P) gathered from the unpadded input, any strides, the
#   padding done by index arithmetic), one GEMM (one direct cuBLAS call, _fast_gemm), one launch that lays the
#   product (C_out, N, P) out as (N, C_out, P) and adds the bias;
# * backward (groups 1, for the derivative of ``convolution`` in a backward pass that records nothing): one
#   launch that lays the output gradient out as rows (C_out, N * P) and sums each row (the bias gradient),
#   one im2col launch and one GEMM for the weight gradient (rows @ columns^T: the weight's own layout), and
#   one GEMM (weight^T @ rows: every tap's contribution) and one col2im launch (a gather, no atomics) for
#   the input gradient.
#
# The kernels are CUDA C compiled by NVRTC (cupy.RawModule), one module per element type and index width.
_FAST_TYPES = {_F32: "float", _F64: "double"}
_FAST_THREADS = 256  # threads per block (the row kernel's reduction assumes exactly this many)
_FAST_MAX_BLOCKS = 1 << 16  # the element-wise kernels loop over the rest (a grid-stride loop)
_INT32_LIMIT = 2**31 - 1 - _FAST_THREADS * _FAST_MAX_BLOCKS  # 32-bit indexing below this many elements
_fast_modules = {}  # (device, dtype, 64-bit indexing) -> the functions of _FAST_KERNELS, or None (no build)

_FAST_SOURCE = r"""
// T: the element type (float or double); I: the index type (int, or long long for large arrays).
//
// Each kernel takes its scalars (sizes, strides, paddings, flags: what its launch plan fixes) as ONE struct
// passed by value: CuPy converts every launch argument on the host (0.3-0.5 us each), so one struct costs
// what one scalar does. Every field is an I, in the order of conv_fast._FAST_FIELDS (the host packs the
// values as consecutive I words: no padding, offsets k * sizeof(I)); the kernels copy them into locals
// and compute as with separate arguments.

struct ConvIm2colArgs {
    I total, N, D, H, W, KD, KH, KW, OD, OH, OW, sd, sh, sw, pd, ph, pw, dd, dh, dw, xn, xc, xd, xh, xw;
};
struct ConvOutputArgs {
    I total, CO, N, P, has_bias;
};
struct ConvGradRowsArgs {
    I CO, N, P;
};
struct ConvCol2imArgs {
    I total, C, N, D, H, W, KD, KH, KW, OD, OH, OW, sd, sh, sw, pd, ph, pw, dd, dh, dw;
};

// cols (C, KD, KH, KW, N, OD, OH, OW), C-contiguous: element (c, k, n, o) is the input element
// (n, c, o * s - p + k * d) of x (N, C, D, H, W) with element strides xn..xw, or 0 outside the input.
extern "C" __global__ void ember_conv_im2col(
        const T* __restrict__ x, T* __restrict__ cols, const ConvIm2colArgs a) {
    const I total = a.total, N = a.N, D = a.D, H = a.H, W = a.W, KD = a.KD, KH = a.KH, KW = a.KW;
    const I OD = a.OD, OH = a.OH, OW = a.OW, sd = a.sd, sh = a.sh, sw = a.sw, pd = a.pd, ph = a.ph, pw = a.pw;
    const I dd = a.dd, dh = a.dh, dw = a.dw, xn = a.xn, xc = a.xc, xd = a.xd, xh = a.xh, xw = a.xw;
    const I step = (I)blockDim.x * (I)gridDim.x;
    for (I i = (I)blockIdx.x * (I)blockDim.x + (I)threadIdx.x; i < total; i += step) {
        I r = i;
        const I ow = r % OW; r /= OW;
        const I oh = r % OH; r /= OH;
        const I od = r % OD; r /= OD;
        const I n = r % N; r /= N;
        const I kw = r % KW; r /= KW;
        const I kh = r % KH; r /= KH;
        const I kd = r % KD;
        const I c = r / KD;
        const I z = od * sd - pd + kd * dd;
        const I y = oh * sh - ph + kh * dh;
        const I q = ow * sw - pw + kw * dw;
        T v = T(0);
        if (z >= 0 && z < D && y >= 0 && y < H && q >= 0 && q < W) {
            v = x[n * xn + c * xc + z * xd + y * xh + q * xw];
        }
        cols[i] = v;
    }
}

// out (N, CO, P) = product (CO, N, P) with its first two dims swapped, plus bias[co] when has_bias.
extern "C" __global__ void ember_conv_output(
        const T* __restrict__ product, const T* __restrict__ bias, T* __restrict__ out, const ConvOutputArgs a) {
    const I total = a.total, CO = a.CO, N = a.N, P = a.P, has_bias = a.has_bias;
    const I step = (I)blockDim.x * (I)gridDim.x;
    for (I i = (I)blockIdx.x * (I)blockDim.x + (I)threadIdx.x; i < total; i += step) {
        const I p = i % P;
        const I r = i / P;
        const I co = r % CO;
        const I n = r / CO;
        T v = product[(co * N + n) * P + p];
        if (has_bias) {
            v += bias[co];
        }
        out[i] = v;
    }
}

// One block of THREADS threads per output channel co: rows (CO, N * P) = gy (N, CO, P) with its first two
// dims swapped, and sums[co] = the sum of row co (each thread's strided partial sum, then a tree).
extern "C" __global__ void ember_conv_grad_rows(
        const T* __restrict__ gy, T* __restrict__ rows, T* __restrict__ sums, const ConvGradRowsArgs a) {
    const I CO = a.CO, N = a.N, P = a.P;
    __shared__ T part[THREADS];
    const I co = (I)blockIdx.x;
    const I length = N * P;
    T acc = T(0);
    for (I j = (I)threadIdx.x; j < length; j += THREADS) {
        const I n = j / P;
        const T v = gy[(n * CO + co) * P + (j - n * P)];
        rows[co * length + j] = v;
        acc += v;
    }
    part[threadIdx.x] = acc;
    __syncthreads();
    for (int s = THREADS / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) {
            part[threadIdx.x] += part[threadIdx.x + s];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        sums[co] = part[0];
    }
}

// img (N, C, D, H, W), C-contiguous: element (n, c, z) sums cols (C, KD, KH, KW, N, OD, OH, OW) over the
// taps k (kd, kh, kw ascending) whose output position o has o * s - p + k * d == z.
extern "C" __global__ void ember_conv_col2im(
        const T* __restrict__ cols, T* __restrict__ img, const ConvCol2imArgs a) {
    const I total = a.total, C = a.C, N = a.N, D = a.D, H = a.H, W = a.W, KD = a.KD, KH = a.KH, KW = a.KW;
    const I OD = a.OD, OH = a.OH, OW = a.OW, sd = a.sd, sh = a.sh, sw = a.sw, pd = a.pd, ph = a.ph, pw = a.pw;
    const I dd = a.dd, dh = a.dh, dw = a.dw;
    const I P = OD * OH * OW;
    const I step = (I)blockDim.x * (I)gridDim.x;
    for (I i = (I)blockIdx.x * (I)blockDim.x + (I)threadIdx.x; i < total; i += step) {
        I r = i;
        const I q = r % W; r /= W;
        const I y = r % H; r /= H;
        const I z = r % D; r /= D;
        const I c = r % C;
        const I n = r / C;
        T acc = T(0);
        for (I kd = 0; kd < KD; ++kd) {
            const I tz = z + pd - kd * dd;
            if (tz < 0 || tz % sd != 0 || tz / sd >= OD) continue;
            for (I kh = 0; kh < KH; ++kh) {
                const I ty = y + ph - kh * dh;
                if (ty < 0 || ty % sh != 0 || ty / sh >= OH) continue;
                for (I kw = 0; kw < KW; ++kw) {
                    const I tq = q + pw - kw * dw;
                    if (tq < 0 || tq % sw != 0 || tq / sw >= OW) continue;
                    acc += cols[(((c * KD + kd) * KH + kh) * KW + kw) * N * P + n * P
                                + ((tz / sd) * OH + ty / sh) * OW + tq / sw];
                }
            }
        }
        img[i] = acc;
    }
}
"""
_FAST_KERNELS = ("im2col", "output", "grad_rows", "col2im")

#: The fields of each kernel's by-value struct (``Conv*Args`` in ``_FAST_SOURCE``), in their declaration order,
#: every one of the index type I. tests/cuda/test_cuda_conv.py checks this layout against g++'s (offsetof).
_FAST_FIELDS = {
    "im2col": ("total", "N", "D", "H", "W", "KD", "KH", "KW", "OD", "OH", "OW", "sd", "sh", "sw", "pd", "ph", "pw",
               "dd", "dh", "dw", "xn", "xc", "xd", "xh", "xw"),
    "output": ("total", "CO", "N", "P", "has_bias"),
    "grad_rows": ("CO", "N", "P"),
    "col2im": ("total", "C", "N", "D", "H", "W", "KD", "KH", "KW", "OD", "OH", "OW", "sd", "sh", "sw", "pd", "ph",
               "pw", "dd", "dh", "dw"),
}


def _fast_struct_dtype(kernel, index):
    """The numpy structured dtype of ``kernel``'s argument struct with index type ``index`` (np.int32 or
    np.int64): one field per name of ``_FAST_FIELDS[kernel]``, consecutive, as the C struct lays them out."""
    return np.dtype([(name, index) for name in _FAST_FIELDS[kernel]])


def _fast_struct(kernel, index, values):
    """``kernel``'s by-value struct argument: ``values`` (one per field of ``_FAST_FIELDS[kernel]``, in order).

    Args:
        kernel (str): a name of ``_FAST_KERNELS``.
        index (type): np.int32 or np.int64, the kernels' index type I.
        values (sequence of int): the fields' values.

    Returns:
        numpy.ndarray: one element of a void dtype of the struct's size (its bytes), read-only. CuPy passes a
        numpy array of one element by value (its bytes copied into the launch). It is a void dtype rather than
        the structured one because CuPy reads the array's address from ``__array_interface__``, which lists
        every field of a structured dtype (about 13 us a launch, against 1).

    Raises:
        OverflowError: a value out of ``index``'s range (as ``index(value)``).
        ValueError: not one value per field.
    """
    dtype = _fast_struct_dtype(kernel, index)
    if len(values) != len(dtype.names):
        raise ValueError(f"{kernel}: {len(values)} values for the {len(dtype.names)} fields {dtype.names}")
    record = np.array([tuple(map(index, values))], dtype)
    struct = record.view(np.dtype((np.void, dtype.itemsize)))
    struct.flags.writeable = False  # shared by every launch of its plan
    return struct


def _fast_kernels(xp, device, dtype, wide):
    """The compiled kernels of ``_FAST_SOURCE`` for ``dtype`` (float32/float64) on GPU ``device``, with 64-bit
    indexing when ``wide``: a tuple (im2col, output, grad_rows, col2im), or None when they did not compile
    (then every call takes the generic path, after one warning)."""
    key = (device, dtype, wide)
    kernels = _fast_modules.get(key, False)
    if kernels is False:
        code = (f"#define T {_FAST_TYPES[dtype]}\n#define I {'long long' if wide else 'int'}\n"
                f"#define THREADS {_FAST_THREADS}\n{_FAST_SOURCE}")
        try:
            module = xp.RawModule(code=code)
            kernels = tuple(module.get_function(f"ember_conv_{name}") for name in _FAST_KERNELS)
        except Exception as exc:  # a kernel that does not build leaves its calls to the generic path
            warnings.warn(f"ember: the CUDA convolution kernels for {dtype} did not compile ({type(exc).__name__}: "
                          f"{exc}); convolutions take the generic path", RuntimeWarning, stacklevel=4)
            kernels = None
        _fast_modules[key] = kernels
    return kernels


def _fast_device(xp, *arrays):
    """The current GPU when every array is on it (the kernels launch there), else None."""
    device = xp.cuda.runtime.getDevice()
    for a in arrays:
        if a.data.device_id != device:
            return None
    return device


def _fast_grid(total):
    return (min((total + _FAST_THREADS - 1) // _FAST_THREADS, _FAST_MAX_BLOCKS),)


def _fast_im2col_args(x_shape, x_strides, item, kernel, stride, pad_lo, dilation, out, index):
    """The grid and the struct argument of ``ember_conv_im2col`` (after ``x`` and ``cols``)."""
    N, C = x_shape[:2]
    total = C * math.prod(kernel) * N * math.prod(out)
    values = (total, N, *_lift3(x_shape[2:], 1), *_lift3(kernel, 1), *_lift3(out, 1), *_lift3(stride, 1),
              *_lift3(pad_lo, 0), *_lift3(dilation, 1), x_strides[0] // item, x_strides[1] // item,
              *_lift3([s // item for s in x_strides[2:]], 0))
    return _fast_grid(total), _fast_struct("im2col", index, values)


def _fast_index(*sizes):
    """(64-bit indexing?, the numpy type of the index arguments) for kernels whose arrays hold ``sizes`` elements."""
    wide = max(sizes) > _INT32_LIMIT
    return wide, (np.int64 if wide else np.int32)


def _fast_span(shape, strides, item):
    """Elements from an array's first element to its farthest one, plus one (what its indexing reaches)."""
    return 1 + sum((d - 1) * abs(s) for d, s in zip(shape, strides)) // item


# Launch plans (shapes, grids and the kernels' struct arguments), by the arrays' metadata and the convolution's
# parameters: a training loop repeats a handful of calls. None marks a call the fast path does not take. A call
# reads its plan and the compiled kernels from two dicts and launches with the plan's structs: nothing per call
# depends on the sizes but the look-ups.
_fast_plans = {}
_FAST_PLANS_MAX = 512


def _fast_forward_plan(x_shape, x_strides, dtype, w_shape, w_dtype, b_dtype, stride, pad_lo, pad_hi, dilation,
                       groups):
    """The launch plan of :func:`_fast_conv_forward`, or None for a call it does not take: a tuple (the compute
    dtype, the kernels' variant (compute dtype, 64-bit indexing), the columns' shape, im2col's grid
    and struct, the weight's and the columns' matrix shapes for the GEMM (the columns' None when 2-D), the output's
    shape, the output kernel's grid and struct)."""
    compute = _F32 if dtype in _HALF_TYPES else dtype
    if compute not in _FAST_TYPES or w_dtype != dtype or (b_dtype is not None and b_dtype != dtype):
        return None
    n = len(w_shape) - 2
    N, C = x_shape[:2]
    out_channels = w_shape[0]
    kernel = w_shape[2:]
    out = tuple((x_shape[2 + i] + pad_lo[i] + pad_hi[i] - dilation[i] * (kernel[i] - 1) - 1) // stride[i] + 1
                for i in range(n))
    item = compute.itemsize
    if compute is not dtype:  # float16/bfloat16 run on a C-contiguous float32 copy
        x_strides = tuple(item * math.prod(x_shape[i + 1:]) for i in range(len(x_shape)))
    if N == 0 or C == 0 or out_channels == 0 or min(out) <= 0 or any(s % item for s in x_strides):
        return None
    K, P = math.prod(kernel), math.prod(out)
    wide, index = _fast_index(_fast_span(x_shape, x_strides, item), C * K * N * P, N * out_channels * P)
    im2col_grid, im2col_struct = _fast_im2col_args(x_shape, x_strides, item, kernel, stride, pad_lo, dilation, out,
                                                   index)
    if groups == 1:
        w_matrix, cols_matrix = (out_channels, C * K), None
    else:
        cpg, opg = C // groups, out_channels // groups
        w_matrix, cols_matrix = (groups, opg, cpg * K), (groups, cpg * K, N * P)
    total = N * out_channels * P
    output_struct = _fast_struct("output", index, (total, out_channels, N, P, int(b_dtype is not None)))
    return (compute, (compute, wide), (C * K, N * P), im2col_grid, im2col_struct, w_matrix, cols_matrix,
            (N, out_channels, *out), _fast_grid(total), output_struct)


def _fast_plan(key, build):
    """The memoised plan of a fast-path call (``build(*key[1:])``; None for calls the path does not take)."""
    plan = _fast_plans.get(key, False)
    if plan is False:
        if len(_fast_plans) >= _FAST_PLANS_MAX:
            _fast_plans.clear()
        plan = _fast_plans[key] = build(*key[1:])
    return plan


def _fast_conv_forward(xp, x, w, b, stride, pad_lo, pad_hi, dilation, groups):
    """``_xp_conv_forward`` of CuPy arrays in three launches (im2col, GEMM, layout and bias), or None for the
    calls it does not take (other dtypes, empty arrays, arrays on another GPU than the current one).

    The parameters are tuples of ints. float16/bfloat16 compute in float32 (one conversion per operand and
    one of the result), as the generic path does.
    """
    dtype = x.dtype
    key = ("forward", x.shape, x.strides, dtype, w.shape, w.dtype, None if b is None else b.dtype, stride, pad_lo,
           pad_hi, dilation, groups)
    plan = _fast_plan(key, _fast_forward_plan)
    if plan is None:
        return None
    compute, variant, cols_shape, im2col_grid, im2col_struct, w_matrix, cols_matrix, out_shape, out_grid, \
        output_struct = plan
    device = _fast_device(xp, x, w) if b is None else _fast_device(xp, x, w, b)
    kernels = None if device is None else _fast_kernels(xp, device, *variant)
    if kernels is None:
        return None
    im2col, output, _, _ = kernels
    if compute is not dtype:
        x, w = x.astype(compute, order="C"), w.astype(compute)
        b = None if b is None else b.astype(compute)
    elif b is not None and not b._c_contiguous:
        b = xp.ascontiguousarray(b)
    block = (_FAST_THREADS,)
    cols = xp.empty(cols_shape, compute)
    im2col(im2col_grid, block, (x, cols, im2col_struct))
    product = _fast_gemm(xp, w.reshape(w_matrix), cols if cols_matrix is None else cols.reshape(cols_matrix))
    if not product._c_contiguous:  # (cupy.matmul's results are; the kernel reads C order)
        product = xp.ascontiguousarray(product)
    result = xp.empty(out_shape, compute)
    # without a bias the kernel reads no bias: any pointer does
    output(out_grid, block, (product, product if b is None else b, result, output_struct))
    return result if compute is dtype else result.astype(dtype)


def _fast_backward_plan(gy_shape, x_shape, x_strides, dtype, gy_dtype, w_shape, w_dtype, stride, padding, dilation):
    """The launch plan of :func:`_fast_conv_backward`, or None for a call it does not take: a tuple (the kernels'
    variant (dtype, 64-bit indexing), the rows' shape, the row kernel's grid (one block per output channel: also
    the sums' shape) and struct, the columns' shape, im2col's grid and struct, the weight's matrix shape, col2im's
    grid and struct)."""
    if dtype not in _FAST_TYPES or gy_dtype != dtype or w_dtype != dtype:
        return None
    N, C = x_shape[:2]
    out_channels = w_shape[0]
    kernel = w_shape[2:]
    out = gy_shape[2:]
    item = dtype.itemsize
    if N == 0 or C == 0 or out_channels == 0 or 0 in out or any(s % item for s in x_strides):
        return None
    K, P = math.prod(kernel), math.prod(out)
    wide, index = _fast_index(_fast_span(x_shape, x_strides, item), C * K * N * P, out_channels * N * P,
                              math.prod(x_shape))
    im2col_grid, im2col_struct = _fast_im2col_args(x_shape, x_strides, item, kernel, stride, padding, dilation, out,
                                                   index)
    total = math.prod(x_shape)
    col2im_struct = _fast_struct("col2im", index, (total, C, N, *_lift3(x_shape[2:], 1), *_lift3(kernel, 1),
                                                   *_lift3(out, 1), *_lift3(stride, 1), *_lift3(padding, 0),
                                                   *_lift3(dilation, 1)))
    rows_struct = _fast_struct("grad_rows", index, (out_channels, N, P))
    return ((dtype, wide), (out_channels, N * P), (out_channels,), rows_struct, (C * K, N * P), im2col_grid,
            im2col_struct, (out_channels, C * K), _fast_grid(total), col2im_struct)


def _fast_conv_backward(xp, gy, x, w, stride, padding, dilation, mask):
    """The gradients ``(d x, d w, d b)`` (None where ``mask`` is False) of an ungrouped convolution of CuPy
    arrays ``y = conv(x, w) + b`` given ``gy = dL/dy``, or None for the calls it does not take (dtypes other
    than float32/float64, mixed dtypes, empty arrays, arrays on another GPU than the current one).

    With ``rows`` (C_out, N * P) the output gradient's rows and ``cols`` (C * K, N * P) the forward's columns:
    ``d w = rows @ cols^T``, ``d b`` the row sums, and ``d x`` is col2im of ``w^T @ rows`` (the adjoint of
    im2col), so the input gradient needs neither a flipped kernel nor a padded copy. The parameters are
    tuples of ints.
    """
    dtype = x.dtype
    key = ("backward", gy.shape, x.shape, x.strides, dtype, gy.dtype, w.shape, w.dtype, stride, padding, dilation)
    plan = _fast_plan(key, _fast_backward_plan)
    if plan is None:
        return None
    variant, rows_shape, rows_grid, rows_struct, cols_shape, im2col_grid, im2col_struct, w_matrix, col2im_grid, \
        col2im_struct = plan
    device = _fast_device(xp, gy, x, w)
    kernels = None if device is None else _fast_kernels(xp, device, *variant)
    if kernels is None:
        return None
    im2col, _, grad_rows, col2im = kernels
    if not gy._c_contiguous:
        gy = xp.ascontiguousarray(gy)
    block = (_FAST_THREADS,)
    rows = xp.empty(rows_shape, dtype)
    sums = xp.empty(rows_grid, dtype)
    grad_rows(rows_grid, block, (gy, rows, sums, rows_struct))
    grad_x = grad_w = None
    if mask[1]:
        cols = xp.empty(cols_shape, dtype)
        im2col(im2col_grid, block, (x, cols, im2col_struct))
        grad_w = _fast_gemm(xp, rows, cols.T).reshape(w.shape)
    if mask[0]:
        taps = _fast_gemm(xp, w.reshape(w_matrix).T, rows)  # (C * K, N * P): the gradient of the columns
        if not taps._c_contiguous:
            taps = xp.ascontiguousarray(taps)
        grad_x = xp.empty(x.shape, dtype)
        col2im(col2im_grid, block, (taps, grad_x, col2im_struct))
    return grad_x, grad_w, sums if mask[2] else None


#: Whether the fast path's 2-D float GEMMs call cuBLAS directly (:func:`ember.cuda._bf16.product_2d`) rather than
#: through ``cupy.matmul``: on the H200's machine 18.7 against 21.7 us of host time per call (the same cuBLAS
#: routine and compute type, so the same values).
_DIRECT_GEMM = True


_gemm_module = None  # ember.cuda._bf16 once imported (an import statement costs every call a look-up)


def _fast_gemm(xp, a, b):
    """``a @ b`` of 2-D arrays for the fast path: one direct cuBLAS call on CuPy float32/float64 operands."""
    global _gemm_module
    if _DIRECT_GEMM and getattr(xp, "__name__", "") == "cupy" and a.ndim == b.ndim == 2 and a.dtype == b.dtype:
        if _gemm_module is None:
            from .. import _bf16 as _gemm_module  # (it loads ml_dtypes, which import ember leaves out: first use)
        if a.dtype in _gemm_module.FLOAT_GEMM_DTYPES and max(a.shape + b.shape) < 2**31:  # cuBLAS' 32-bit sizes
            return _gemm_module.product_2d(a, b)
    return xp.matmul(a, b)
