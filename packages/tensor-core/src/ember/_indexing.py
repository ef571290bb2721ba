"""``Tensor.__getitem__`` and ``__setitem__`` in terms of registered ops.

A subscript becomes a chain of view ops (``select`` for ints, ``slice`` for
slices, ``unsqueeze`` for None) followed, when tensors or lists appear, by
one ``index`` (read) or ``index_put_`` (write). So autograd, FX and the
compiler only ever see registry ops. Integers (and zero-dim integer tensors)
are applied as ``select`` before advanced indices, as PyTorch does (this
differs from numpy when an int and an index tensor are separated by a slice:
``x[0, :, [0, 1]]`` has shape ``(x.shape[1], 2)`` here, ``(2, x.shape[1])`` in
numpy). As in PyTorch, a short list that holds sequences, tensors, slices, None
or Ellipsis is read as a tuple (``x[[rows, cols]]`` is ``x[rows, cols]``), and
CPU index tensors may index a tensor of any device.
"""

from __future__ import annotations

import operator

import numpy as np

from . import _dtype as D
from ._tensor import Tensor

__all__ = ["getitem", "setitem"]


def _as_index_tensor(key):
    from ._creation import tensor

    if isinstance(key, np.ndarray):
        return tensor(key)
    return tensor(key, dtype=D.bool if _all_bools(key) else D.int64)


def _all_bools(seq):
    flat = np.asarray(seq, dtype=object).reshape(-1)
    return flat.size > 0 and all(isinstance(v, (bool, np.bool_)) for v in flat)


def _dims_used(k):
    if k is None or k is Ellipsis:
        return 0
    if isinstance(k, Tensor) and k.dtype in (D.bool, D.uint8):
        return k.ndim
    if isinstance(k, bool):
        return 0
    return 1


def _sequence_is_tuple(key):
    """PyTorch's (and old numpy's) rule: a short list holding sequences, tensors, slices,
    None or Ellipsis is a tuple of indices, so ``x[[rows, cols]]`` means ``x[rows, cols]``."""
    if len(key) >= 32:
        return False
    return any(isinstance(k, (list, tuple, Tensor, np.ndarray, slice)) or k is None or k is Ellipsis for k in key)


def _normalize_key(key):
    if type(key) is list and _sequence_is_tuple(key):
        key = tuple(key)
    elif not isinstance(key, tuple):
        key = (key,)
    out = []
    for k in key:
        if isinstance(k, np.ndarray) and k.ndim == 0 and k.dtype.kind in "iu" and k.dtype != np.uint8:
            k = int(k)
        elif isinstance(k, (list, np.ndarray)):
            k = _as_index_tensor(k)
        elif isinstance(k, np.integer):
            k = int(k)
        elif (isinstance(k, Tensor) and k.ndim == 0 and k.dtype in _SCALAR_INDEX_DTYPES and k.device.type != "meta"
              and getattr(k, "_values_readable", True)):
            # A zero-dim integer tensor indexes like an int (a select), as in PyTorch. One whose values can't be
            # read (a vmap batch: a value per sample) stays an index tensor, which selects the same elements.
            k = int(k.item())
        out.append(k)
    return out


_SCALAR_INDEX_DTYPES = (D.int8, D.int16, D.int32, D.int64)


def _apply_basic(t, key):
    """Apply ints, slices, None and Ellipsis as views; return the view and the advanced indices (or None)."""
    from ._ops import views

    key = _normalize_key(key)
    if sum(1 for k in key if k is Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    used = sum(_dims_used(k) for k in key)
    if used > t.ndim:
        raise IndexError(f"too many indices for tensor of dimension {t.ndim}")
    result, dim, advanced = t, 0, []
    consumed = 0  # dims of ``t`` indexed so far, for error messages
    for k in key:
        if k is None:
            result = views.unsqueeze(result, dim)
            dim += 1
        elif k is Ellipsis:
            dim += t.ndim - used
            consumed += t.ndim - used
        elif isinstance(k, bool):  # x[True] adds a dim; x[False] adds an empty one
            result = views.unsqueeze(result, dim)
            if not k:
                result = views.slice_op(result, dim, 0, 0)
            dim += 1
        elif isinstance(k, int):
            size = result._data.shape[dim] if dim < result._data.ndim else 0
            if not -size <= k < size:
                raise IndexError(f"index {k} is out of bounds for dimension {consumed} with size {size}")
            result = views.select(result, dim, k)
            consumed += 1
        elif isinstance(k, slice):
            if k.step is not None and int(k.step) <= 0:
                raise ValueError("step must be greater than zero")
            if not (k.start is None and k.stop is None and k.step in (None, 1)):
                result = views.slice_op(result, dim, _int_or_none(k.start), _int_or_none(k.stop), int(k.step or 1))
            dim += 1
            consumed += 1
        elif isinstance(k, Tensor) and k.ndim == 0 and k.dtype in (D.bool, D.uint8):
            # As ``x[True]``: a new dim of size 1, then picked (or not) by an index tensor, so the
            # result is a copy and composes with other advanced indices, as in PyTorch.
            result = views.unsqueeze(result, dim)
            advanced.append((dim, _zero_dim_mask_index(k, t.device)))
            dim += 1
        elif isinstance(k, Tensor):
            if k.device != t.device and k.device.type == "cpu":
                k = k.to(t.device)  # CPU index tensors may index tensors of any device, as in PyTorch
            advanced.append((dim, k))
            dim += _dims_used(k)
            consumed += _dims_used(k)
        else:
            raise IndexError(
                "only integers, slices (`:`), ellipsis (`...`), None and long or byte Variables are valid indices "
                f"(got {type(k).__name__})"
            )
    if not advanced:
        return result, None
    # One entry per index, in order: None for each whole dim skipped, a k-dim mask covering k dims.
    indices, pos = [], 0
    for d, k in advanced:
        indices.extend([None] * (d - pos))
        indices.append(k)
        pos = d + _dims_used(k)
    return result, indices


def _zero_dim_mask_index(mask, device):
    """The int64 index tensor ``[0]`` (mask true) or ``[]`` (false) standing for a zero-dim mask."""
    from ._creation import tensor

    if mask.device.type == "meta":
        raise NotImplementedError("boolean-mask indexing with a meta mask has a data-dependent shape")
    return tensor([0] if bool(mask.item()) else [], dtype=D.int64, device=device)


def _overrides_disabled():
    from ._ops._dispatch import state

    return state.overrides_disabled


def _int_or_none(v):
    return None if v is None else int(v)


def _overriding_in_key(key):
    """Objects in an index that override ember functions but are not tensors (FX proxies), or None.

    ``x[:n]`` with ``n`` a traced value cannot be computed; the proxy records it instead,
    as PyTorch's ``__getitem__`` hands such calls to ``__torch_function__``.
    """
    found = None
    for k in key if type(key) is tuple else (key,):
        tk = type(k)
        if tk in _PLAIN_INDEX_TYPES:
            continue
        parts = (k.start, k.stop, k.step) if tk is slice else (k,)
        for p in parts:
            tp = type(p)
            if tp in _PLAIN_INDEX_TYPES or isinstance(p, Tensor):
                continue
            if hasattr(tp, "__ember_function__"):
                found = (found or []) + [p]
    return found


_PLAIN_INDEX_TYPES = frozenset({int, bool, type(None), type(Ellipsis), Tensor})


def _dispatch_to_override(fn, overloaded, args):
    from .overrides import handle_ember_function

    return handle_ember_function(fn, overloaded, args, {})


def getitem(t, key):
    """``t[key]``: a view for ints/slices/None/Ellipsis, a copy when tensors or lists index."""
    from ._ops import indexing

    if type(key) is not int:
        overloaded = _overriding_in_key(key)
        if overloaded is not None and not _overrides_disabled():
            return _dispatch_to_override(operator.getitem, overloaded, (t, key))
    view, indices = _apply_basic(t, key)
    if indices is None:
        if view is t:  # x[...] or x[:] is still a new view, as in PyTorch
            from ._ops import views

            return views.view(t, tuple(t.shape))
        return view
    return indexing.index(view, indices)


def setitem(t, key, value):
    """``t[key] = value``: writes through the views, broadcasting ``value``."""
    from ._ops import creation, indexing

    overloaded = _overriding_in_key((*key, value) if type(key) is tuple else (key, value))
    if overloaded is not None and not _overrides_disabled():
        _dispatch_to_override(operator.setitem, overloaded, (t, key, value))
        return
    view, indices = _apply_basic(t, key)
    if indices is None:
        if isinstance(value, Tensor):
            creation.copy_(view, value)
        else:
            creation.fill_(view, value)
        return
    if not isinstance(value, Tensor):
        from ._creation import tensor

        if isinstance(value, (bool, int, float, complex, np.number, np.bool_)):
            creation.check_scalar_fits(value, t.dtype)
        value = tensor(value, dtype=t.dtype, device=t.device)
    indexing.index_put_(view, indices, value)
