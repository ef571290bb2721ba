"""bfloat16 on the GPU: cuBLAS matrix products (float32/float64 too), and the float32 detour for what CuPy lacks.

A cuda bfloat16 tensor holds a CuPy array of dtype ``ml_dtypes.bfloat16`` (CuPy >= 14
with ``ml_dtypes`` installed), the same dtype its CPU twin's numpy array has.

Matrix products
    :func:`matmul` multiplies bfloat16 arrays with one cuBLAS ``gemmEx`` call (or
    ``gemmStridedBatchedEx`` for stacks of matrices): bfloat16 inputs, float32
    accumulation (``CUBLAS_COMPUTE_32F``), the result rounded once to bfloat16
    (or kept in float32 when asked). These are the tensor-core GEMMs PyTorch
    runs for bfloat16. :func:`install` puts it under the ``matmul`` op (which
    ``mm``, ``bmm``, ``mv``, ``dot`` and ``linear`` reduce to on cuda), and
    :func:`added_product` under ``addmm`` and ``baddbmm`` (``beta * input`` is
    added in cuBLAS' epilogue, so the result is rounded once, as on CPU); other
    dtypes keep the kernel they had. float32 and float64 products can take the same
    direct cuBLAS call (``CUBLAS_COMPUTE_32F``/``64F``: no TF32, as PyTorch's
    default) with :data:`DIRECT_GEMM`, which is off: it measured slower per call
    than ``cupy.matmul``.

Missing bfloat16 loops
    CuPy 14 lacks bfloat16 in a few places (rounding, ``divmod``, most of
    ``cupyx``, FFT). :func:`run_in_float32` runs a kernel with its bfloat16
    arrays converted to float32 and rounds the results back, which is how
    PyTorch computes bfloat16 pointwise ops too (in float32 registers). The
    generic kernel path (:mod:`ember.cuda._backend`) uses it when a kernel fails
    on bfloat16 input.
"""

from __future__ import annotations

import math

import numpy as np

from .._dtype import bfloat16 as _BF16_DTYPE
from .._tensor import Tensor
from . import _cublas_capture
from ._runtime import cupy_module

__all__ = [
    "BF16", "matmul", "product_2d", "product_into", "added_product", "install", "run_in_float32", "is_bf16_failure",
    "has_bf16", "capturing",
]

# (reading it loads ml_dtypes, which `import ember` leaves out; CuPy imports ml_dtypes itself anyway, and this
# module is imported only with the cuda backend: see ember._dtype.load_ml_dtypes)
BF16 = _BF16_DTYPE.numpy_dtype
_F32 = np.dtype(np.float32)

# cudaDataType / cublasComputeType_t / cublasGemmAlgo_t values (library_types.h, cublas_api.h)
_CUDA_R_32F = 0
_CUDA_R_64F = 1
_CUDA_R_16BF = 14
_CUDA_R_16F = 2
_CUBLAS_COMPUTE_32F = 68
_CUBLAS_COMPUTE_64F = 70
_CUBLAS_GEMM_DEFAULT = -1
_OP_N, _OP_T = 0, 1
_INT_MAX = 2**31 - 1


_F64 = np.dtype(np.float64)
_F16 = np.dtype(np.float16)
#: the half-precision dtypes: float32 accumulation in cuBLAS, float32 arithmetic where CuPy is called instead
_HALVES = (BF16, _F16)
#: operand dtype -> (cudaDataType, cublasComputeType_t, dtype of the host alpha/beta scalars)
_GEMM_TYPES = {
    BF16: (_CUDA_R_16BF, _CUBLAS_COMPUTE_32F, _F32),
    _F16: (_CUDA_R_16F, _CUBLAS_COMPUTE_32F, _F32),  # autocast's dtype on cuda: tensor cores, float32 sums
    _F32: (_CUDA_R_32F, _CUBLAS_COMPUTE_32F, _F32),
    _F64: (_CUDA_R_64F, _CUBLAS_COMPUTE_64F, _F64),
}
#: whether float32/float64 ``matmul``/``addmm``/``baddbmm`` call cuBLAS directly (bfloat16 always does). Off:
#: on the H200 (2026-11-30) the direct call cost 54.8 µs per (128, 784) @ (784, 512) product against
#: ``cupy.matmul``'s 38.9 µs, so CuPy keeps float32/float64 (the results agree within 1e-4).
DIRECT_GEMM = False


def _cuda_type(dtype):
    return _GEMM_TYPES[dtype][0]


def _direct(*dtypes):
    """Whether a product of arrays of ``dtypes`` takes the direct cuBLAS path (one dtype, which it takes): always
    for the 16-bit dtypes, and for float32/float64 when :data:`DIRECT_GEMM` is on or a CUDA graph is being
    captured (``cupy.matmul`` refuses to run then)."""
    first = dtypes[0]
    if any(d != first for d in dtypes) or first not in _GEMM_TYPES:
        return False
    return first in _HALVES or DIRECT_GEMM or capturing()


def _describe(x):
    """``(array, op, ld)`` that show cuBLAS (column-major) the row-major matrix ``x`` as ``op(stored) = x^T``.

    A row-major matrix is its transpose in column-major order, so a C-ordered
    ``x`` (any row pitch) is passed untransposed; a column-ordered ``x`` (the
    ``w.t()`` of ``linear``) is passed with the transpose flag, without a copy.
    Anything else is copied to C order first.
    """
    rows, cols = x.shape
    item = x.itemsize
    s0, s1 = x.strides
    if s1 == item and s0 > 0 and s0 % item == 0 and s0 // item >= max(cols, 1):
        return x, _OP_N, s0 // item
    if s0 == item and s1 > 0 and s1 % item == 0 and s1 // item >= max(rows, 1):
        return x, _OP_T, s1 // item
    x = cupy_module().ascontiguousarray(x)
    return x, _OP_N, max(cols, 1)


def _bound(cp):
    """``(cuBLAS wrappers, the current GPU's handle)``, the handle bound to the current stream (``ember.cuda.stream``
    contexts): CuPy's wrappers, or :mod:`._cublas_capture` while that stream captures a CUDA graph (CuPy's
    refuse to run then)."""
    handle = cp.cuda.device.get_cublas_handle()
    stream = cp.cuda.get_current_stream().ptr
    if stream and cp.cuda.runtime.streamIsCapturing(stream):  # (the legacy stream 0 never captures)
        _cublas_capture.bind(handle, stream, cp.cuda.runtime.getDevice())
        return _cublas_capture, handle
    cublas = _cublas()
    cublas.setStream(handle, stream)
    return cublas, handle


def capturing():
    """Whether the current CUDA stream is capturing a graph (products must then take the direct cuBLAS path)."""
    cp = cupy_module()
    stream = cp.cuda.get_current_stream().ptr
    return bool(stream) and cp.cuda.runtime.streamIsCapturing(stream)


_HOST_SCALARS = {}  # (compute dtype, 0.0 or 1.0) -> (array, its address): the common alpha/beta, made once


def _scalar_address(value, dtype, keep):
    """The address of a host scalar ``value`` of the compute type of ``dtype`` operands.

    cuBLAS reads alpha and beta from host memory during the call (its default pointer mode), so the
    array must outlive the call: 0 and 1 are made once; other values are appended to ``keep``.
    """
    scalar = _GEMM_TYPES[dtype][2]
    if value == 0 or value == 1:
        key = (scalar, float(value))
        entry = _HOST_SCALARS.get(key)
        if entry is None:
            array = np.array(value, scalar)
            entry = _HOST_SCALARS[key] = (array, array.ctypes.data)
        return entry[1]
    array = np.array(value, scalar)
    keep.append(array)
    return array.ctypes.data


def _cublas():
    """CuPy's cuBLAS bindings (``cupy_backends.cuda.libs.cublas``), imported once."""
    global _cublas_module
    if _cublas_module is None:
        from cupy_backends.cuda.libs import cublas

        _cublas_module = cublas
    return _cublas_module


_cublas_module = None


def _gemm_into(out, a, b, alpha, beta):
    """``out = alpha * (a @ b) + beta * out`` for 2-D CuPy arrays: ``a`` (M, K), ``b`` (K, N) of one dtype
    of ``_GEMM_TYPES``, ``out`` (M, N) C-contiguous of that dtype (or float32 for bfloat16 operands),
    computed in the compute type (float32 for bfloat16) and rounded once."""
    cp = cupy_module()
    m, k = a.shape
    n = b.shape[1]
    if m == 0 or n == 0:
        return out
    if k == 0:
        _scale(out, beta)
        return out
    # C (row-major, M x N) is C^T (column-major, N x M) = B^T A^T: cuBLAS' "A" is our b, its "B" our a.
    b, op_b, ld_b = _describe(b)
    a, op_a, ld_a = _describe(a)
    cublas, handle = _bound(cp)
    in_type, compute, _ = _GEMM_TYPES[a.dtype]
    keep = []
    cublas.gemmEx(
        handle, op_b, op_a, n, m, k,
        _scalar_address(alpha, a.dtype, keep), b.data.ptr, in_type, ld_b, a.data.ptr, in_type, ld_a,
        _scalar_address(beta, a.dtype, keep), out.data.ptr, _cuda_type(out.dtype), n,
        compute, _CUBLAS_GEMM_DEFAULT,
    )
    return out


def _scale(out, beta):
    """``out *= beta`` (bfloat16 in float32, rounded once); ``beta == 0`` writes zeros (NaN in ``out`` included)."""
    if beta == 0:
        out.fill(0)
    elif beta != 1:
        wide = _F32 if out.dtype in _HALVES else out.dtype
        out[...] = (out.astype(wide) * wide.type(beta)).astype(out.dtype)


def _batch_view(x, batch):
    """``x`` (..., r, c) broadcast to ``batch + (r, c)`` as a 3-D array with one batch stride (copied if needed)."""
    cp = cupy_module()
    shape = tuple(batch) + x.shape[-2:]
    if x.shape != shape:
        x = cp.broadcast_to(x, shape)
    if len(batch) != 1:
        x = x.reshape((-1,) + x.shape[-2:])  # copies only when the batch dims can't be merged
    return x


def _stack_description(x):
    """``(array, op, ld, batch stride)`` of a 3-D stack of matrices for ``gemmStridedBatchedEx``."""
    cp = cupy_module()
    item = x.itemsize
    if x.strides[0] < 0 or x.strides[0] % item:
        x = cp.ascontiguousarray(x)
    inner, op, ld = _describe(x[0])
    if inner.data.ptr != x.data.ptr:  # a matrix of it had to be copied: copy the whole stack instead
        x = cp.ascontiguousarray(x)
        _, op, ld = _describe(x[0])
    return x, op, ld, x.strides[0] // item


def _stack_in_place(x, batch):
    """``(address, op, ld, batch stride)`` of ``x`` (..., r, c) read in place as a strided batch when its batch dims
    are ``batch`` and merge into one stride and its matrices are row- or column-major (what
    :func:`_stack_description` finds for the reshaped array, without making the arrays); else None."""
    if x.shape[:-2] != batch:
        return None
    item = x.itemsize
    strides = x.strides
    stride = 0  # the merged batch stride (the innermost batch dim of more than one matrix)
    span = None  # the bytes that dim and those inside it cover, which the next outer one must step over
    for size, step in zip(reversed(batch), reversed(strides[:-2])):
        if size == 1:
            continue
        if span is None:
            stride = step
        elif step != span:
            return None
        span = step * size
    if stride < 0 or stride % item:
        return None
    rows, cols = x.shape[-2:]
    s0, s1 = strides[-2:]
    if s1 == item and s0 > 0 and s0 % item == 0 and s0 // item >= max(cols, 1):
        return x.data.ptr, _OP_N, s0 // item, stride // item
    if s0 == item and s1 > 0 and s1 % item == 0 and s1 // item >= max(rows, 1):
        return x.data.ptr, _OP_T, s1 // item, stride // item
    return None


def _batched_gemm_into(out, a, b, alpha, beta):
    """:func:`_gemm_into` over the batch dims of C-contiguous ``out`` (..., M, N), to which the batch dims
    of ``a`` (..., M, K) and ``b`` (..., K, N) broadcast."""
    cp = cupy_module()
    batch = out.shape[:-2]
    m, k = a.shape[-2:]
    n = b.shape[-1]
    if out.size == 0:
        return out
    if k == 0:
        _scale(out, beta)
        return out
    # operands whose batch dims are out's and merge are read in place (no reshaped or indexed arrays made:
    # each CuPy reshape costs a few microseconds of host time); others are broadcast, reshaped or copied first
    described_b, described_a = _stack_in_place(b, batch), _stack_in_place(a, batch)
    if described_b is None:
        bx, op_b, ld_b, st_b = _stack_description(_batch_view(b, batch))
        described_b = (bx.data.ptr, op_b, ld_b, st_b)
    if described_a is None:
        ax, op_a, ld_a, st_a = _stack_description(_batch_view(a, batch))
        described_a = (ax.data.ptr, op_a, ld_a, st_a)
    ptr_b, op_b, ld_b, st_b = described_b
    ptr_a, op_a, ld_a, st_a = described_a
    cublas, handle = _bound(cp)
    in_type, compute, _ = _GEMM_TYPES[a.dtype]
    keep = []
    cublas.gemmStridedBatchedEx(
        handle, op_b, op_a, n, m, k,
        _scalar_address(alpha, a.dtype, keep), ptr_b, in_type, ld_b, st_b, ptr_a, in_type, ld_a, st_a,
        _scalar_address(beta, a.dtype, keep), out.data.ptr, _cuda_type(out.dtype), n, m * n, math.prod(batch),
        compute, _CUBLAS_GEMM_DEFAULT,
    )
    return out


def product_into(out, a, b):
    """``out = a @ b`` for CuPy arrays of one dtype of ``_GEMM_TYPES`` (float32 and float64 included) on the
    current GPU, ``out`` C-contiguous of the product's shape: the lean form of :func:`matmul` for the checked
    kernels of :mod:`ember.cuda.kernels.products`, which have checked the shapes. Returns ``out``."""
    return _product_into(out, a, b)


def _rows_of(x, rows):
    """``x`` (..., c) as a (rows, c) matrix: a view built directly for a C-contiguous ``x`` (CuPy's reshape costs
    a few microseconds of host time more), else ``x.reshape``."""
    if x._c_contiguous:
        return cupy_module().ndarray((rows, x.shape[-1]), x.dtype, x.data)
    return x.reshape(rows, x.shape[-1])


def _product_into(out, a, b, alpha=1.0, beta=0.0):
    """``out = alpha * (a @ b) + beta * out`` for ``a`` (..., M, K) and ``b`` (..., K, N) of one dtype of
    ``_GEMM_TYPES`` with ``out`` C-contiguous of the broadcast shape (..., M, N), of that dtype (bfloat16
    operands: bfloat16 or float32)."""
    cp = cupy_module()
    fold = b.ndim == 2 and a.ndim > 2  # a stack times one matrix: one GEMM over the stacked rows
    rows = math.prod(a.shape[:-1]) if fold else a.shape[-2]
    if max(rows, a.shape[-1], b.shape[-1]) > _INT_MAX:  # beyond cuBLAS' 32-bit sizes: CuPy (bf16 in float32)
        wide = _F32 if a.dtype in _HALVES else a.dtype
        product = cp.matmul(a.astype(wide), b.astype(wide))
        if alpha != 1:
            product *= wide.type(alpha)
        if beta != 0:
            product += out.astype(wide) * wide.type(beta)
        out[...] = product.astype(out.dtype)
    elif fold:
        _gemm_into(_rows_of(out, rows), _rows_of(a, rows), b, alpha, beta)
    elif a.ndim == 2 and b.ndim == 2:
        _gemm_into(out, a, b, alpha, beta)
    else:
        _batched_gemm_into(out, a, b, alpha, beta)
    return out


def matmul(a, b, out_dtype=None):
    """``numpy.matmul(a, b)`` for CuPy arrays of one dtype, bfloat16 (cuBLAS' tensor-core GEMM with float32
    accumulation), float32 or float64, in one cuBLAS call.

    Args:
        a, b: CuPy arrays of one dtype (bfloat16, float32, float64) with >= 1 dims; the shapes
            follow ``numpy.matmul`` (1-D operands are promoted and the added dim removed,
            batch dims broadcast).
        out_dtype: the result dtype: the operands' (default; bfloat16 is rounded once from the
            float32 accumulator), or float32 for bfloat16 operands.

    Returns:
        A new CuPy array on the operands' device.

    Raises:
        ValueError: for shapes that don't multiply.
    """
    cp = cupy_module()
    out_dtype = a.dtype if out_dtype is None else np.dtype(out_dtype)
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError("matmul: operands must have at least one dimension")
    a_vec, b_vec = a.ndim == 1, b.ndim == 1
    if a_vec:
        a = a.reshape(1, -1)
    if b_vec:
        b = b.reshape(-1, 1)
    if a.shape[-1] != b.shape[-2]:
        raise ValueError(f"matmul: shapes {a.shape} and {b.shape} don't multiply")
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    with a.device:
        result = _product_into(cp.empty(batch + (a.shape[-2], b.shape[-1]), out_dtype), a, b)
    if b_vec:
        result = result[..., 0]
    if a_vec:
        result = result[..., 0] if b_vec else result[..., 0, :]
    return result


#: the dtypes :func:`product_2d` takes
FLOAT_GEMM_DTYPES = frozenset((_F32, _F64))


def product_2d(a, b):
    """``a @ b`` for 2-D CuPy arrays of one dtype of ``_GEMM_TYPES`` on the current GPU, in one cuBLAS call.

    The lean form of :func:`matmul` for the fast kernels, which have checked the operands already:
    ``a`` (M, K) and ``b`` (K, N), any strides, with M, N, K at most 2**31 - 1. Returns a new
    C-contiguous (M, N) array of the operands' dtype.
    """
    out = cupy_module().ndarray((a.shape[0], b.shape[1]), a.dtype)  # (cupy.empty is this, one call deeper)
    return _gemm_into(out, a, b, 1.0, 0.0)


def added_product(input, a, b, beta, alpha):
    """``beta * input + alpha * (a @ b)`` for CuPy arrays of one dtype of :func:`matmul`'s, rounded once.

    ``a`` (..., M, K) and ``b`` (..., K, N) as in :func:`matmul` (no 1-D operands);
    ``input`` broadcasts to the product's shape. ``beta == 0`` ignores ``input``
    (NaN in it does not propagate), as in PyTorch. cuBLAS adds ``beta * input``
    in its epilogue, so this costs one GEMM plus a copy of the broadcast input.
    """
    cp = cupy_module()
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    with a.device:
        out = cp.empty(batch + (a.shape[-2], b.shape[-1]), a.dtype)
        if beta != 0:
            out[...] = input
        return _product_into(out, a, b, alpha, beta if beta != 0 else 0.0)


# -- op kernels --------------------------------------------------------------------------------------


_CUPY_MATMUL_DTYPES = frozenset(np.dtype(t) for t in (np.float32, np.float64, np.complex64, np.complex128))


def _matmul_kernel(previous):
    def matmul_cuda(input, other):
        a, b = input._data, other._data
        if _direct(a.dtype, b.dtype) and (a.dtype in _HALVES or (a.size and b.size)):
            return matmul(a, b)
        if a.dtype == b.dtype and a.dtype in _CUPY_MATMUL_DTYPES:
            # what the generic path ends in (numpy hands np.matmul to CuPy), without its layers
            return cupy_module().matmul(a, b)
        return previous(input, other)

    return matmul_cuda


def _added_product_kernel(op):
    def kernel(input, mat1, mat2, *, beta=1, alpha=1):
        m1, m2, inp = mat1._data, mat2._data, input._data
        if not _direct(m1.dtype, m2.dtype, inp.dtype):
            return op.decomposition(input, mat1, mat2, beta=beta, alpha=alpha)
        beta = beta.item() if isinstance(beta, Tensor) else beta
        alpha = alpha.item() if isinstance(alpha, Tensor) else alpha
        return added_product(inp, m1, m2, float(beta.real if isinstance(beta, complex) else beta),
                             float(alpha.real if isinstance(alpha, complex) else alpha))

    kernel.__name__ = f"{op.name}_cuda_bf16"
    return kernel


def install():
    """Route bfloat16 ``matmul`` and ``addmm`` on cuda to cuBLAS (idempotent).

    The ops' existing cuda kernels (or the generic path) keep every other dtype.
    Called by :func:`ember.cuda._backend.initialize`.
    """
    from .._ops._registry import registry
    from . import _backend

    if getattr(install, "done", False):
        return
    op = registry["matmul"]
    previous = op.kernels.get("cuda") or _backend.fallback_kernel(op)
    op.kernels["cuda"] = _matmul_kernel(previous)
    for name in ("addmm", "baddbmm"):  # composites: without a cuda kernel they run their decomposition
        added = registry[name]
        if "cuda" not in added.kernels and added.decomposition is not None:
            added.kernels["cuda"] = _added_product_kernel(added)
    install.done = True


# -- the float32 detour -------------------------------------------------------------------------------

# how bfloat16 trouble reads: CuPy names the dtype, or its char 'E'; numpy helpers (iinfo, finfo, dtype.kind
# tests) see ml_dtypes' kind 'V'
_BF16_MARKERS = ("bfloat16", "bf16")
_BF16_CASED_MARKERS = ("data type 'E'", "type 'V'", "kind 'V'")


def is_bf16_failure(exc):
    """Whether ``exc`` (raised by a kernel given bfloat16 arrays) looks like missing bfloat16 support."""
    text = f"{type(exc).__name__}: {exc}"
    if any(marker in text for marker in _BF16_CASED_MARKERS):
        return True
    lowered = text.lower()
    if any(marker in lowered for marker in _BF16_MARKERS):
        return True
    return type(exc).__name__ in ("CompileException", "NVRTCError")  # a kernel template that can't take bfloat16


def _has_bf16(value):
    if isinstance(value, Tensor):
        return value._data.dtype == BF16
    if type(value) in (list, tuple):
        return any(_has_bf16(v) for v in value)
    return False


def has_bf16(args, kwargs):
    """Whether any tensor among ``args``/``kwargs`` (lists included) is bfloat16."""
    return _has_bf16(args) or any(_has_bf16(v) for v in kwargs.values())


def _lift(value, swaps):
    # bfloat16 tensors -> float32 stand-ins (recorded in swaps as (original, stand-in, snapshot))
    if isinstance(value, Tensor) and value._data.dtype == BF16:
        data = value._data.astype(_F32)
        stand_in = Tensor._make(data, value._device)
        swaps.append((value, stand_in, data.copy()))
        return stand_in
    if type(value) in (list, tuple):
        return type(value)(_lift(v, swaps) for v in value)
    return value


def _lower(result, dtypes):
    """Cast float32 arrays in ``result`` to bfloat16 where the op's meta result says bfloat16."""
    if type(result) in (list, tuple):
        if type(dtypes) in (list, tuple) and len(dtypes) == len(result):
            return type(result)(_lower(r, d) for r, d in zip(result, dtypes))
        return type(result)(_lower(r, dtypes) for r in result)
    if isinstance(result, Tensor):
        return result  # an argument handed back (mapped to the original by run_in_float32)
    if dtypes == BF16 and getattr(result, "dtype", None) is not None and result.dtype != BF16:
        return result.astype(BF16)
    return result


def _meta_dtypes(spec):
    if type(spec) in (list, tuple):
        return type(spec)(_meta_dtypes(s) for s in spec)
    return getattr(spec, "dtype", None)


def run_in_float32(op, kernel, args, kwargs):
    """Run ``kernel`` with bfloat16 tensors replaced by float32 copies; round the results back to bfloat16.

    The results that the op's meta function declares bfloat16 are rounded once
    from float32. Arguments the kernel wrote into (in-place ops, running
    statistics) get their new values back, rounded; elements it left alone are
    not rewritten (their bytes, NaN payloads included, stay as they were).
    """
    cp = cupy_module()
    dtypes = _meta_dtypes(op.meta(*args, **kwargs))
    swaps = []
    new_args = _lift(tuple(args), swaps)
    new_kwargs = {k: _lift(v, swaps) for k, v in kwargs.items()}
    result = kernel(*new_args, **new_kwargs)
    for original, stand_in, snapshot in swaps:
        data = stand_in._data
        if data.shape != snapshot.shape or data.dtype != snapshot.dtype:
            continue  # the kernel replaced the stand-in's array rather than writing into it
        changed = ~((data == snapshot) | (cp.isnan(data) & cp.isnan(snapshot)))
        cp.copyto(original._data, data.astype(BF16), where=changed)
    for original, stand_in, _ in swaps:
        if result is stand_in:  # a kernel that hands back its argument (relu(x, inplace=True))
            return original
    return _lower(result, dtypes)
