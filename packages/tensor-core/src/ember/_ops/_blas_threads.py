"""numpy's BLAS on one thread for matrix products too small to gain from more.

After each multithreaded call, OpenBLAS's worker threads busy-wait for new work
for a while (``OPENBLAS_THREAD_TIMEOUT``, read once when numpy loads, so ember
cannot set it). On a machine with few cores those spinning workers take the
cores that ember's OpenMP kernels run on next, and the OpenMP threads, spinning
in turn at their barriers, take them back from the next BLAS call: a training
step of a small CNN on two threads ran ten times slower than on one.

:func:`matmul` runs products below :data:`THREADED_MACS` multiply-adds (per matrix of a stack) with the
BLAS set to one thread (two ``ctypes`` calls into numpy's OpenBLAS, about a
microsecond), so its workers are never woken for them; larger products, where
the threads pay off, keep the BLAS's thread count (the user's, or the one
``threadpoolctl`` set). The switch is used only for an OpenBLAS with its own
pthreads pool, found through ``threadpoolctl``'s public ``info()``; with any
other BLAS, or none found, :func:`matmul` is plain ``np.matmul``.
"""

from __future__ import annotations

import ctypes
import itertools

import numpy as np

__all__ = ["THREADED_MACS", "matmul", "one_thread"]

#: Multiply-adds from which a product runs on the BLAS's threads: below, a product takes under
#: about 0.3 ms on one core, and splitting it gains less than the spinning threads cost.
THREADED_MACS = 1 << 24

_UNSET = object()
_switch = _UNSET  # (get, set) ctypes functions of numpy's OpenBLAS, or None; found on first use


def _find_switch():
    """``(openblas_get_num_threads, openblas_set_num_threads)`` of numpy's OpenBLAS, or None."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return None
    for info in threadpool_info():
        if info.get("internal_api") != "openblas" or info.get("threading_layer") != "pthreads":
            continue
        try:
            lib = ctypes.CDLL(info["filepath"])  # the library numpy loaded: same handle, same state
        except OSError:
            continue
        for prefix, suffix in itertools.product(("", "scipy_"), ("", "64_", "_64")):
            get = getattr(lib, f"{prefix}openblas_get_num_threads{suffix}", None)
            set_ = getattr(lib, f"{prefix}openblas_set_num_threads{suffix}", None)
            if get is not None and set_ is not None:
                get.restype, get.argtypes = ctypes.c_int, []
                set_.restype, set_.argtypes = None, [ctypes.c_int]
                return get, set_
    return None


def _get_switch():
    global _switch
    if _switch is _UNSET:
        _switch = _find_switch()
    return _switch


def _macs(a, b):
    """Multiply-adds of one matrix product of ``a @ b``: numpy runs a stack (batch dims) as one BLAS call
    per matrix, so the threads pay off by the size of each product, not the stack's total."""
    m = a.shape[-2] if a.ndim > 1 else 1
    n = b.shape[-1] if b.ndim > 1 else 1
    return m * a.shape[-1] * n


def one_thread(fn, *args):
    """``fn(*args)`` with numpy's BLAS on one thread (restored after), where it can be switched."""
    switch = _get_switch()
    if switch is None:
        return fn(*args)
    get, set_ = switch
    threads = get()
    if threads <= 1:
        return fn(*args)
    set_(1)
    try:
        return fn(*args)
    finally:
        set_(threads)


def matmul(a, b):
    """``np.matmul(a, b)``, on one BLAS thread when the product has fewer than :data:`THREADED_MACS` multiply-adds."""
    if _macs(a, b) >= THREADED_MACS:
        return np.matmul(a, b)
    return one_thread(np.matmul, a, b)
