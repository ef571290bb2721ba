"""Order statistics: median, nanmedian, mode, quantile and nanquantile."""

from __future__ import annotations

import numpy as np

from .. import _dtype as D
from .._meta import MetaArray
from .._tensor import Tensor
from ._array_module import array_namespace as _array_namespace
from ._pointwise_helpers import _torch_name
from ._reduction_helpers import (
    _I64,
    _LOW_FLOATS,
    _REDUCTION,
    _check_nonempty_dims,
    _check_tensor,
    _data_for_checks,
    _one_dim,
    _out_shape,
    _return_type,
    _select_rows,
    _sort_order,
    _to_last,
)
from ._registry import defop
from ._shapes import wrap_dim

__all__ = []

#: Ops of this module that are also Tensor methods (see ember._tensor_methods).
METHODS: list[str] = ["median", "nanmedian", "mode", "quantile", "nanquantile"]
#: Tensor method aliases: alias name -> op name.
ALIASES: dict[str, str] = {}


# -- median, nanmedian, mode, quantile, nanquantile -------------------------------------------------------

_median_type = _return_type("median", ["values", "indices"])
_nanmedian_type = _return_type("nanmedian", ["values", "indices"])
_mode_type = _return_type("mode", ["values", "indices"])


def _median_op(name, ignore_nan, return_type):
    def meta(input, dim=None, keepdim=False):
        _check_tensor(name, input)
        if input.dtype is D.bool or input.dtype.is_complex:
            raise RuntimeError(f"{name}(): not implemented for {_torch_name(input.dtype)} inputs")
        data = input._data
        if dim is None:
            if keepdim:
                raise TypeError(f"{name}(): 'keepdim' needs a 'dim'")
            return MetaArray((), data.dtype)
        d = _one_dim(name, dim, data.ndim)
        _check_nonempty_dims(name, data.shape, (d,))
        shape = _out_shape(data.shape, (d,), keepdim)
        return MetaArray(shape, data.dtype), MetaArray(shape, _I64)

    def cpu(input, dim=None, keepdim=False):
        data = input._data
        if dim is None:
            flat = data.reshape(-1)
            if flat.size == 0:  # PyTorch: NaN, or the smallest value of an integer dtype
                fill = np.nan if data.dtype.kind == "f" or data.dtype in _LOW_FLOATS else np.iinfo(data.dtype).min
                return np.full((), fill, dtype=data.dtype)
            values, _ = _median_rows(flat.reshape(1, -1), ignore_nan)
            return values.reshape(())
        d = wrap_dim(dim, data.ndim)
        rows = _to_last(data, d)
        lead = rows.shape[:-1]
        values, indices = _median_rows(rows.reshape(-1, rows.shape[-1]), ignore_nan)
        values, indices = values.reshape(lead), indices.reshape(lead)
        if keepdim and data.ndim:
            values, indices = np.expand_dims(values, d), np.expand_dims(indices, d)
        return values, indices

    meta.__name__ = name
    what = "ignoring NaN (NaN only where all are NaN)" if ignore_nan else "NaN if any element is NaN"
    meta.__doc__ = f"""The median of ``input`` ({what}): over all elements, or along ``dim`` with its index.

    For an even count this is the lower of the two middle values (no averaging, as in PyTorch).

    Args:
        input (Tensor): a real (not bool) tensor.
        dim (int, optional): the dim to reduce; without it, a zero-dim tensor of the median of all elements.
        keepdim (bool): keep the reduced dim with size 1.

    Returns:
        Tensor, or a namedtuple ``(values, indices)`` when ``dim`` is given. Among equal values the index is
        not specified (PyTorch's CPU kernel may return any of them).

    Raises:
        RuntimeError: for bool or complex inputs.
        IndexError: when ``dim`` has size 0.

    Example:
        >>> import ember
        >>> ember.{name}(ember.tensor([4., 1., 3., 2.]))
        tensor(2.)
    """
    return defop(name, meta, cpu=cpu, has_out=True, tags=_REDUCTION, return_type=return_type)


def _median_rows(rows, ignore_nan):
    """Lower median and its index of each row of a 2-D array (rows of length >= 1)."""
    n = rows.shape[1]
    if rows.dtype.kind == "f" or rows.dtype in _LOW_FLOATS:
        nans = np.isnan(rows).sum(axis=1)
    else:
        nans = _array_namespace(rows).zeros(rows.shape[0], dtype=_I64)
    valid = n - nans
    if ignore_nan:
        pos = np.where(valid > 0, (valid - 1) // 2, 0)
    else:  # a row with NaN: its first NaN (sorted last, in index order)
        pos = np.where(nans > 0, valid, (n - 1) // 2)
    return _select_rows(rows, pos.astype(_I64, copy=False))


median = _median_op("median", False, _median_type)
nanmedian = _median_op("nanmedian", True, _nanmedian_type)


def _mode_meta(input, dim=-1, keepdim=False):
    """The most frequent value along ``dim`` and the index of its last occurrence.

    Among equally frequent values the smallest wins. The index is that of the last occurrence of the value
    (PyTorch's CPU kernel returns that one for small rows; for large rows it leaves the occurrence unspecified).

    Args:
        input (Tensor): a real or bool tensor.
        dim (int): the dim (the last by default).
        keepdim (bool): keep the reduced dim with size 1.

    Returns:
        tuple[Tensor, Tensor]: a namedtuple ``(values, indices)``.

    Raises:
        RuntimeError: for complex inputs.
        IndexError: when ``dim`` has size 0.

    Example:
        >>> import ember
        >>> ember.mode(ember.tensor([2, 1, 2, 3, 1, 2]))
        mode(values=tensor(2), indices=tensor(5))
    """
    _check_tensor("mode", input)
    if input.dtype.is_complex:
        raise RuntimeError("mode(): not implemented for complex inputs")
    data = input._data
    d = _one_dim("mode", dim, data.ndim)
    _check_nonempty_dims("mode", data.shape, (d,))
    shape = _out_shape(data.shape, (d,), keepdim)
    return MetaArray(shape, data.dtype), MetaArray(shape, _I64)


def _mode_cpu(input, dim=-1, keepdim=False):
    data = input._data
    d = wrap_dim(dim, data.ndim)
    rows = _to_last(data, d)
    lead = rows.shape[:-1]
    rows = rows.reshape(-1, rows.shape[-1])
    m, n = rows.shape
    xp = _array_namespace(rows)
    if m == 0:
        values, indices = xp.empty(0, data.dtype), xp.empty(0, _I64)
    else:
        order = _sort_order(rows, 1, False)
        ordered = np.take_along_axis(rows, order, axis=1)
        starts = xp.ones((m, n), dtype=bool)
        starts[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
        flat_starts = np.flatnonzero(starts)  # runs of equal values, row by row
        lengths = np.diff(np.append(flat_starts, m * n))
        run_rows = flat_starts // n
        if xp is np:
            first_run = np.searchsorted(run_rows, xp.arange(m))
            longest = np.maximum.reduceat(lengths, first_run)
            candidates = np.flatnonzero(lengths == longest[run_rows])
            chosen = candidates[np.searchsorted(run_rows[candidates], xp.arange(m))]  # first (smallest) per row
        else:  # CuPy (no reduceat): sort the runs by (row, longest first), stably (smaller values first)
            key = run_rows * (n + 1) + (n - lengths)
            by_key = xp.argsort(key, kind="stable")
            chosen = by_key[xp.searchsorted(key[by_key], xp.arange(m, dtype=key.dtype) * (n + 1))]
        ends = flat_starts[chosen] + lengths[chosen] - 1  # stable order: the run's end is its largest index
        values = ordered.reshape(-1)[ends]
        indices = order.reshape(-1)[ends].astype(_I64, copy=False)
    values, indices = values.reshape(lead), indices.reshape(lead)
    if data.ndim == 0:
        return values.reshape(()).copy(), indices.reshape(())
    if keepdim:
        values, indices = np.expand_dims(values, d), np.expand_dims(indices, d)
    return values, indices


mode = defop("mode", _mode_meta, cpu=_mode_cpu, has_out=True, tags=_REDUCTION, return_type=_mode_type)

_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile_op(name, ignore_nan):
    def meta(input, q, dim=None, keepdim=False, *, interpolation="linear"):
        _check_tensor(name, input)
        if input.dtype not in (D.float32, D.float64):
            raise RuntimeError(f"{name}() input tensor must be either float or double dtype")
        if isinstance(q, Tensor):
            if q.dtype is not input.dtype:
                raise RuntimeError(f"{name}() q tensor must be same dtype as the input tensor")
            if q.ndim > 1:
                raise RuntimeError(f"{name}() q must be a scalar or 1D tensor")
            if q.device.type != "meta":
                values = _data_for_checks(q)  # (CuPy: checked on the GPU, one bool read back)
                if values.size and not ((values >= 0) & (values <= 1)).all():
                    raise RuntimeError(f"{name}() q values must be in the range [0, 1]")
            q_shape = tuple(q.shape)
        elif isinstance(q, (int, float)) and not isinstance(q, bool):
            if not 0 <= q <= 1:
                raise RuntimeError(f"{name}() q must be in the range [0, 1] but got {q}")
            q_shape = ()
        else:
            raise TypeError(f"{name}(): argument 'q' must be Tensor or float, not {type(q).__name__}")
        if interpolation not in _INTERPOLATIONS:
            raise RuntimeError(
                f"{name}() interpolation must be one of linear, lower, higher, midpoint or nearest, but got "
                f"{interpolation}"
            )
        data = input._data
        if data.size == 0:
            raise RuntimeError(f"{name}() input tensor must be non-empty")
        if dim is None:
            shape = (1,) * data.ndim if keepdim else ()
        else:
            d = _one_dim(name, dim, data.ndim)
            shape = _out_shape(data.shape, (d,), keepdim)
        return MetaArray(q_shape + shape, data.dtype)

    def cpu(input, q, dim=None, keepdim=False, *, interpolation="linear"):
        data = input._data
        if dim is None:
            rows, shape = data.reshape(1, -1), ((1,) * data.ndim if keepdim else ())
        else:
            d = wrap_dim(dim, data.ndim)
            moved = _to_last(data, d)
            rows = moved.reshape(-1, moved.shape[-1])
            shape = _out_shape(data.shape, (d,), keepdim)
        if type(data) is np.ndarray:
            q_array = q._host_array() if isinstance(q, Tensor) else np.asarray(q, dtype=data.dtype)
        else:  # CuPy: q's values stay on (or go to) the GPU
            q_array = _array_namespace(data).asarray(q._data if isinstance(q, Tensor) else np.asarray(q, data.dtype))
        result = _quantile_rows(rows, q_array.reshape(-1).astype(data.dtype), interpolation, ignore_nan)
        return result.reshape(tuple(q_array.shape) + shape).copy()

    meta.__name__ = name
    nan_doc = "NaNs are ignored (NaN only where a row is all NaN)" if ignore_nan else "a NaN makes the result NaN"
    meta.__doc__ = f"""The ``q``-quantiles of ``input`` along ``dim`` (of all elements if ``dim`` is None); {nan_doc}.

    Args:
        input (Tensor): float32 or float64, not empty.
        q (float or Tensor): quantiles in ``[0, 1]``: a number, or a 0-D/1-D tensor of ``input``'s dtype.
        dim (int, optional): the dim to reduce.
        keepdim (bool): keep the reduced dim(s) with size 1.
        interpolation (str): between the two nearest sorted values: ``"linear"``, ``"lower"``,
            ``"higher"``, ``"midpoint"`` or ``"nearest"`` (half-way goes to the even rank).

    Returns:
        Tensor: for a 1-D ``q`` its values index the first dim of the result.

    Raises:
        RuntimeError: for other dtypes, ``q`` out of range or of another dtype, an unknown interpolation,
            or an empty ``input``.

    Example:
        >>> import ember
        >>> ember.{name}(ember.tensor([1., 2., 3., 4.]), ember.tensor([0.25, 0.5]))
        tensor([1.7500, 2.5000])
    """
    return defop(name, meta, cpu=cpu, has_out=True, tags=_REDUCTION)


def _quantile_rows(rows, qs, interpolation, ignore_nan):
    """Quantiles ``qs`` (shape (Q,)) of each row of ``rows`` (M, N): shape (Q, M)."""
    dtype = rows.dtype
    ordered = np.sort(rows, axis=1)  # NaN last
    n = rows.shape[1]
    nans = np.isnan(rows).sum(axis=1)
    if ignore_nan:
        last = (n - nans - 1).astype(dtype)  # rank of the last valid value; -1 for an all-NaN row
    else:
        last = _array_namespace(rows).full(rows.shape[0], n - 1, dtype=dtype)
    with np.errstate(all="ignore"):
        ranks = qs[:, None] * last[None, :]  # (Q, M), in the input's dtype as PyTorch
        if not ignore_nan:
            ranks = np.where(nans[None, :] > 0, n - 1, ranks)  # rows with NaN pick a NaN
        ranks = np.where(ranks < 0, n - 1, ranks)  # all-NaN rows (nanquantile): a NaN
        if interpolation == "lower":
            ranks = np.floor(ranks)
        elif interpolation == "higher":
            ranks = np.ceil(ranks)
        elif interpolation == "nearest":
            ranks = np.round(ranks)
        below = np.floor(ranks).astype(_I64)
        above = np.minimum(np.ceil(ranks).astype(_I64), n - 1)
        low = np.take_along_axis(ordered, below.T, axis=1).T
        if interpolation in ("lower", "higher", "nearest"):
            return low
        high = np.take_along_axis(ordered, above.T, axis=1).T
        weight = np.full_like(ranks, 0.5) if interpolation == "midpoint" else (ranks - below).astype(dtype)
        # lerp as PyTorch computes it: from the nearer end
        return np.where(weight < 0.5, low + weight * (high - low), high - (high - low) * (1 - weight)).astype(dtype)


quantile = _quantile_op("quantile", False)
nanquantile = _quantile_op("nanquantile", True)
