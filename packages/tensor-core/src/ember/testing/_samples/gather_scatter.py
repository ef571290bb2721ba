"""OpInfos of the ops that read or write at index or mask positions.

index_select, masked_select/fill/scatter, gather, scatter, scatter_add,
scatter_reduce, index_add/copy/fill/reduce, take, take_along_dim, put,
nonzero and argwhere. Samples have repeated indices (accumulating ops), both
``include_self`` settings and int32 index tensors where PyTorch allows them;
plain scatter/index_copy/put samples use distinct positions, since which
write wins is unspecified there.
"""

from __future__ import annotations

import numpy as np

from ... import _dtype as D
from .._opinfo import OpInfo, SampleInput, register_opinfo
from ._common import maker, scalar_for
from ._shape_helpers import _ember, _errors, _idx, _t, _wide, _with

# -- index_select / masks -------------------------------------------------------------------------------


def _index_select_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    ember = _ember()
    yield SampleInput(make((4, 3)), (0, _idx([2, 0, 2], device)), name="rows, repeated")
    yield SampleInput(make((4, 3), noncontiguous=True), (1, _idx([1], device, ember.int32)), name="int32 index")
    yield SampleInput(make((4, 3)), (-1, _idx(2, device)), name="zero-dim index")
    yield SampleInput(make((4, 3)), (0, _idx(np.zeros(0, np.int64), device)), name="empty index")
    yield SampleInput(make(()), (0, _idx([0], device)), name="zero-dim input")


def _index_select_ref(a, dim, index):
    if a.ndim == 0:
        return a
    return np.take(a, index.reshape(-1), axis=dim)


_index_select_errors = _errors(
    (_with(_t(3, 4), 0, lambda e, d: e.tensor([0.0, 2.0], device=d)), (), {}, RuntimeError,
     "Expected dtype int32 or int64 for index"),
    (_with(_t(3, 4), 0, lambda e, d: e.tensor([0, 3], device=d)), (), {}, IndexError, "index out of range in self"),
    (_with(_t(3, 4), 0, lambda e, d: e.tensor([[0, 2]], device=d)), (), {}, IndexError,
     "Index is supposed to be a vector"),
)


def _mask(device, shape, seed=5):
    rng = np.random.default_rng(seed)
    return _ember().tensor(rng.integers(0, 2, size=shape).astype(bool), device=device)


def _masked_select_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((3, 4)), (_mask(device, (3, 4)),), name="same shape", data_dependent=True)
    yield SampleInput(make((3, 4), noncontiguous=True), (_mask(device, (4,)),), name="broadcast mask",
                      data_dependent=True)
    yield SampleInput(make((4,)), (_mask(device, (2, 4)),), name="broadcast input", data_dependent=True)
    yield SampleInput(make((0, 3)), (_mask(device, (0, 3)),), name="empty")


def _masked_select_ref(a, mask):
    shape = np.broadcast_shapes(a.shape, mask.shape)
    return np.broadcast_to(a, shape)[np.broadcast_to(mask, shape)]


_masked_select_errors = _errors(
    (_with(_t(3, 4), lambda e, d: e.ones(3, 4, device=d)), (), {}, RuntimeError, "expected BoolTensor for mask"),
)


def _masked_fill_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    ember = _ember()
    yield SampleInput(make((3, 4)), (_mask(device, (3, 4)), scalar_for(dtype)), name="number")
    yield SampleInput(make((3, 4), noncontiguous=True), (_mask(device, (4,)), make(())), name="zero-dim tensor value")
    yield SampleInput(make((4,)), (_mask(device, (2, 4)), scalar_for(dtype)), name="mask broadcasts the input")
    yield SampleInput(make((3, 4)), (_mask(device, (3, 4)), ember.tensor(1, device=device)), name="int64 value tensor")
    yield SampleInput(make(()), (_mask(device, ()), scalar_for(dtype)), name="zero-dim")


def _masked_fill_ref(a, mask, value):
    shape = np.broadcast_shapes(a.shape, mask.shape)
    value = np.asarray(value)
    if value.dtype.kind == "c" and a.dtype.kind != "c":
        value = value.real
    filled = np.full(shape, value.astype(np.float64 if a.dtype.kind == "f" else a.dtype) if a.dtype.kind != "b"
                     else value != 0)
    return np.where(mask, filled.astype(a.dtype), np.broadcast_to(a, shape))


_masked_fill_errors = _errors(
    (_with(_t(3, 4), lambda e, d: e.ones(3, 4, device=d)), (1.0,), {}, RuntimeError, "only supports boolean masks"),
    (_with(_t(3, 4), lambda e, d: e.ones(3, 4, dtype=e.bool, device=d), lambda e, d: e.ones(1, device=d)), (), {},
     RuntimeError, "only supports a 0-dimensional value tensor"),
    (_with(_t(3, 4), lambda e, d: e.ones(4, dtype=e.bool, device=d)), (1 + 2j,), {}, RuntimeError,
     "value cannot be converted"),
)


def _masked_scatter_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((3, 4)), (_mask(device, (3, 4)), make((12,))), name="same shape")
    yield SampleInput(make((3, 4), noncontiguous=True), (_mask(device, (4,)), make((4, 5))), name="2-d source")
    yield SampleInput(make((4,)), (_mask(device, (2, 4)), make((8,))), name="mask broadcasts the input")
    yield SampleInput(make((0, 3)), (_mask(device, (0, 3)), make((2,))), name="empty")


def _masked_scatter_ref(a, mask, source):
    shape = np.broadcast_shapes(a.shape, mask.shape)
    out = np.array(np.broadcast_to(a, shape))
    where = np.broadcast_to(mask, shape)
    out[where] = source.reshape(-1)[: int(where.sum())]
    return out


_masked_scatter_errors = _errors(
    (_with(_t(3, 4), lambda e, d: e.ones(3, 4, dtype=e.bool, device=d), lambda e, d: e.zeros(3, device=d)), (), {},
     RuntimeError, "Number of elements of source < number of ones in mask"),
    (_with(_t(3, 4), lambda e, d: e.ones(3, 4, dtype=e.bool, device=d), lambda e, d: e.zeros(12, dtype=e.int64, device=d)),
     (), {}, RuntimeError, "expected self and source to have same dtypes"),
    (_with(_t(3, 4), lambda e, d: e.ones(3, 4, dtype=e.uint8, device=d), lambda e, d: e.zeros(12, device=d)), (), {},
     RuntimeError, "only supports boolean masks"),
)


# -- gather / scatter ------------------------------------------------------------------------------------


def _random_index(shape, size, seed):
    return np.random.default_rng(seed).integers(0, size, size=shape)


def _distinct_index(shape, size, dim, seed):
    """Indices in [0, size) of ``shape``, distinct along ``dim`` (so plain scatters have one write per place)."""
    rng = np.random.default_rng(seed)
    full = list(shape)
    full[dim] = size
    order = np.argsort(rng.random(full), axis=dim)
    return np.take(order, np.arange(shape[dim]), axis=dim)


def _gather_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    ember = _ember()
    yield SampleInput(make((4, 5)), (1, _idx(_random_index((4, 3), 5, 0), device)), name="dim 1")
    yield SampleInput(make((4, 5), noncontiguous=True), (0, _idx(_random_index((2, 5), 4, 1), device)), name="dim 0")
    yield SampleInput(make((4, 5)), (-1, _idx(_random_index((2, 2), 5, 2), device, ember.int32)),
                      name="smaller index, int32")
    yield SampleInput(make((2, 3, 4)).transpose(0, 2), (1, _idx(_random_index((4, 6, 2), 3, 3), device)),
                      name="transposed, index larger along dim")
    yield SampleInput(make(()), (0, _idx(0, device)), name="zero-dim")
    yield SampleInput(make((4, 5)), (1, _idx(np.zeros((0, 5), np.int64), device)), name="empty index")


def _coords(index, dim):
    """Index arrays addressing ``index``'s positions with ``dim`` replaced by its values."""
    grids = list(np.indices(index.shape))
    grids[dim] = index
    return tuple(grids)


def _gather_ref(a, dim, index, sparse_grad=False):
    if a.ndim == 0:
        return a.reshape(1)[index.reshape(1)].reshape(index.shape)
    return a[_coords(index, dim % a.ndim)]


_gather_errors = _errors(
    (_with(_t(3, 4), 1, lambda e, d: e.tensor([[0, 4]], device=d)), (), {}, RuntimeError,
     "index 4 is out of bounds for dimension 1 with size 4"),
    (_with(_t(3, 4), 1, lambda e, d: e.tensor([[-1]], device=d)), (), {}, RuntimeError,
     "index -1 is out of bounds for dimension 1 with size 4"),
    (_with(_t(3, 4), 1, lambda e, d: e.tensor([0], device=d)), (), {}, RuntimeError,
     "Index tensor must have the same number of dimensions as input tensor"),
    (_with(_t(3, 4), 1, lambda e, d: e.zeros(4, 1, dtype=e.int64, device=d)), (), {}, RuntimeError,
     "Size does not match at dimension 0"),
    (_with(_t(3, 4), 1, lambda e, d: e.zeros(1, 1, dtype=e.int16, device=d)), (), {}, RuntimeError,
     "Expected dtype int32/int64 for index"),
)


def _scatter_loop(a, dim, index, values, combine, include_self=True, mean=False):
    """Reference scatter: ``combine(old, new)`` per index position, in row-major order of ``index``."""
    out = _wide(a).reshape(a.shape if a.ndim else (1,))
    index = index.reshape(index.shape if index.ndim else (1,))
    values = values if np.ndim(values) == 0 else np.asarray(values).reshape(np.shape(values) or (1,))
    dim = dim % out.ndim
    result = out.copy()
    touched = {}
    for pos in np.ndindex(*index.shape):
        target = list(pos)
        target[dim] = int(index[pos])
        target = tuple(target)
        new = values if np.ndim(values) == 0 else values[pos]
        touched.setdefault(target, []).append(new)
    for target, news in touched.items():
        acc = out[target] if include_self else None
        for new in news:
            acc = new if acc is None else combine(acc, new)
        if mean:
            count = len(news) + (1 if include_self else 0)
            acc = acc // count if out.dtype.kind in "iu" else acc / count
        result[target] = acc
    return result.reshape(a.shape).astype(a.dtype) if a.dtype.kind != "b" else result.reshape(a.shape)


def _combine(reduce, dtype):
    if dtype == np.bool_:
        return {"sum": np.logical_or, "add": np.logical_or, "prod": np.logical_and, "multiply": np.logical_and,
                "mean": None, "amax": np.logical_or, "amin": np.logical_and, None: lambda old, new: new}[reduce]
    if reduce in ("amax", "amin"):
        return np.maximum if reduce == "amax" else np.minimum
    return {"sum": np.add, "add": np.add, "prod": np.multiply, "multiply": np.multiply, "mean": np.add,
            None: lambda old, new: new}[reduce]


def _scatter_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    small = maker(device, dtype, requires_grad, seed=7, low=-2, high=2)
    ember = _ember()
    value = scalar_for(dtype)
    yield SampleInput(make((4, 5)), (1, _idx(_distinct_index((4, 3), 5, 1, 0), device), make((4, 4))), name="src")
    yield SampleInput(make((4, 5), noncontiguous=True), (0, _idx(_distinct_index((3, 5), 4, 0, 1), device, ember.int32),
                                                          make((3, 5))), name="dim 0, int32 index")
    yield SampleInput(make((4, 5)), (1, _idx(_distinct_index((2, 4), 5, 1, 2), device), value), name="value")
    yield SampleInput(make((4, 5)), (1, _idx(_random_index((4, 6), 5, 3), device), make((4, 6))),
                      {"reduce": "add"}, name="add, repeated")
    yield SampleInput(small((4, 5)), (0, _idx(_random_index((6, 5), 4, 4), device), small((6, 5))),
                      {"reduce": "multiply"}, name="multiply, repeated")
    yield SampleInput(make((4, 5)), (1, _idx(_random_index((3, 6), 5, 5), device)), {"value": value, "reduce": "add"},
                      name="value add, repeated")
    yield SampleInput(make(()), (0, _idx(0, device), make(())), name="zero-dim")
    yield SampleInput(make((4, 5)), (1, _idx(np.zeros((0,), np.int64), device), make((2,))), name="empty index")


def _scatter_ref(a, dim, index, src=None, value=None, reduce=None):
    if src is not None and np.ndim(src) == 0 and not isinstance(src, np.ndarray):
        src, value = None, src
    values = src if src is not None else value
    if src is None and a.dtype.kind != "b":
        values = _wide(np.asarray(value)).astype(_wide(a).dtype)
    elif src is not None:
        values = _wide(src)
    return _scatter_loop(a, dim, index, values, _combine(reduce, a.dtype))


_scatter_errors = _errors(
    (_with(_t(3, 4), 1, lambda e, d: e.tensor([[4]], device=d)), (2.0,), {}, RuntimeError,
     "index 4 is out of bounds for dimension 1 with size 4"),
    (_with(_t(3, 4), 1, lambda e, d: e.tensor([[0, 1]], device=d)), (), {}, TypeError, "missing 1 required argument"),
    (_with(_t(3, 4), 1, lambda e, d: e.tensor([[0, 1]], device=d), lambda e, d: e.ones(1, 2, dtype=e.float64, device=d)),
     (), {}, RuntimeError, "Expected self.dtype to be equal to src.dtype"),
    (_with(_t(3, 4), 1, lambda e, d: e.tensor([[0, 1]], device=d), lambda e, d: e.ones(1, 1, device=d)), (), {},
     RuntimeError, "to be no larger size than src"),
    (_with(_t(3, 4), 1, lambda e, d: e.tensor([[0, 1]], device=d), 1.0), (), {"reduce": "mean"}, RuntimeError,
     "reduce argument must be either add or multiply"),
    (_with(_t(3, 4), 1, lambda e, d: e.tensor([0], device=d), 1.0), (), {}, RuntimeError,
     "Index tensor must have the same number of dimensions as self tensor"),
)


def _scatter_add_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    ember = _ember()
    yield SampleInput(make((4, 5)), (1, _idx(_random_index((4, 6), 5, 0), device), make((4, 6))), name="repeated")
    yield SampleInput(make((4, 5), noncontiguous=True), (0, _idx(_random_index((6, 5), 4, 1), device, ember.int32),
                                                          make((7, 5))), name="dim 0, larger src, int32")
    yield SampleInput(make((3,)), (0, _idx([0, 0, 2, 0], device), make((4,))), name="1-d")
    yield SampleInput(make(()), (0, _idx([0, 0], device), make((2,))), name="zero-dim self")
    yield SampleInput(make((4, 5)), (1, _idx(np.zeros((0, 2), np.int64), device), make((2, 2))), name="empty index")


def _scatter_add_ref(a, dim, index, src):
    return _scatter_loop(a, dim, index, _wide(src), _combine("sum", a.dtype))


_scatter_add_errors = _errors(
    (_with(_t(3, 4), 1, lambda e, d: e.tensor([[0, 1]], device=d), lambda e, d: e.ones(1, 1, device=d)), (), {},
     RuntimeError, "to be no larger size than src"),
    (_with(_t(3, 4), 1, lambda e, d: e.tensor([[5, 1]], device=d), lambda e, d: e.ones(1, 2, device=d)), (), {},
     RuntimeError, "index 5 is out of bounds for dimension 1 with size 4"),
)


def _reductions_for(dtype, choices):
    out = []
    for r in choices:
        if r == "mean" and dtype is D.bool:
            continue
        if r in ("amax", "amin") and dtype.is_complex:
            continue
        out.append(r)
    return out


def _scatter_reduce_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    small = maker(device, dtype, requires_grad, seed=7, low=-2, high=2)
    ember = _ember()
    index = _idx(_random_index((4, 6), 5, 0), device)
    for reduce in _reductions_for(dtype, ("sum", "prod", "mean", "amax", "amin")):
        m = small if reduce == "prod" else make
        for include_self in (True, False):
            yield SampleInput(m((4, 5)), (1, index, m((4, 6)), reduce), {"include_self": include_self},
                              name=f"{reduce}, include_self={include_self}")
        yield SampleInput(m((4, 5), noncontiguous=True),
                          (0, _idx(_random_index((6, 5), 4, 1), device, ember.int32), m((6, 5)), reduce),
                          name=f"{reduce}, dim 0, int32")
    if dtype.is_floating_point and dtype is not D.bfloat16:  # (the inputs-untouched check can't compare bfloat16 NaN)
        nan = make((4,))
        nan[1] = float("nan")
        yield SampleInput(nan, (0, _idx([1, 0, 2], device), make((3,)), "amax"), name="nan propagates")


def _scatter_reduce_ref(a, dim, index, src, reduce, include_self=True):
    return _scatter_loop(a, dim, index, _wide(src), _combine(reduce, a.dtype), include_self, mean=reduce == "mean")


def _reduce_type_error(op, reduce, dtype, error_regex):
    def build(ember, device):
        args_dtype = getattr(ember, dtype)
        x = ember.zeros(3, dtype=args_dtype, device=device)
        return x, (0, ember.tensor([0, 1], device=device), ember.ones(2, dtype=args_dtype, device=device), reduce)

    return (build, (), {}, NotImplementedError, error_regex)


_scatter_reduce_errors = _errors(
    (_with(_t(3, 4), 1, lambda e, d: e.tensor([[0, 1]], device=d), lambda e, d: e.ones(1, 2, device=d)), ("foo",), {},
     RuntimeError, "reduce argument must be either sum, prod, mean, amax or amin"),
    _reduce_type_error("scatter_reduce", "mean", "bool", "not implemented for 'Bool'"),
    _reduce_type_error("scatter_reduce", "amax", "complex64", "not implemented for 'ComplexFloat'"),
)


# -- index_add / index_copy / index_fill / index_reduce ------------------------------------------------------


def _index_loop(a, dim, index, source, combine, include_self=True, mean=False):
    """Reference of the index_* family: slice ``j`` of ``source`` along ``dim`` combines into slice ``index[j]``."""
    out = _wide(a).reshape(a.shape if a.ndim else (1,))
    src = _wide(source).reshape(source.shape if source.ndim else (1,))
    dim = dim % out.ndim
    index = index.reshape(-1)
    result = out.copy()
    groups = {}
    for j, i in enumerate(index):
        groups.setdefault(int(i) % out.shape[dim], []).append(np.take(src, j, axis=dim))
    for i, parts in groups.items():
        acc = np.take(out, i, axis=dim) if include_self else None
        for part in parts:
            acc = part if acc is None else combine(acc, part)
        if mean:
            count = len(parts) + (1 if include_self else 0)
            acc = acc // count if out.dtype.kind in "iu" else acc / count
        key = [slice(None)] * out.ndim
        key[dim] = i
        result[tuple(key)] = acc
    return result.reshape(a.shape).astype(a.dtype)


def _alpha_for(dtype):
    return True if dtype is D.bool else 2


def _index_add_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    ember = _ember()
    yield SampleInput(make((4, 3)), (0, _idx([0, 2, 0], device), make((3, 3))), name="repeated rows")
    yield SampleInput(make((4, 3), noncontiguous=True), (1, _idx([2, 2], device, ember.int32), make((4, 2))),
                      {"alpha": _alpha_for(dtype)}, name="alpha, int32 index")
    yield SampleInput(make((2, 3, 4)), (-1, _idx([3, 0, 3, 1, 3], device), make((2, 3, 5))), name="last dim")
    yield SampleInput(make(()), (0, _idx(0, device), make(())), name="zero-dim")
    yield SampleInput(make((4, 3)), (0, _idx(np.zeros(0, np.int64), device), make((0, 3))), name="empty index")


def _index_add_ref(a, dim, index, source, alpha=1):
    if a.dtype.kind == "b":
        scaled = source & bool(alpha)
        return _index_loop(a, dim, index, scaled, np.logical_or)
    return _index_loop(a, dim, index, _wide(source) * alpha, np.add)


_index_add_errors = _errors(
    (_with(_t(3, 4), 0, lambda e, d: e.tensor([0, 5], device=d), lambda e, d: e.ones(2, 4, device=d)), (), {},
     RuntimeError, "index 5 is out of bounds for dimension 0 with size 3"),
    (_with(_t(3, 4), 0, lambda e, d: e.tensor([0, 1], device=d), lambda e, d: e.ones(3, 4, device=d)), (), {},
     RuntimeError, r"Number of indices \(2\) should be equal to source.size\(dim\): \(3\)"),
    (_with(_t(3, 4), 0, lambda e, d: e.tensor([0, 1], device=d), lambda e, d: e.ones(2, 3, device=d)), (), {},
     RuntimeError, "source tensor shape must match self tensor shape"),
    (_with(_t(3, 4), 0, lambda e, d: e.tensor([0, 1], device=d), lambda e, d: e.ones(2, 4, dtype=e.float64, device=d)),
     (), {}, RuntimeError, "must have the same scalar type"),
    (_with(_t(3, 4), 0, lambda e, d: e.tensor([[0, 1]], device=d), lambda e, d: e.ones(2, 4, device=d)), (), {},
     IndexError, "Index is supposed to be a vector"),
    (_with(_t(3, 4), 0, lambda e, d: e.tensor([0, 1], dtype=e.int16, device=d), lambda e, d: e.ones(2, 4, device=d)),
     (), {}, RuntimeError, "Expected dtype int32/int64 for index"),
)


def _index_copy_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((4, 3)), (0, _idx([3, 0], device), make((2, 3))), name="rows")
    yield SampleInput(make((4, 3), noncontiguous=True), (1, _idx([2, 0, 1], device), make((4, 3))), name="columns")
    yield SampleInput(make((2, 3, 4)), (-1, _idx(1, device), make((2, 3, 1))), name="zero-dim index")
    yield SampleInput(make(()), (0, _idx([0], device), make((1,))), name="zero-dim self")


def _index_copy_ref(a, dim, index, source):
    return _index_loop(a, dim, index, source, lambda old, new: new, include_self=False) if index.size else a


_index_copy_errors = _errors(
    (_with(_t(3, 4), 0, lambda e, d: e.tensor([0, 5], device=d), lambda e, d: e.ones(2, 4, device=d)), (), {},
     IndexError, "index 5 is out of bounds for dimension 0 with size 3"),
    (_with(_t(3, 4), 0, lambda e, d: e.tensor([0, 1], device=d), lambda e, d: e.ones(3, 4, device=d)), (), {},
     IndexError, "Number of indices"),
    (_with(_t(3, 4), 0, lambda e, d: e.tensor([0, 1], dtype=e.int32, device=d), lambda e, d: e.ones(2, 4, device=d)),
     (), {}, RuntimeError, "Expected a long tensor for index"),
    (_with(_t(3, 4), 1, lambda e, d: e.tensor([0, 1], device=d), lambda e, d: e.ones(2, 2, device=d)), (), {},
     RuntimeError, "must have same slice shapes"),
)


def _index_fill_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((4, 3)), (0, _idx([0, 2, 0], device), scalar_for(dtype)), name="rows")
    yield SampleInput(make((4, 3), noncontiguous=True), (1, _idx([-1], device), make(())), name="negative, tensor value")
    yield SampleInput(make((2, 3, 4)), (-1, _idx(2, device), scalar_for(dtype)), name="zero-dim index")
    yield SampleInput(make(()), (0, _idx(0, device), scalar_for(dtype)), name="zero-dim")


def _index_fill_ref(a, dim, index, value):
    out = np.array(a).reshape(a.shape if a.ndim else (1,))
    key = [slice(None)] * out.ndim
    key[dim % out.ndim] = index.reshape(-1)
    value = np.asarray(value)
    out[tuple(key)] = value.astype(out.dtype) if value.dtype.kind != "c" or out.dtype.kind == "c" else value.real
    return out.reshape(a.shape)


_index_fill_errors = _errors(
    (_with(_t(3, 4), 0, lambda e, d: e.tensor([0, 5], device=d)), (1.0,), {}, IndexError,
     "index 5 is out of bounds for dimension 0 with size 3"),
    (_with(_t(3, 4), 0, lambda e, d: e.tensor([0, 1], dtype=e.int32, device=d)), (1.0,), {}, IndexError,
     "Expected dtype int64 for index"),
    (_with(_t(3, 4), 0, lambda e, d: e.tensor([0, 1], device=d), lambda e, d: e.tensor([2.0], device=d)), (), {},
     RuntimeError, "only supports a 0-dimensional value tensor"),
    (_with(_t(3, 4), 0, lambda e, d: e.tensor([[0, 1]], device=d)), (1.0,), {}, RuntimeError,
     "Index has to be a vector/scalar"),
)


def _index_reduce_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    small = maker(device, dtype, requires_grad, seed=7, low=-2, high=2)
    ember = _ember()
    for reduce in _reductions_for(dtype, ("prod", "mean", "amax", "amin")):
        m = small if reduce == "prod" else make
        # PyTorch has no include_self=False kernel for bool and complex
        for include_self in (True, False) if dtype is not D.bool and not dtype.is_complex else (True,):
            yield SampleInput(m((4, 3)), (0, _idx([0, 2, 0, 0], device), m((4, 3)), reduce),
                              {"include_self": include_self}, name=f"{reduce}, include_self={include_self}")
        yield SampleInput(m((4, 3), noncontiguous=True), (1, _idx([2, 2], device, ember.int32), m((4, 2)), reduce),
                          name=f"{reduce}, dim 1, int32")
    if dtype is not D.bool and not dtype.is_complex:  # PyTorch's zero-dim path lacks these dtypes
        yield SampleInput(make(()), (0, _idx(0, device), make(()), "prod"), name="zero-dim")


def _index_reduce_ref(a, dim, index, source, reduce, include_self=True):
    return _index_loop(a, dim, index, source, _combine(reduce, a.dtype), include_self, mean=reduce == "mean")


_index_reduce_errors = _errors(
    (_with(_t(3, 4), 0, lambda e, d: e.tensor([0, 1], device=d), lambda e, d: e.ones(2, 4, device=d)), ("sum",), {},
     RuntimeError, "Expected reduce to be one of prod, mean, amax or amin"),
    (_with(_t(3, 4), 0, lambda e, d: e.tensor([0, 5], device=d), lambda e, d: e.ones(2, 4, device=d)), ("prod",), {},
     IndexError, "index out of range in self"),
    (_with(_t(3, 4), 0, lambda e, d: e.tensor([0, 1], device=d), lambda e, d: e.ones(2, 4, dtype=e.float64, device=d)),
     ("amax",), {}, RuntimeError, "must have the same scalar type"),
    _reduce_type_error("index_reduce", "mean", "bool", "not implemented for 'Bool'"),
    _reduce_type_error("index_reduce", "amin", "complex128", "not implemented for 'ComplexDouble'"),
    (lambda e, d: (e.zeros(3, dtype=e.bool, device=d), (0, e.tensor([0], device=d), e.ones(1, dtype=e.bool, device=d),
                                                        "prod")),
     (), {"include_self": False}, NotImplementedError, "not implemented for 'Bool'"),
)


# -- take / take_along_dim / put ----------------------------------------------------------------------------


def _take_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((3, 4)), (_idx([[0, 11], [-1, 5]], device),), name="2-d index, negative")
    yield SampleInput(make((3, 4), noncontiguous=True), (_idx([2, 2, 7], device),), name="noncontiguous")
    yield SampleInput(make(()), (_idx(0, device),), name="zero-dim")
    yield SampleInput(make((0,)), (_idx(np.zeros(0, np.int64), device),), name="empty")


def _take_ref(a, index):
    return a.reshape(-1)[index]


_take_errors = _errors(
    (_with(_t(3, 4), lambda e, d: e.tensor([12], device=d)), (), {}, IndexError, "out of range: tried to access index 12"),
    (_with(_t(3, 4), lambda e, d: e.tensor([1], dtype=e.int32, device=d)), (), {}, RuntimeError,
     "Expected a long tensor for index"),
    (_with(_t(0), lambda e, d: e.tensor([0], device=d)), (), {}, IndexError, "tried to take from an empty tensor"),
)


def _take_along_dim_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((3, 4)), (_idx(_random_index((3, 2), 4, 0), device), 1), name="dim 1")
    yield SampleInput(make((3, 4), noncontiguous=True), (_idx([[0, -1]], device), 1), name="broadcast index, negative")
    yield SampleInput(make((3, 1)), (_idx(_random_index((2, 5), 3, 1), device),), {"dim": 0}, name="broadcast input")
    yield SampleInput(make((3, 4)), (_idx([[0, 11], [5, 2]], device),), name="flattened")


def _take_along_dim_ref(a, indices, dim=None):
    if dim is None:
        return a.reshape(-1)[indices.reshape(-1)]
    a_shape, i_shape = list(a.shape), list(indices.shape)
    a_shape[dim] = i_shape[dim] = 1
    common = np.broadcast_shapes(tuple(a_shape), tuple(i_shape))
    a_full = list(common)
    a_full[dim] = a.shape[dim]
    i_full = list(common)
    i_full[dim] = indices.shape[dim]
    return np.take_along_axis(np.broadcast_to(a, a_full), np.broadcast_to(indices, i_full), axis=dim)


_take_along_dim_errors = _errors(
    (_with(_t(3, 4), lambda e, d: e.tensor([0, 1], device=d), 1), (), {}, RuntimeError,
     "input and indices should have the same number of dimensions"),
    (_with(_t(3, 4), lambda e, d: e.tensor([[0, 1]], dtype=e.int32, device=d), 1), (), {}, RuntimeError,
     "dtype of indices should be Long"),
    (_with(_t(3, 4), lambda e, d: e.tensor([[0, 1], [1, 1]], device=d), 1), (), {}, RuntimeError,
     "must match the size of tensor b"),
    (_with(_t(3, 4), lambda e, d: e.tensor([[-1]], device=d)), (), {}, RuntimeError,
     "index -1 is out of bounds for dimension 0 with size 12"),
)


def _put_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((3, 4)), (_idx([0, 11, -2], device), make((3,))), name="distinct, negative")
    yield SampleInput(make((3, 4), noncontiguous=True), (_idx([[1, 5], [0, 2]], device), make((4,))),
                      name="2-d index, noncontiguous")
    yield SampleInput(make((3, 4)), (_idx([1, 1, 3, -11], device), make((2, 2)), True), name="accumulate repeated")
    yield SampleInput(make(()), (_idx(0, device), make(())), name="zero-dim")


def _put_ref(a, index, source, accumulate=False):
    flat = _wide(a).reshape(-1)
    for i, v in zip(index.reshape(-1), _wide(source).reshape(-1)):
        if accumulate:
            flat[i] = (flat[i] | v) if flat.dtype == np.bool_ else flat[i] + v
        else:
            flat[i] = v
    return flat.reshape(a.shape).astype(a.dtype)


_put_errors = _errors(
    (_with(_t(3, 4), lambda e, d: e.tensor([0, 12], device=d), lambda e, d: e.ones(2, device=d)), (), {}, IndexError,
     "out of range: tried to access index 12 on a tensor of 12 elements"),
    (_with(_t(3, 4), lambda e, d: e.tensor([0, 1], device=d), lambda e, d: e.ones(3, device=d)), (), {}, IndexError,
     "Expected source and index to have the same number of elements"),
    (_with(_t(3, 4), lambda e, d: e.tensor([0, 1], device=d), lambda e, d: e.ones(2, dtype=e.int64, device=d)), (), {},
     RuntimeError, "self and source expected to have the same dtype"),
)


# -- nonzero / argwhere -------------------------------------------------------------------------------------


def _nonzero_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    zeroed = make((3, 4))
    zeroed[1] = 0
    zeroed[:, 2] = 0
    yield SampleInput(zeroed, name="2-d", data_dependent=True)
    yield SampleInput(make((2, 3, 2), noncontiguous=True), name="3-d", data_dependent=True)
    yield SampleInput(make(()), name="zero-dim", data_dependent=True)
    yield SampleInput(make((0, 3)), name="empty")
    if opinfo.name == "nonzero":
        yield SampleInput(zeroed, kwargs={"as_tuple": True}, name="as_tuple", data_dependent=True)
        yield SampleInput(make(()), kwargs={"as_tuple": True}, name="as_tuple zero-dim", data_dependent=True)


def _nonzero_ref(a, as_tuple=False):
    if as_tuple:
        return tuple(np.nonzero(a.reshape(a.shape or (1,))))
    return np.argwhere(a)


# -- registration ---------------------------------------------------------------------------------------------

_INFOS = [
    OpInfo("index_select", _index_select_samples, ref=_index_select_ref, error_inputs=_index_select_errors),
    OpInfo("masked_select", _masked_select_samples, ref=_masked_select_ref, error_inputs=_masked_select_errors),
    OpInfo("masked_fill", _masked_fill_samples, ref=_masked_fill_ref, error_inputs=_masked_fill_errors),
    OpInfo("masked_scatter", _masked_scatter_samples, ref=_masked_scatter_ref, error_inputs=_masked_scatter_errors),
    OpInfo("gather", _gather_samples, ref=_gather_ref, error_inputs=_gather_errors),
    OpInfo("scatter", _scatter_samples, ref=_scatter_ref, error_inputs=_scatter_errors),
    OpInfo("scatter_add", _scatter_add_samples, ref=_scatter_add_ref, error_inputs=_scatter_add_errors),
    OpInfo("scatter_reduce", _scatter_reduce_samples, ref=_scatter_reduce_ref, error_inputs=_scatter_reduce_errors),
    OpInfo("index_add", _index_add_samples, ref=_index_add_ref, error_inputs=_index_add_errors),
    OpInfo("index_copy", _index_copy_samples, ref=_index_copy_ref, error_inputs=_index_copy_errors),
    OpInfo("index_fill", _index_fill_samples, ref=_index_fill_ref, error_inputs=_index_fill_errors),
    OpInfo("index_reduce", _index_reduce_samples, ref=_index_reduce_ref, error_inputs=_index_reduce_errors),
    OpInfo("take", _take_samples, ref=_take_ref, error_inputs=_take_errors),
    OpInfo("take_along_dim", _take_along_dim_samples, ref=_take_along_dim_ref, error_inputs=_take_along_dim_errors),
    OpInfo("put", _put_samples, ref=_put_ref, error_inputs=_put_errors),
    OpInfo("nonzero", _nonzero_samples, ref=_nonzero_ref, supports_autograd=False),
    OpInfo("argwhere", _nonzero_samples, ref=np.argwhere, supports_autograd=False),
]

for _info in _INFOS:
    register_opinfo(_info)
