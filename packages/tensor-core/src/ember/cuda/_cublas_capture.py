"""cuBLAS products recorded into a CUDA graph (``ember.compile(..., mode="reduce-overhead")``).

cuBLAS supports stream capture (cuBLAS guide, "CUDA Graphs Support"): a GEMM issued on a capturing stream is
recorded, with alpha and beta read from host memory at capture time. CuPy's wrappers refuse it: each one binds
the handle to the current stream first, and that binding raises ``NotImplementedError`` ("calling cuBLAS API
during stream capture is currently unsupported") on a capturing stream.

This module calls the library CuPy loaded (the same handles) through ``ctypes`` for the products that
:mod:`ember.cuda._bf16` issues while a stream captures. :func:`bind` binds the handle to the capturing stream
and to a workspace ember allocated (binding a stream resets cuBLAS to its default workspace, which it could
otherwise allocate in the middle of the capture); :func:`gemmEx` and :func:`gemmStridedBatchedEx` take the
arguments of CuPy's wrappers of the same names, so the callers pass either module.
"""

from __future__ import annotations

import ctypes

__all__ = ["bind", "gemmEx", "gemmStridedBatchedEx", "WORKSPACE_BYTES"]

#: bytes of the workspace each GPU's handle gets during captures (NVIDIA's recommendation for Hopper GPUs)
WORKSPACE_BYTES = 32 * 1024 * 1024

_state = {}  # "lib": the loaded libcublas; device index -> its workspace (CuPy memory, kept for the process)

_INT, _PTR, _LONG = ctypes.c_int, ctypes.c_void_p, ctypes.c_longlong
_SIGNATURES = {
    "cublasSetStream_v2": [_PTR, _PTR],
    "cublasSetWorkspace_v2": [_PTR, _PTR, ctypes.c_size_t],
    # handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb, beta, C, Ctype, ldc, compute, algo
    "cublasGemmEx": [_PTR, _INT, _INT, _INT, _INT, _INT, _PTR, _PTR, _INT, _INT, _PTR, _INT, _INT, _PTR, _PTR, _INT,
                     _INT, _INT, _INT],
    # the same with a stride after each matrix's leading dimension, then the batch count
    "cublasGemmStridedBatchedEx": [_PTR, _INT, _INT, _INT, _INT, _INT, _PTR, _PTR, _INT, _INT, _LONG, _PTR, _INT, _INT,
                                   _LONG, _PTR, _PTR, _INT, _INT, _LONG, _INT, _INT, _INT],
}


def _loaded_path():
    """The file of the libcublas mapped into this process (CuPy's), from ``/proc/self/maps``; None if none."""
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.rsplit(None, 1)[-1]
                if "/libcublas.so" in path:  # (not libcublasLt)
                    return path
    except OSError:
        return None
    return None


def _library():
    lib = _state.get("lib")
    if lib is None:
        path = _loaded_path()
        if path is None:
            raise RuntimeError("cuBLAS under CUDA-graph capture: libcublas is not loaded in this process (CuPy loads "
                               "it with the first cuBLAS handle)")
        lib = ctypes.CDLL(path)
        for name, argtypes in _SIGNATURES.items():
            function = getattr(lib, name)
            function.argtypes, function.restype = argtypes, ctypes.c_int
        _state["lib"] = lib
    return lib


def _check(name, status):
    if status != 0:
        raise RuntimeError(f"cuBLAS {name} failed during CUDA-graph capture (cublasStatus_t {status})")


def _workspace(device):
    memory = _state.get(device)
    if memory is None:
        from ._runtime import cupy_module

        # a plain cudaMalloc (relaxed capture mode allows it), not a pool block: the capture's private pool
        # would hand it back to the recording that happened to allocate it
        memory = _state[device] = cupy_module().cuda.memory.Memory(WORKSPACE_BYTES)
    return memory.ptr


def bind(handle, stream, device):
    """Bind cuBLAS ``handle`` (of GPU ``device``) to the capturing ``stream`` (a ``cudaStream_t`` address) and to
    ember's workspace on that GPU, for this module's functions to issue the products on.

    Raises:
        RuntimeError: when libcublas is not loaded, or cuBLAS rejects the binding (with its status).
    """
    lib = _library()
    _check("cublasSetStream", lib.cublasSetStream_v2(handle, stream))
    _check("cublasSetWorkspace", lib.cublasSetWorkspace_v2(handle, _workspace(device), WORKSPACE_BYTES))


def gemmEx(handle, transa, transb, m, n, k, alpha, a, a_type, lda, b, b_type, ldb, beta, c, c_type, ldc, compute,
           algo):
    """``cublasGemmEx`` with the arguments of CuPy's ``cublas.gemmEx`` (addresses as ints; the handle bound by
    :func:`bind`). Raises RuntimeError with cuBLAS' status when it fails."""
    _check("cublasGemmEx", _library().cublasGemmEx(handle, transa, transb, m, n, k, alpha, a, a_type, lda, b, b_type,
                                                   ldb, beta, c, c_type, ldc, compute, algo))


def gemmStridedBatchedEx(handle, transa, transb, m, n, k, alpha, a, a_type, lda, stride_a, b, b_type, ldb, stride_b,
                         beta, c, c_type, ldc, stride_c, batch, compute, algo):
    """``cublasGemmStridedBatchedEx`` with the arguments of CuPy's wrapper of that name (see :func:`gemmEx`)."""
    _check("cublasGemmStridedBatchedEx", _library().cublasGemmStridedBatchedEx(
        handle, transa, transb, m, n, k, alpha, a, a_type, lda, stride_a, b, b_type, ldb, stride_b, beta, c, c_type,
        ldc, stride_c, batch, compute, algo))
