"""``out=`` arguments: write an op's result into tensors the caller provides."""

from __future__ import annotations

import numpy as np

from .. import _dtype as D
from .._tensor import Tensor
from . import _dispatch
from ._cpu_pointwise import MIN_ELEMENTS

__all__ = ["write_out", "write_direct"]


def write_direct(op, out, args, kwargs, scan):
    """Compute ``op(*args, **kwargs)`` straight into ``out``'s memory, or return None (then: :func:`write_out`).

    Taken for an op with a C++ writer (``op.cpu_into``, see :mod:`ember._ops._cpu_pointwise`), a large
    CPU ``out`` (any size for the writers of numpy's bits: their ``small`` twins) of exactly the result's
    dtype and shape, no active dispatch mode and nothing that
    requires grad; the writer may still refuse (an ``out`` that partly overlaps an input, type
    promotion), and nothing has been written then. The meta function runs first, so errors are the
    general path's (a writer whose ``checks_arguments`` is true takes only calls the meta function
    accepts, and checks the result's shape itself: the meta function is skipped). ``out``'s version
    counter is bumped, as ``copy_`` into it would.
    """
    into = getattr(op, "cpu_into", None)
    if into is None or type(out) is not Tensor or _dispatch.ops_intercepted():
        return None
    data = out._data
    if type(data) is not np.ndarray or scan.device is None or scan.device.type != "cpu":
        return None
    if data.size < MIN_ELEMENTS:
        into = getattr(into, "small", None)  # the writers of numpy's bits take small outputs too
        if into is None:
            return None
    if _dispatch.state.grad_enabled and (scan.needs_grad or out.requires_grad):
        return None  # write_out raises PyTorch's error
    if not getattr(into, "checks_arguments", False):
        result = op.meta(*args, **kwargs)
        if tuple(result.shape) != data.shape or result.dtype != data.dtype:
            return None
    if not into(data, *args, **kwargs):
        return None
    out._bump_version()
    return out


def write_out(op, out, result):
    """Copy ``result`` (a tensor or tuple of tensors) into ``out`` and return ``out``.

    An ``out`` of the wrong shape is resized when it has no elements (as PyTorch
    does); otherwise a shape mismatch is an error rather than a silent resize.

    Raises:
        RuntimeError: for a dtype that the result can't be cast to, a device
            mismatch, or a non-empty ``out`` of a different shape; when grad mode
            is on and an input (hence the result) or ``out`` requires grad, as in
            PyTorch: ``out=`` does not support automatic differentiation.
        TypeError: if ``out`` is not a tensor (or a tuple of them for multi-output ops).
    """
    if _dispatch.state.grad_enabled and _requires_grad(result, out):
        raise RuntimeError(
            f"{op.name}(): functions with out=... arguments don't support automatic differentiation, "
            "but one of the arguments requires grad."
        )
    if isinstance(result, tuple):
        if not isinstance(out, (tuple, list)) or len(out) != len(result):
            raise TypeError(f"{op.name}(): argument 'out' must be a tuple of {len(result)} Tensors")
        for o, r in zip(out, result):
            _write_one(op, o, r)
        return op.return_type(*out) if op.return_type is not None else tuple(out)
    _write_one(op, out, result)
    return out


def _requires_grad(result, out):
    """Whether the result (computed from an input that requires grad) or an ``out`` tensor requires grad."""
    results = result if isinstance(result, tuple) else (result,)
    outs = out if isinstance(out, (tuple, list)) else (out,)
    for t in (*results, *outs):
        if isinstance(t, Tensor) and t.requires_grad:
            return True
    return False


def _write_one(op, out, result):
    if not isinstance(out, Tensor):
        raise TypeError(f"{op.name}(): argument 'out' must be Tensor, not {type(out).__name__}")
    if out.device != result.device:
        raise RuntimeError(
            f"Expected out tensor to have device {result.device}, but got {out.device} instead (op {op.name})"
        )
    if not D.can_cast(result.dtype, out.dtype):
        raise RuntimeError(f"result type {result.dtype} can't be cast to the desired output type {out.dtype}")
    if tuple(out.shape) != tuple(result.shape):
        if out.numel() != 0:
            raise RuntimeError(
                f"{op.name}(): out has shape {list(out.shape)} but the result has shape {list(result.shape)}; "
                "pass an out tensor of the right shape or an empty one"
            )
        _resize_empty(out, result)
    if not _copy_small(out, result):
        out.copy_(result)


def _copy_small(out, result):
    """``out.copy_(result)`` without its dispatch, for small CPU arrays of one dtype and shape: True, or False.

    Outside any dispatch mode, and where copy_ records nothing (write_out has raised if grad mode is on
    and ``out`` requires grad), copy_ is numpy's copy and a version bump, as :func:`write_direct` writes;
    large arrays go to copy_ (its threaded copy).
    """
    if type(out) is not Tensor or type(result) is not Tensor or _dispatch.ops_intercepted():
        return False
    dst, src = out._data, result._data
    if (type(dst) is not np.ndarray or type(src) is not np.ndarray or src.size >= MIN_ELEMENTS
            or dst.dtype != src.dtype or dst.shape != src.shape):
        return False
    np.copyto(dst, src)
    out._bump_version()
    return True


def _resize_empty(out, result):
    """Give an empty ``out`` fresh storage of the result's shape (it had no data to keep)."""
    from .creation import empty

    fresh = empty(result.shape, dtype=out.dtype, device=out.device)
    out._set_data(fresh._data)
