"""numpy's BLAS on one thread for matrix products too small to gain from more.

After each multithreaded call, OpenBLAS's worker threads busy-wait for new work
for a while (``OPENBLAS_THREAD_TIMEOUT``, read once when numpy loads, so ember
cannot set it). On a machine with few cores those spinning workers take the
cores that ember's OpenMP kernels run on next, and the OpenMP threads, spinning
in turn at their barriers, take them back from the next BLAS call: a training
step of a small CNN on two threads ran ten times slower than on one.

:func:`matmul` runs products below :data:`SPLIT_MACS` multiply-adds (per matrix of a stack) with the
BLAS set to one thread (two ``ctypes`` calls into numpy's OpenBLAS, about a
microsecond), so its workers are never woken for them; larger products that
cannot be split (below) keep the BLAS's thread count (the user's, or the one
``threadpoolctl`` set). The switch is used only for an OpenBLAS with its own
pthreads pool, found through ``threadpoolctl``'s public ``info()``; with any
other BLAS, or none found, :func:`matmul` is plain ``np.matmul``.

Products from :data:`SPLIT_MACS` multiply-adds of a matrix (or a contiguous stack of rows) by one matrix
do not wake OpenBLAS's workers either: ``ember._C.split_gemm`` cuts the result into
``ember.get_num_threads()`` blocks computed at once on ember's OpenMP threads, each one call of numpy's
``cblas_sgemm``/``cblas_dgemm`` on one BLAS thread (a 256x128 @ 128x512 float32 product on two threads:
0.21 ms, PyTorch's time; on Python threads, :func:`_split_matmul`, which remains for a BLAS whose cblas
functions are not found, 0.34 ms).
"""

from __future__ import annotations

import ctypes
import itertools

import numpy as np

__all__ = ["THREADED_MACS", "SPLIT_MACS", "matmul", "one_thread", "cblas_gemm"]

#: Multiply-adds from which a product of the recurrent layers' sequence kernels (``nn/modules/_rnn_fused.py``)
#: runs on the BLAS's threads: below, a product takes under about 0.3 ms on one core, and waking OpenBLAS's
#: spinning threads costs more. (:func:`matmul` keeps every product below :data:`SPLIT_MACS` on one thread.)
THREADED_MACS = 1 << 24

#: Multiply-adds from which a splittable product runs as blocks on ember's OpenMP threads
#: (``_C.split_gemm``): about 0.8 ms on one core. Below, waking the OpenMP worker costs more than the
#: second core saves: it sleeps after a short spin (:mod:`ember._openmp`), and in a training step, with
#: 30 us to 1 ms of Python between products, a 256x64 @ 64x64 float32 product took 130-170 us split on
#: two threads against 30-60 on one, a 256x128 @ 128x128 one 220-300 against 100-150. Measured on whole
#: training steps (interleaved, 2 threads), raising the threshold from 2^20 to 2^24 made the model
#: suite's actor_critic step 1.4-1.6x faster, and from 2^24 to 2^25 (GPT-2's 256x128 @ 128x512
#: products, the MLP's 64x784 @ 784x512) its gpt2_small step 7% and mlp step 7% faster.
SPLIT_MACS = 1 << 25

_UNSET = object()
_switch = _UNSET  # (get, set) ctypes functions of numpy's OpenBLAS, or None; found on first use


_gemms = {}  # numpy dtype -> (address of numpy's cblas gemm, ILP64?), found with the switch


def _find_switch():
    """``(openblas_get_num_threads, openblas_set_num_threads)`` of numpy's OpenBLAS, or None; fills
    :data:`_gemms` with the library's ``cblas_sgemm``/``cblas_dgemm``."""
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
                for dtype, name in ((np.float32, "sgemm"), (np.float64, "dgemm")):
                    gemm = getattr(lib, f"{prefix}cblas_{name}{suffix}", None)
                    if gemm is not None:  # the symbols' suffix says 64-bit integers (ILP64)
                        _gemms[np.dtype(dtype)] = (ctypes.cast(gemm, ctypes.c_void_p).value, "64" in suffix)
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


def cblas_gemm(dtype):
    """``(address, ilp64)`` of numpy's ``cblas_sgemm``/``cblas_dgemm`` for numpy ``dtype`` (float32 or
    float64), for C++ kernels that call the BLAS themselves (``split_gemm``, the recurrent layers' sequences,
    attention); None when numpy's BLAS is not an OpenBLAS with its own thread pool whose symbols were found,
    or for other dtypes. Call such kernels through :func:`one_thread`."""
    if _get_switch() is None:
        return None
    return _gemms.get(dtype)


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
    """``np.matmul(a, b)``: on one BLAS thread below :data:`SPLIT_MACS` multiply-adds; from there split
    over ember's threads where it can be (a matrix, or a contiguous stack of rows, by one matrix:
    ``_C.split_gemm``, or Python threads when the BLAS's gemm was not found), else on the BLAS's
    threads. With ``ember.get_num_threads() == 1`` every product runs on one BLAS thread."""
    macs = _macs(a, b)
    if macs < SPLIT_MACS:
        return one_thread(np.matmul, a, b)
    threads = _threads()
    if threads <= 1:  # ember.set_num_threads(1): the BLAS's pool would take the cores the user left to others
        return one_thread(np.matmul, a, b)
    switch = _get_switch()
    if switch is not None and _splittable(a, b):
        out = _split_gemm(a, b, threads)
        return out if out is not None else _split_matmul(a, b, threads, switch)
    return np.matmul(a, b)


def _blas_layout(x):
    """``(transposed, leading dimension)`` of 2-D ``x`` as a row-major BLAS operand, or None (a layout
    BLAS cannot read without a copy: no unit stride, negative or unaligned strides)."""
    size = x.itemsize
    rows, cols = x.shape
    s0, s1 = x.strides
    if (s1 == size or cols == 1) and s0 % size == 0 and s0 // size >= max(1, cols):
        return False, s0 // size
    if (s0 == size or rows == 1) and s1 % size == 0 and s1 // size >= max(1, rows):
        return True, s1 // size
    return None


def _split_gemm(a, b, threads):
    """``a @ b`` (:func:`_splittable`, float32/float64) by ``_C.split_gemm`` on ``threads`` OpenMP threads, the
    BLAS on one thread meanwhile (:func:`one_thread`), or None when numpy's cblas gemm was not found (call
    :func:`_get_switch` first) or an operand's layout needs a copy."""
    gemm = _gemms.get(a.dtype)
    if gemm is None:
        return None
    lead = a.shape[:-1]
    rows = a.reshape(-1, a.shape[-1])
    layout_a, layout_b = _blas_layout(rows), _blas_layout(b)
    if layout_a is None or layout_b is None:
        return None
    from ember import _C

    (m, k), n = rows.shape, b.shape[1]
    out = np.empty((m, n), dtype=a.dtype)
    one_thread(_C.split_gemm, gemm[0], gemm[1], a.dtype == np.float64, layout_a[0], layout_b[0], m, n, k,
               rows.ctypes.data, layout_a[1], b.ctypes.data, layout_b[1], out.ctypes.data, n, threads)
    return out.reshape(*lead, n)


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
