"""The array namespace (``xp``) of a kernel's arrays: numpy on CPU, CuPy on CUDA.

Kernels are written once against numpy's namespace (docs/internals.rst, "The CUDA
backend"). numpy forwards its ufuncs and most functions to CuPy for CuPy arrays, but
not ``np.asarray``/``np.array``/``np.ascontiguousarray``, which try to pull the data to
the host (CuPy refuses). Kernels call :func:`as_array` instead where they turn a
numpy scalar result into a 0-d array, and :func:`array_namespace` where they must create
arrays. Both cost one type check for numpy arrays.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "accumulate", "as_array", "array_namespace", "assign_last", "check_bounds", "cuda_runs_cpu_kernel",
    "is_device_array", "keep_last", "ufunc_at", "values_for_checks",
]

_ndarray = np.ndarray
_generic = np.generic


_device_array_types = set()  # types seen exposing __cuda_array_interface__ (CuPy's computes a dict per read)


def is_device_array(value):
    """Whether ``value`` is a GPU array (anything exposing ``__cuda_array_interface__``: CuPy's)."""
    t = type(value)
    if t in _device_array_types:
        return True
    if hasattr(value, "__cuda_array_interface__"):
        _device_array_types.add(t)
        return True
    return False


def values_for_checks(tensor):
    """``tensor``'s array for reading values (checks, counts): numpy or GPU arrays as they are (a GPU
    array is reduced where it lives, then one scalar is read), anything else (meta, other backends)
    as a host copy."""
    data = tensor._data
    if type(data) is _ndarray or is_device_array(data):
        return data
    return tensor._host_array()


def array_namespace(*values):
    """``cupy`` if any of ``values`` is a GPU array, else ``numpy``."""
    for value in values:
        if type(value) is not _ndarray and is_device_array(value):
            return _cupy()
    return np


def _cupy():
    global _cupy_module
    if _cupy_module is None:
        import cupy

        _cupy_module = cupy
    return _cupy_module


_cupy_module = None


def as_array(value, order=None):
    """``value`` as an array of its own namespace (numpy's ``np.asarray(value, order=order)`` on CPU).

    numpy scalars and Python numbers become numpy 0-d arrays; numpy arrays pass through (copied only
    for ``order``); GPU arrays stay on the GPU.
    """
    if type(value) is _ndarray:
        return value if order is None else np.asarray(value, order=order)
    if isinstance(value, _generic):  # numpy's scalar results (tested first: the common case on CPU)
        return np.asarray(value)
    if is_device_array(value):
        if order == "C" and not value.flags.c_contiguous:
            import cupy

            return cupy.ascontiguousarray(value)
        return value
    return np.asarray(value, order=order)


# -- scatter and scan helpers: numpy's ufunc.at / ufunc.accumulate for CuPy arrays --------------------------
# CuPy's ufuncs have no general ``at``/``accumulate``/``reduceat``: ``cupy.add.at`` (atomic adds) takes
# only some dtypes, and the other ufuncs raise NotImplementedError. The helpers below give numpy's results
# with CuPy operations (sorts, scans, fancy indexing with distinct positions); on numpy arrays they call
# numpy directly.

#: dtypes that CuPy's add.at accepts (cupyx.scatter_add, the same kernel, is deprecated in CuPy 14)
_SCATTER_ADD_DTYPES = frozenset(np.dtype(n) for n in ("int32", "int64", "uint32", "uint64", "float16", "float32",
                                                      "float64"))
#: the most repeats of one position that ``ufunc_at`` applies one occurrence at a time (numpy's exact order);
#: beyond it, the repeats combine by a log-step segmented scan first (same values up to rounding)
_MAX_ROUNDS = 64
#: ufuncs whose repeats may be combined in any grouping (the segmented scan); others always go round by round
_ASSOCIATIVE = frozenset(("add", "multiply", "maximum", "minimum", "fmax", "fmin", "logical_or", "logical_and",
                          "logical_xor", "bitwise_or", "bitwise_and", "bitwise_xor", "logaddexp", "logaddexp2"))


def _cupy():
    import cupy

    return cupy


def ufunc_at(ufunc, target, positions, values):
    """numpy's ``ufunc.at(target, positions, values)`` for numpy and CuPy arrays.

    ``target[positions[i]] = ufunc(target[positions[i]], values[i])`` for every ``i`` in order, so repeated
    positions combine all their values.

    Args:
        ufunc: a binary numpy ufunc (``np.add``, ``np.multiply``, ``np.maximum``, ``np.minimum``,
            ``np.logical_or``, ``np.logical_and``, ...); the CuPy ufunc of the same name is used on CuPy arrays.
        target: a 1-D C-contiguous array, updated in place.
        positions: 1-D int64 indices into ``target``, in ``[0, target.size)`` (checked by the caller).
        values: 1-D, of ``target``'s dtype, as long as ``positions`` (or a scalar).

    On CuPy: ``add`` uses ``cupy.add.at`` (atomic, so float sums may round differently from numpy's
    sequential order); small integers add in int64 and wrap back as numpy does; complex adds its real and
    imaginary parts; bool ``or``/``and`` (numpy's ``add``/``maximum`` and ``multiply``/``minimum`` of bool)
    count hits. Every other ufunc and dtype runs in numpy's order: the positions are stably sorted and round
    ``r`` applies the ``r``-th occurrence of each position with plain fancy indexing (distinct positions, no
    race). This costs a host sync for the number of rounds (the largest repeat count).
    """
    if type(target) is _ndarray:
        ufunc.at(target, positions, values)
        return
    cp = _cupy()
    positions = cp.asarray(positions).reshape(-1)
    if positions.size == 0:
        return
    values = cp.ascontiguousarray(cp.broadcast_to(cp.asarray(values, dtype=target.dtype), positions.shape))
    name = ufunc.__name__
    dtype = target.dtype
    if dtype == np.bool_ and name in ("add", "maximum", "logical_or", "bitwise_or"):
        _bool_at(cp, target, positions, values, any_true=True)
        return
    if dtype == np.bool_ and name in ("multiply", "minimum", "logical_and", "bitwise_and"):
        _bool_at(cp, target, positions, values, any_true=False)
        return
    if name == "add":
        _add_at(cp, target, positions, values)
        return
    ordered_at(cp, getattr(cp, name), target, positions, values)


def _bool_at(cp, target, positions, values, any_true):
    """``or``/``and`` of bool values into ``target`` at ``positions``: by counting the deciding values."""
    hits = cp.zeros(target.size, dtype=np.int32)
    deciding = values if any_true else cp.logical_not(values)
    cp.add.at(hits, positions, deciding.astype(np.int32))
    if any_true:
        cp.logical_or(target, hits > 0, out=target)
    else:
        cp.logical_and(target, hits == 0, out=target)


def _add_at(cp, target, positions, values):
    """``add.at`` for every dtype: CuPy's own where it applies, else through a wider dtype or parts."""
    dtype = target.dtype
    if dtype in _SCATTER_ADD_DTYPES:
        cp.add.at(target, positions, values)
    elif dtype.kind == "c":  # the real and imaginary parts add up separately
        part = np.dtype(np.float32) if dtype == np.complex64 else np.dtype(np.float64)
        real = cp.zeros(target.size, dtype=part)
        imag = cp.zeros(target.size, dtype=part)
        cp.add.at(real, positions, cp.ascontiguousarray(values.real))
        cp.add.at(imag, positions, cp.ascontiguousarray(values.imag))
        hit = cp.zeros(target.size, dtype=np.int32)
        cp.add.at(hit, positions, cp.ones(positions.size, dtype=np.int32))
        touched = hit > 0  # only touched positions change (adding 0 could turn -0.0 into 0.0)
        sums = cp.empty(target.size, dtype=dtype)  # set part by part: `real + 1j * imag` would turn an
        parts = sums.view(part).reshape(target.size, 2)  # inf or nan imaginary part into a nan real part
        parts[:, 0] = real
        parts[:, 1] = imag
        cp.copyto(target, target + sums, where=touched)
    elif dtype.kind in "iu":  # int8/int16/uint8/uint16: exact in int64, then wrapped as numpy's add wraps
        wide = cp.zeros(target.size, dtype=np.int64)
        cp.add.at(wide, positions, values.astype(np.int64))
        target[...] = (target.astype(np.int64) + wide).astype(dtype)
    else:
        ordered_at(cp, cp.add, target, positions, values)


def _runs(xp, sorted_positions):
    """(index of each run's first element, each element's rank within its run) of a sorted array."""
    n = sorted_positions.size
    start = xp.empty(n, dtype=bool)
    start[:1] = True
    xp.not_equal(sorted_positions[1:], sorted_positions[:-1], out=start[1:])
    first = xp.flatnonzero(start)  # (CuPy: the run count is host metadata; one sync)
    run = xp.cumsum(start, dtype=np.int64) - 1
    rank = xp.arange(n, dtype=np.int64) - first[run]
    return first, rank


def ordered_at(xp, ufunc, target, positions, values):
    """``ufunc.at(target, positions, values)`` in numpy's order, with no scattered writes to one position.

    Written over ``xp`` (numpy or CuPy; ``ufunc`` is that namespace's): stable-sort the positions; when no
    position repeats more than ``_MAX_ROUNDS`` times, round ``r`` applies the ``r``-th occurrence of every
    position (``target[p] = ufunc(target[p], v)`` with distinct ``p``), which is numpy's sequential order
    exactly. More repeats of an associative ufunc (``_ASSOCIATIVE``) first combine each position's values by
    a log-step segmented scan (the same result up to floating-point rounding), then apply them once; other
    ufuncs (``subtract``...) always go round by round.
    """
    n = positions.size
    if n == 0:
        return
    order = xp.argsort(positions, kind="stable")
    sorted_positions = positions[order]
    sorted_values = values[order]
    first, rank = _runs(xp, sorted_positions)
    rounds = int(rank.max()) + 1  # the largest repeat count (CuPy: a host sync)
    if rounds == 1:
        target[sorted_positions] = ufunc(target[sorted_positions], sorted_values)
        return
    if rounds <= _MAX_ROUNDS or ufunc.__name__ not in _ASSOCIATIVE:
        by_round = xp.argsort(rank, kind="stable")  # round r: the r-th occurrence of each position
        bounds = xp.cumsum(xp.bincount(rank, minlength=rounds))
        bounds = bounds.get() if type(bounds) is not _ndarray else bounds  # host metadata: where rounds end
        p_all, v_all = sorted_positions[by_round], sorted_values[by_round]
        low = 0
        for high in bounds.tolist():
            p = p_all[low:high]
            target[p] = ufunc(target[p], v_all[low:high])
            low = high
        return
    # many repeats: an inclusive scan within each run (Hillis-Steele, log2(rounds) steps), then one write
    combined = sorted_values.copy()
    step = 1
    while step < rounds:
        same = sorted_positions[step:] == sorted_positions[:-step]
        combined[step:] = xp.where(same, ufunc(combined[:-step], combined[step:]), combined[step:])
        step *= 2
    ends = xp.concatenate([first[1:] - 1, xp.asarray([n - 1], dtype=first.dtype)])
    p = sorted_positions[ends]
    target[p] = ufunc(target[p], combined[ends])


def keep_last(positions):
    """Indices ``i`` (ascending) of the elements of the 1-D ``positions`` that no later element repeats.

    ``target[positions[keep]] = values[keep]`` then writes what a sequential ``target[positions] = values``
    leaves (the last write wins) without racing writes to one position. One host sync (the count).
    """
    xp = array_namespace(positions)
    n = positions.size
    if n < 2:
        return xp.arange(n, dtype=np.int64)
    order = xp.argsort(positions, kind="stable")
    ordered = positions[order]
    last = xp.empty(n, dtype=bool)
    last[-1:] = True
    xp.not_equal(ordered[1:], ordered[:-1], out=last[:-1])
    return xp.sort(order[last])


def assign_last(target, positions, values):
    """``target[positions] = values`` on a 1-D ``target`` where, on CuPy too, the last of repeated positions wins.

    numpy arrays assign directly (numpy writes in order). CuPy's fancy assignment leaves repeated positions with
    any of their values, so only each position's last value is written (:func:`keep_last`).
    """
    if type(target) is _ndarray:
        target[positions] = values
        return
    cp = _cupy()
    positions = positions.reshape(-1)
    values = cp.broadcast_to(cp.asarray(values, dtype=target.dtype), positions.shape)
    keep = keep_last(positions)
    target[positions[keep]] = values[keep]


def accumulate(ufunc, x, axis):
    """numpy's ``ufunc.accumulate(x, axis=axis)`` (a running ``ufunc`` along ``axis``) for numpy and CuPy arrays.

    On CuPy, ``add``/``multiply`` use ``cumsum``/``cumprod``; other associative ufuncs (``maximum``,
    ``minimum``, ``logaddexp``, ...) run a log-step (Hillis-Steele) scan: ``ceil(log2(n))`` whole-array
    steps. For ``maximum``/``minimum`` the values equal numpy's exactly (NaN propagates the same way).
    """
    if type(x) is _ndarray:
        return ufunc.accumulate(x, axis=axis)
    cp = _cupy()
    name = ufunc.__name__
    if name == "add":
        return cp.cumsum(x, axis=axis, dtype=x.dtype)
    if name == "multiply":
        return cp.cumprod(x, axis=axis, dtype=x.dtype)
    return log_step_scan(cp, getattr(cp, name), x, axis)


def log_step_scan(xp, ufunc, x, axis):
    """The inclusive scan of ``x`` along ``axis`` by the associative binary ``ufunc``, in log2(n) array steps.

    Step ``k`` combines each element with the one ``2**k`` before it (the earlier one as the left operand),
    so after ``ceil(log2(n))`` steps element ``i`` holds ``ufunc`` over elements ``0..i``.
    """
    if x.ndim == 0:
        return x.copy()
    out = xp.moveaxis(x, axis, -1).copy()
    n = out.shape[-1]
    step = 1
    while step < n:
        out[..., step:] = ufunc(out[..., :-step], out[..., step:])
        step *= 2
    return xp.ascontiguousarray(xp.moveaxis(out, -1, axis))


def check_bounds(idx, low, high):
    """The first value of the integer array ``idx`` outside ``[low, high)``, or None (a single sync on CuPy).

    PyTorch's CUDA kernels check indices with a device assert, which also syncs; here the check is one
    reduction and one host read, then, only when a value is out of range, a search for the first one.
    While ember records a CUDA graph (no host read is possible) the check is recorded instead and raises
    ``IndexError`` at the next synchronizing call after a replay that found a bad index
    (:func:`ember.cuda._async_errors.record_check`); the call itself returns None.
    """
    if idx.size == 0:
        return None
    xp = array_namespace(idx)
    flat = idx.reshape(-1)
    bad = (flat < low) | (flat >= high)
    if xp is np:
        if not bad.any():
            return None
    else:
        any_bad = bad.any()
        if _recorded_check(any_bad, low, high) or not _host_bool("an index bounds check", any_bad):
            return None
    return int(flat[xp.flatnonzero(bad)[0]])


def _recorded_check(flag, low, high):
    """Whether the bounds check of device ``flag`` was recorded into the CUDA graph being captured."""
    from ..cuda import _async_errors

    def error():
        return IndexError(f"an index outside [{low}, {high}) was found during a CUDA graph replay")

    return _async_errors.record_check(flag, error)


def _host_bool(reason, flag):
    """``bool(flag)`` of a GPU array: a read that waits for the GPU, reported as ``reason``
    (:func:`ember.cuda._sync.host_sync`)."""
    from ..cuda._sync import host_sync

    return host_sync(reason, lambda: bool(flag))


def cuda_runs_cpu_kernel(op):
    """Give the composite ``op`` a CUDA kernel: its CPU kernel (written over numpy/CuPy) run on CuPy arrays.

    Without a CUDA kernel, a composite runs its decomposition on CUDA, whose checks and messages can differ
    from the kernel's (an out-of-range index raising ``index``'s error rather than the op's own). The CUDA
    backend's generic wrapper (``ember.cuda._backend.fallback_kernel``) runs the CPU kernel: it moves zero-dim
    CPU tensor arguments to the GPU and reports a kernel that leaves the numpy namespace.
    """

    def kernel(*args, **kwargs):
        from ..cuda._backend import fallback_kernel

        return fallback_kernel(op)(*args, **kwargs)

    kernel.__name__ = f"{op.name}_cuda"
    op.register_kernel("cuda", kernel)
