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

Larger products of a matrix (or a contiguous stack of rows) by one matrix do not wake OpenBLAS's
workers either: :func:`_split_matmul` runs them as ``ember.get_num_threads()`` blocks at once on
ember's own worker threads, each block on one BLAS thread.
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
    """``np.matmul(a, b)``: on one BLAS thread when the product has fewer than :data:`THREADED_MACS`
    multiply-adds; larger ones split over ember's threads (:func:`_split_matmul`) where they can be."""
    if _macs(a, b) < THREADED_MACS:
        return one_thread(np.matmul, a, b)
    threads = _threads()
    switch = _get_switch()
    if threads > 1 and switch is not None and _splittable(a, b):
        return _split_matmul(a, b, threads, switch)
    return np.matmul(a, b)


_BLAS_DTYPES = frozenset(np.dtype(t) for t in (np.float32, np.float64, np.complex64, np.complex128))
_pool = None  # the worker threads of _split_matmul, made on first use
_pool_size = 0


def _threads():
    from ember import _C

    return _C.get_num_threads()


def _splittable(a, b):
    """A product of a matrix (or a contiguous stack of rows) by one matrix, in a BLAS dtype."""
    return (
        b.ndim == 2 and a.ndim >= 2 and a.dtype == b.dtype and a.dtype in _BLAS_DTYPES
        and (a.ndim == 2 or a.flags.c_contiguous)
    )


def _split_matmul(a, b, threads, switch):
    """``a @ b`` as ``threads`` products of row (or column) blocks, run at once on ember's threads,
    each on one BLAS thread.

    OpenBLAS's own workers busy-wait after each threaded call and then fight ember's OpenMP kernels
    for the cores (a small MLP's training step ran 7x slower than with ``OPENBLAS_NUM_THREADS=1``).
    Splitting the product ourselves keeps those workers asleep: numpy releases the GIL inside each
    block's product, so the blocks run in parallel on Python threads.
    """
    lead = a.shape[:-1]
    rows = a.reshape(-1, a.shape[-1])
    m, n = rows.shape[0], b.shape[1]
    out = np.empty((m, n), dtype=np.result_type(a, b))
    by_rows = m >= 8 * threads or m >= n
    extent = m if by_rows else n
    bounds = [extent * i // threads for i in range(threads + 1)]
    blocks = [(bounds[i], bounds[i + 1]) for i in range(threads) if bounds[i + 1] > bounds[i]]

    def product(block):
        start, stop = block
        if by_rows:
            np.matmul(rows[start:stop], b, out=out[start:stop])
        else:
            np.matmul(rows, b[:, start:stop], out=out[:, start:stop])

    get, set_ = switch
    previous = get()
    set_(1)
    try:
        pool = _worker_pool(threads - 1)
        futures = [pool.submit(product, block) for block in blocks[1:]]
        product(blocks[0])
        for future in futures:
            future.result()
    finally:
        set_(previous)
    return out.reshape(*lead, n)


def _worker_pool(size):
    global _pool, _pool_size
    if _pool is None or _pool_size < size:
        from concurrent.futures import ThreadPoolExecutor

        if _pool is not None:
            _pool.shutdown(wait=False)
        _pool = ThreadPoolExecutor(max_workers=size, thread_name_prefix="ember-blas")
        _pool_size = size
    return _pool
