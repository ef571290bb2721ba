"""cuFFT plans called directly for the FFT prims on CUDA arrays, cached in ember's own small LRU.

``cupyx.scipy.fft`` costs about 50 µs of host time per call on the H100's machine (argument
normalisation, its plan-cache lookup, copies to the layout it wants and a separate normalisation
kernel) against about 20 µs for a whole ``torch.fft.fft``. :func:`transform` takes the common case
straight to cuFFT: the transformed dims are the trailing ones of a row-major array (at most three of
them, cuFFT's limit for one plan), so one ``cufftPlanMany`` with the default layout covers the batch;
the plan (and its work area) is kept per (device, type, sizes, batch); the norm's scale is one in-place
multiply, skipped when it is 1. Anything else returns None and the caller uses ``cupyx.scipy.fft``.

cuFFT's complex-to-real transforms overwrite their input, so ``c2r`` transforms a copy (as
``cupyx.scipy.fft`` does). CuPy is imported on the first call only.
"""

from __future__ import annotations

import collections
import math

import numpy as np

__all__ = ["transform", "clear_cache", "cache_size", "CACHE_CAPACITY"]

#: Plans kept (least recently used dropped first); each holds its cuFFT work area on the GPU.
CACHE_CAPACITY = 32

_INT_MAX = 2**31 - 1
_MAX_RANK = 3
# cufft.h's cufftType values and directions (CuPy's cupy.cuda.cufft has the same numbers)
_C2C, _R2C, _C2R, _Z2Z, _D2Z, _Z2D = 0x29, 0x2A, 0x2C, 0x69, 0x6A, 0x6C
_FORWARD, _INVERSE = -1, 1
_TYPES = {
    ("c2c", np.dtype(np.complex64)): (_C2C, np.dtype(np.complex64)),
    ("c2c", np.dtype(np.complex128)): (_Z2Z, np.dtype(np.complex128)),
    ("r2c", np.dtype(np.float32)): (_R2C, np.dtype(np.complex64)),
    ("r2c", np.dtype(np.float64)): (_D2Z, np.dtype(np.complex128)),
    ("c2r", np.dtype(np.complex64)): (_C2R, np.dtype(np.float32)),
    ("c2r", np.dtype(np.complex128)): (_Z2D, np.dtype(np.float64)),
}

_plans = collections.OrderedDict()  # (device, type, sizes, batch) -> cupy.cuda.cufft.PlanNd


def clear_cache():
    """Drop every cached plan (their work areas go back to CuPy's pool)."""
    _plans.clear()


def cache_size():
    """How many plans are cached."""
    return len(_plans)


def _plan(device, fft_type, sizes, in_dims, out_dims, batch):
    """The cached plan of ``batch`` transforms of ``sizes`` points, reading row-major signals of ``in_dims``
    one after the other and writing row-major ones of ``out_dims`` (they differ in the last dim for
    r2c/c2r: the complex side holds ``n // 2 + 1`` bins)."""
    key = (device, fft_type, sizes, batch)
    plan = _plans.get(key)
    if plan is not None:
        if len(_plans) > 1:
            _plans.move_to_end(key)
        return plan
    from cupy.cuda import cufft  # (on a miss only: a from-import of a package's module costs a Python call)

    plan = cufft.PlanNd(list(sizes), list(in_dims), 1, math.prod(in_dims), list(out_dims), 1, math.prod(out_dims),
                        fft_type, batch, "C", -1, None)
    _plans[key] = plan
    if len(_plans) > CACHE_CAPACITY:
        _plans.popitem(last=False)
    return plan


def _scale(norm, forward, count):
    """The factor a transform of ``count`` points needs under ``norm`` (NumPy's meaning) in its direction."""
    if norm == "ortho":
        return 1 / math.sqrt(count)
    if (norm == "forward") == forward:
        return 1 / count
    return 1.0


def transform(x, axes, norm, family, forward=True, last_dim_size=None, overwrite_x=False):
    """The DFT of CuPy array ``x`` over ``axes`` through a cached cuFFT plan, or None where it does not apply.

    Args:
        x: a CuPy array, complex64/complex128 for ``"c2c"`` and ``"c2r"``, float32/float64 for ``"r2c"``.
        axes (tuple[int]): distinct non-negative dims.
        norm (str): ``"backward"``, ``"ortho"`` or ``"forward"``.
        family (str): ``"c2c"``, ``"r2c"`` (one-sided) or ``"c2r"``.
        forward (bool): the direction of a ``"c2c"`` transform (``"r2c"`` is forward, ``"c2r"`` inverse).
        last_dim_size (int): ``"c2r"``'s output size along the last axis (its input has ``size // 2 + 1``).
        overwrite_x (bool): ``x`` is a C-contiguous array the caller gives up: ``"c2r"`` transforms it in place
            of a copy (cuFFT overwrites a c2r input).

    Returns:
        A new C-contiguous CuPy array, or None when the axes are not the trailing dims of ``x`` in order
        (any order for ``"c2c"``), there are more than three of them, ``x`` is empty, a size exceeds int32,
        or the dtype is not one of the above.
    """
    spec = _TYPES.get((family, x.dtype))
    ndim = x.ndim
    rank = len(axes)
    if spec is None or not 0 < rank <= _MAX_RANK or x.size == 0:
        return None
    import cupy

    device = cupy.cuda.runtime.getDevice()
    if x.data.device_id != device:  # a plan runs on the current GPU
        return None
    trailing = tuple(range(ndim - rank, ndim))
    if (tuple(sorted(axes)) if family == "c2c" else tuple(axes)) != trailing:
        return None
    fft_type, out_dtype = spec
    sizes = x.shape[ndim - rank:]
    if family == "c2r":
        if last_dim_size is None or sizes[-1] != last_dim_size // 2 + 1:
            return None
        sizes = sizes[:-1] + (last_dim_size,)
        out_shape = x.shape[:ndim - rank] + sizes
        if not (overwrite_x and x._c_contiguous):
            x = x.copy()  # cuFFT's c2r overwrites its input; the copy is row-major
        forward = False
    else:
        if not x._c_contiguous:
            x = cupy.ascontiguousarray(x)
        out_shape = x.shape
        if family == "r2c":
            out_shape = x.shape[:-1] + (sizes[-1] // 2 + 1,)
            forward = True
    batch = math.prod(x.shape[:ndim - rank])
    if max(x.size, math.prod(out_shape), batch) > _INT_MAX:
        return None
    out = cupy.ndarray(out_shape, out_dtype)  # (cupy.empty is a Python wrapper of this)
    lead = ndim - rank
    plan = _plan(device, fft_type, tuple(int(n) for n in sizes), tuple(x.shape[lead:]), tuple(out_shape[lead:]),
                 int(batch))
    plan.fft(x, out, _FORWARD if forward else _INVERSE)
    scale = _scale(norm, forward, math.prod(sizes))
    if scale != 1.0:
        out *= scale
    return out
